"""`memsift mcp`: the server's life, from the handshake to SIGTERM.

Over stdio the client's `initialize` is answered first (handshake.py), and only then are the
config, the index and the MCP SDK loaded: a client's connect timeout (OpenClaw's is 5 s) never
waits for them. SIGTERM and SIGINT (and SIGHUP, its terminal closing, unless
`nohup` ignores it) end the server promptly, children and all:

- while it waits for the client or serves, the signal cancels the server's task group, so the
  manager closes its subprocesses and the index on the way out;
- while it loads (the config, the SDK: synchronous work), the signal ends the process at once,
  since nothing is open yet;
- nothing reads the wire in a thread that could keep the process alive (stdio.py);
- and whatever it is doing, the process is gone about 1 s after the signal (engine/mcp/stopping.py): on a
  busy machine a cancellation only lands at the next `await`, which synchronous work (importing
  the SDK, building the model's int8 graph, a close that waits for a sync) held off for 5–12 s.

The exit status is 128 + the signal's number (143 for SIGTERM), as for a process the signal ended.
"""

from __future__ import annotations

import signal
import socket
import sys
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Literal

from .stopping import exit_within, stop_signals, watch_signals

if TYPE_CHECKING:
    from ..config import ResolvedConfig
    from ..config.follow import ConfigFollower
    from ..manager import SearchManager
    from .server import MemoryServer
    from .stdio import StdioWire

__all__ = ["serve", "Transport", "AlsoServe"]

Transport = Literal["stdio", "http"]
AlsoServe = Callable[["SearchManager", "ResolvedConfig"], Coroutine[Any, Any, None]]


