"""The server side of resident searches (see `resident.py`): a long-running memsift answers the
CLI's `memsift search` with the manager it already has open.

A request is answered only when it resolves to this server's own settings: the same relevant
environment, and the same resolved config (workspace, agent, state and store paths, every
memorySearch and memory key, config file) and backend. Anything else is declined and the CLI
searches by itself, so a resident answer is always the answer the cold CLI would have given.

A local client must never freeze or stop the server it shares with MCP and the watcher: a
request must arrive whole (at most 1 MiB) within 2 s; the config file it names is read in a worker
thread (regular files only, at most 1 MiB: a fifo or /dev/zero is refused at once); at most 16
connections are served at a time (more are closed at once, and the CLI searches by itself); a
search that takes over 20 s is given up; running out of file descriptors pauses accepting
instead of ending the server. `--help` is never parsed here (click would print it into the
server's own output).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import anyio
import click

from ..errors import MemsiftError
from ..config.workspace import workspace_warning
from ..limits import budget_s, run_within
from ..logging import get_logger
from ..private_dirs import MAX_SOCKET_PATH, current_path
from ..search.request import SearchRequest
from .options import cli_search_request, group_params, search_params
from .helper import settings_identity
from .output import exit_code, search_output
from .resident import PROTOCOL, WORKING, asks_for_help, command_index, relevant_env, rendezvous_dir, state_tag

__all__ = ["serve_resident", "frame_reply", "MAX_REQUEST_BYTES", "MAX_CONNECTIONS", "READ_TIMEOUT_S"]

log = get_logger("memsift.resident")

MAX_REQUEST_BYTES = 2**20  # a query is cut at 4,096 characters anyway; argv and env are small
MAX_DRAIN_BYTES = 64 * 2**20  # read and dropped after declining a request that is too large
READ_TIMEOUT_S = 2.0  # a request must arrive whole (the client closes its side) within this
PARSE_TIMEOUT_S = 5.0  # resolving the client's config, in a worker thread
SEARCH_TIMEOUT_S = 20.0  # the client gives up 30 s after the acknowledgement
MAX_CONNECTIONS = 16
_WORKING = WORKING + b"\n"
_PATH_VARS = ("MEMSIFT_CONFIG", "MEMSIFT_WORKSPACE", "MEMSIFT_STATE_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME")


def frame_reply(reply: dict[str, Any]) -> bytes:
    """An answer as the client reads it (`resident.py`, protocol 3): `ok EXIT NOUT NERR` and the
    output's bytes; a decline as one ASCII JSON line. surrogatepass: a lone surrogate (an
    undecodable byte of the query, echoed back) survives the trip."""
    if reply.get("status") != "ok":
        return json.dumps(reply).encode("ascii") + b"\n"
    out = reply["stdout"].encode("utf-8", "surrogatepass")
    err = reply["stderr"].encode("utf-8", "surrogatepass")
    return f"ok {int(reply['exit'])} {len(out)} {len(err)}\n".encode("ascii") + out + err


class _Decline(Exception):
    """This server does not answer the request; the CLI searches by itself."""


class ResidentServer:
    def __init__(
        self, manager: Any, settings: Any, *, backend: str | None, on_answer: Callable[[dict], None] | None = None
    ) -> None:
        self.manager = manager
        self.settings = settings
        self.backend = backend
        self.on_answer = on_answer or (lambda _info: None)
        self.identity = settings_identity(settings, backend)
        self.env = relevant_env(os.environ)
        self.answered = 0
        self.active = 0  # connections being served
        self._parsers = anyio.CapacityLimiter(2)  # worker threads reading clients' configs

    # --- one request ------------------------------------------------------------------------

    def _parse(self, argv: list[str], cwd: str) -> tuple[Any, SearchRequest, dict[str, Any]]:
        """The client's settings, its search (the same request the cold CLI builds) and its CLI
        facts (backend, output form); _Decline for anything the cold CLI should answer itself."""
        from ..compose.factory import resolve_config  # noqa: PLC0415

        cut = command_index(argv)
        if cut is None or argv[cut] != "search":
            raise _Decline("not a search")
        if asks_for_help(argv, cut):
            raise _Decline("help was asked for")  # click would print it here, into our output
        try:
            group = click.Command("memsift", params=group_params()).make_context("memsift", argv[:cut])
            sub = click.Command("search", params=search_params()).make_context("search", argv[cut + 1:])
        except (click.ClickException, click.exceptions.Exit) as exc:
            raise _Decline(f"arguments: {exc}") from None  # the CLI prints click's own message, exit 2
        g, p = group.params, sub.params
        if g.get("verbose"):
            raise _Decline("logs were asked for (-v)")
        settings = resolve_config(g.get("config_path"), workspace=g.get("workspace"), agent=g.get("agent"), cwd=cwd,
                                  openclaw_config=g.get("openclaw_config"))
        try:
            request = cli_search_request(p, settings, p["query"])  # as the cold CLI builds it
        except click.ClickException as exc:
            raise _Decline(f"arguments: {exc}") from None  # the cold CLI exits 2 with the same message
        return settings, request, {"backend": p.get("backend") or g.get("backend"), "as_json": bool(p.get("as_json")),
                                   "timeout": g.get("timeout")}

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            if request.get("protocol") != PROTOCOL:
                raise _Decline("protocol")
            env, cwd = request.get("env") or {}, str(request.get("cwd") or "")
            if env != self.env:
                raise _Decline("the environment differs")
            if cwd != (current_path() or "") and any(v in env and not os.path.isabs(env[v]) for v in _PATH_VARS):
                raise _Decline("relative paths in the environment")
            argv = [str(a) for a in request.get("argv") or []]
            try:
                # The client names the config file: read it off the event loop, bounded.
                with anyio.fail_after(PARSE_TIMEOUT_S):
                    settings, search, cli = await anyio.to_thread.run_sync(
                        self._parse, argv, cwd, limiter=self._parsers, abandon_on_cancel=True)
            except MemsiftError as exc:
                raise _Decline(f"config: {exc}") from None  # the CLI reports it with its exit code
            except TimeoutError:
                raise _Decline("reading the config took too long") from None
            if settings_identity(settings, cli["backend"]) != self.identity:
                raise _Decline("other settings")
        except _Decline as exc:
            log.debug("resident request declined", reason=str(exc))
            return {"status": "decline", "reason": str(exc)}
        shown_workspace = False  # the cold CLI warns of an empty workspace after an allowed answer only
        budget = budget_s(settings, "search", cli["timeout"])
        try:
            with anyio.fail_after(SEARCH_TIMEOUT_S):
                # The search the cold CLI would run, every option, within the same budget (memory.limits.search,
                # --timeout): past it the cold CLI's message and exit code. Past SEARCH_TIMEOUT_S (the
                # client's patience) the request is declined and the cold CLI tries within its own.
                answer = await run_within(lambda: self.manager.answer(search), command="search", budget=budget,
                                          budget_from="--timeout" if cli["timeout"] else "memory.limits")
            out, err, code = search_output(answer, as_json=cli["as_json"], explain=search.explain)
            shown_workspace = answer.denied is None
        except TimeoutError:
            return {"status": "decline", "reason": "the search took too long"}
        except MemsiftError as exc:
            out, err, code = "", f"memsift: {exc}\n", exit_code(exc)
        warning = workspace_warning(settings) if shown_workspace else None
        if warning:
            err = f"memsift: warning: {warning}\n" + err
        err = "".join(f"memsift: warning: {note}\n" for note in settings.notes) + err  # as the cold CLI says them
        self.answered += 1
        log.info("answered a CLI search", exit=code)
        self.on_answer({"command": "search", "exit": code})
        return {"status": "ok", "stdout": out, "stderr": err, "exit": code}

    # --- the socket -------------------------------------------------------------------------

    async def _handle(self, stream: Any) -> None:
        self.active += 1
        try:
            await self._exchange(stream)
        except Exception as exc:  # one bad connection must never stop the server
            log.warning("resident connection failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self.active -= 1

    async def _read_request(self, stream: Any) -> bytes | None:
        """The whole request (the client closes its side), or None when it is too large."""
        data = bytearray()
        try:
            while len(data) <= MAX_REQUEST_BYTES:
                data += await stream.receive()
        except anyio.EndOfStream:
            return bytes(data)
        return None

    async def _exchange(self, stream: Any) -> None:
        async with stream:
            try:
                with anyio.fail_after(READ_TIMEOUT_S):
                    data = await self._read_request(stream)
            except TimeoutError:  # half-open: the request never ended
                return
            except (anyio.BrokenResourceError, OSError):
                return
            if data is None:
                reply = {"status": "decline", "reason": "request too large"}
            else:
                try:
                    request = json.loads(data.decode("ascii"))
                except ValueError:
                    request = None
                if not isinstance(request, dict):
                    reply = {"status": "decline", "reason": "not a request"}
                else:
                    try:
                        await stream.send(_WORKING)  # alive: the client now waits for the answer
                        reply = await self.answer(request)
                    except (anyio.BrokenResourceError, OSError):
                        return  # the client went away
                    except Exception as exc:  # a bug must not stop the server; the CLI falls back
                        log.warning("resident request failed", error=f"{type(exc).__name__}: {exc}")
                        reply = {"status": "decline", "reason": "server error"}
            try:
                with anyio.fail_after(READ_TIMEOUT_S):
                    await stream.send(frame_reply(reply))
                    if data is None:
                        await _drain(stream)
            except (TimeoutError, anyio.BrokenResourceError, OSError):
                pass

    async def _accept(self, listener: Any) -> Any:
        """The next connection. Out of file descriptors (a flood), accepting pauses instead of
        ending the server."""
        while True:
            try:
                return await listener.accept()
            except anyio.BrokenResourceError as exc:
                log.warning("cannot accept a resident connection; pausing", error=str(exc.__cause__ or exc))
                await anyio.sleep(0.2)

    async def serve(self, *, task_status: anyio.abc.TaskStatus[Path | None] = anyio.TASK_STATUS_IGNORED) -> None:
        folder = rendezvous_dir(os.environ, create=True)
        sock = folder / f"{state_tag(os.environ)}-{os.getpid()}.sock" if folder else None
        if sock is None or len(str(sock)) > MAX_SOCKET_PATH:
            log.info("resident searches off: no private folder for the socket", folder=str(folder))
            task_status.started(None)
            return
        sock.unlink(missing_ok=True)
        listener = await anyio.create_unix_listener(sock, mode=0o600)
        try:
            async with listener, anyio.create_task_group() as tg:
                task_status.started(sock)
                while True:
                    stream = await self._accept(listener)
                    if self.active >= MAX_CONNECTIONS:
                        await anyio.aclose_forcefully(stream)  # the CLI searches by itself at once
                        continue
                    tg.start_soon(self._handle, stream)
        finally:
            sock.unlink(missing_ok=True)


async def serve_resident(
    manager: Any, settings: Any, *, backend: str | None = None, on_answer: Callable[[dict], None] | None = None,
    task_status: anyio.abc.TaskStatus[Path | None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Answer resident searches until cancelled (the socket is removed on the way out)."""
    await ResidentServer(manager, settings, backend=backend, on_answer=on_answer).serve(task_status=task_status)


async def _drain(stream: Any) -> None:
    """A lingering close after declining an oversized request: closing with the client's bytes
    unread would reset the connection, and the client could miss the decline. Its side is read to
    the end and thrown away, within MAX_DRAIN_BYTES (the caller bounds the time)."""
    await stream.send_eof()
    drained = 0
    try:
        while drained <= MAX_DRAIN_BYTES:
            drained += len(await stream.receive())
    except anyio.EndOfStream:
        pass