class _Stopper:
    """The process's stop-signal handler while it serves: cancels the scope it is given (from
    the signal handler, through the loop), or, with no scope (synchronous loading), exits."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._scope: Any = None
        self._loop: Any = None
        self._saved = {sig: signal.getsignal(sig) for sig in stop_signals()}
        for sig in self._saved:
            signal.signal(sig, self._handle)
        watch_signals()  # the grace starts when the signal arrives, not when the main thread gets to it

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is None:  # the first signal: the process ends within the grace, whatever holds it
            exit_within(signum)
        self.signum = signum
        if self._scope is None:
            raise SystemExit(128 + signum)
        self._loop.call_soon_threadsafe(self._scope.cancel)

    def unguard(self) -> None:
        """The next signal exits (a signal already had: nothing more now; the caller is ending)."""
        self._scope = None

    def guard(self, scope: Any) -> None:
        """`scope` is cancelled by the next signal (None: the next signal exits). A signal that came
        while the previous scope was ending (its cancel landed on nothing) acts now."""
        import asyncio  # noqa: PLC0415

        self._loop = asyncio.get_running_loop()
        self._scope = scope
        if self.signum is not None:
            if scope is None:
                raise SystemExit(128 + self.signum)
            scope.cancel()

    def restore(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def exit_if_stopped(self) -> None:
        if self.signum is not None:
            raise SystemExit(128 + self.signum)


async def serve(
    load_settings: Callable[[], ResolvedConfig],
    *,
    backend: str | None = None,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    session_key: str | None = None,
    max_chars: int | None = None,
    fresh: bool = True,
    also_serve: AlsoServe | None = None,
    allow_hosts: tuple[str, ...] = (),
    settings_and_sources: Callable[[], tuple[ResolvedConfig, list[tuple[Any, Any]]]] | None = None,
) -> None:
    """Serve MCP until the transport ends or the process is told to stop. The settings are read
    after the stdio handshake: with `settings_and_sources` when given, and followed (when the
    config's files change into other settings, the server goes on with those: config/follow.py),
    else with `load_settings`; a ConfigError ends the server with its message.
    `also_serve(manager, settings)` runs beside it while the index is kept fresh: the CLI passes
    its resident server, so `memsift search` from a terminal is answered by this process (MCP
    itself knows nothing of the CLI)."""
    import anyio  # noqa: PLC0415

    stopper = _Stopper()
    wire: StdioWire | None = None
    listener: socket.socket | None = None
    try:
        if transport == "http":
            from .http import listening_socket  # noqa: PLC0415

            listener = listening_socket(host, port)  # a port in use is said at once, before anything loads
        elif transport == "stdio":
            from .stdio import ClientGone, StdioWire  # noqa: PLC0415

            wire = StdioWire()
            with anyio.CancelScope() as waiting:
                stopper.guard(waiting)
                try:
                    await wire.handshake()
                except ClientGone:  # it closed stdout before memsift could answer: nothing to serve
                    return
            stopper.guard(None)
            if waiting.cancel_called:
                return
        follower = None
        if settings_and_sources is not None:
            from ..config.follow import ConfigFollower  # noqa: PLC0415  (after the handshake)

            follower = ConfigFollower(settings_and_sources, on_broken=_say)
        await _serve(follower.load() if follower else load_settings(), stopper, backend=backend, wire=wire,
                     listener=listener, host=host, session_key=session_key, max_chars=max_chars, fresh=fresh,
                     also_serve=also_serve, allow_hosts=allow_hosts, follower=follower)
    finally:
        if listener is not None:
            listener.close()
        stopper.restore()
        if wire is not None:
            wire.release()
        stopper.exit_if_stopped()


async def _serve(settings: ResolvedConfig, stopper: _Stopper, *, backend: str | None, wire: StdioWire | None,
                 listener: socket.socket | None, host: str, session_key: str | None, max_chars: int | None,
                 fresh: bool, also_serve: AlsoServe | None, allow_hosts: tuple[str, ...] = (),
                 follower: ConfigFollower | None = None) -> None:
    """Open the manager, keep it fresh, and serve until the transport ends or is cancelled."""
    import anyio  # noqa: PLC0415

    from ..compose.factory import open_manager  # noqa: PLC0415
    from .server import MemoryServer, build_server  # noqa: PLC0415

    for note in settings.notes:  # the config's warnings, where the client's logs show a server's stderr
        _say(f"warning: {note}")
    memory = MemoryServer(open_manager(settings, backend=backend), settings, session_key=session_key,
                          max_chars=max_chars)
    try:
        server = build_server(memory)
        async with anyio.create_task_group() as tg:
            stopper.guard(tg.cancel_scope)
            tg.start_soon(_in_background, memory, follower, fresh, also_serve, backend)
            if wire is not None:
                from .stdio import ClientGone  # noqa: PLC0415

                # The SDK's own run loop, over a transport that answers malformed requests too.
                lowlevel = server._lowlevel_server  # noqa: SLF001
                try:
                    async with wire.sdk_streams() as (read, write):
                        await lowlevel.run(read, write, lowlevel.create_initialization_options())
                except* ClientGone:
                    pass  # the client stopped reading: the session is over, as when stdin closes
            else:
                from .http import serve_http  # noqa: PLC0415

                assert listener is not None  # made by serve() for HTTP
                await serve_http(server, listener, host=host, allow_hosts=allow_hosts)
            tg.cancel_scope.cancel()
    finally:
        stopper.unguard()  # a signal now exits (the grace's timer ends a close that hangs)
        with anyio.CancelScope(shield=True):
            await memory.served.aclose()


async def _in_background(memory: MemoryServer, follower: ConfigFollower | None, fresh: bool,
                         also_serve: AlsoServe | None, backend: str | None) -> None:
    """Keep the served manager's index fresh (and `also_serve` beside it); when the config changes
    into other settings, open a manager for them, serve it and close the old one."""
    import anyio  # noqa: PLC0415

    from ..compose.factory import open_manager  # noqa: PLC0415
    from ..compose.host import serve_freshness  # noqa: PLC0415

    while True:
        manager, settings = memory.served, memory.settings
        async with anyio.create_task_group() as tg:
            if fresh:
                tg.start_soon(serve_freshness, manager, settings)
                if also_serve is not None:  # kept fresh, so it can answer `memsift search` quickly too
                    tg.start_soon(also_serve, manager, settings)
            if follower is None:
                await anyio.sleep_forever()
                return
            new, replacement = await follower.next_opened(settings, lambda s: open_manager(s, backend=backend))
            tg.cancel_scope.cancel()
        for note in new.notes:
            _say(f"warning: {note}")
        _say(f"the config changed: serving its new settings (workspace {new.workspace}, "
             f"backend {backend or new.memory.backend})")
        await memory.replace(replacement, new)


def _say(message: str) -> None:
    """A line on stderr, where an MCP client's logs show a server's messages."""
    print(f"memsift: {message}", file=sys.stderr, flush=True)
