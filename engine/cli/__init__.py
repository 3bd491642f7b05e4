"""The `memsift` command line.

`main` is the console script. A search is first offered to a running memsift (`resident.py`),
before anything heavy is imported; everything else (and any search it declines) runs in `main.py`.
"""

from __future__ import annotations

import os

__all__ = ["main"]

# memsift uses no pydantic plugins; looking for them scans every installed package's entry points
# (~15 ms of each cold call). Set when the command line's package loads, so `python -m
# memsift.engine.cli.main` (whose module imports pydantic's models first) is spared it as the
# console script is: this process and its children (a resident helper) only.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")


def main() -> None:
    import sys  # noqa: PLC0415

    from .resident import try_resident  # noqa: PLC0415
    from .streams import prepare_standard_streams  # noqa: PLC0415

    prepare_standard_streams()

    code = try_resident(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    if _serves_stdio_mcp(sys.argv[1:]):  # the client's `initialize` answered before the CLI loads (handshake.py)
        import signal  # noqa: PLC0415

        from ..mcp import stopping  # noqa: PLC0415  (the handlers' import, done now)
        from ..mcp.handshake import answer_before_loading  # noqa: PLC0415

        # Ctrl-C while the client is awaited or the CLI, the config and the SDK load: a quiet exit 130, as
        # once it serves (not a KeyboardInterrupt traceback, nor click's "Aborted!" and 1). The server's
        # own handler replaces it.
        for sig in stopping.stop_signals():  # as main.py's own, installed here before the wait
            signal.signal(sig, _interrupted)
        stopping.watch_signals()
        answer_before_loading()
    import gc  # noqa: PLC0415

    # Importing makes only long-lived objects (modules, classes, pydantic schemas): no collection
    # pass is worth its time there, and frozen, they are skipped by the collections of the run and
    # of the interpreter's exit (together ~30 ms of a cold search).
    gc.disable()
    from .main import main as run  # noqa: PLC0415

    gc.freeze()
    gc.enable()
    try:
        run()
    except SystemExit as exc:
        _exit_now(exc.code)
    _exit_now(0)


def _interrupted(signum: int, _frame: object) -> None:
    from ..mcp.stopping import exit_within  # noqa: PLC0415  (imported before the handler is installed)

    exit_within(signum)
    raise SystemExit(128 + signum)


def _serves_stdio_mcp(argv: list[str]) -> bool:
    """`memsift [group options] mcp [options]` over stdio, from a client (stdin is no terminal)."""
    import os  # noqa: PLC0415

    from .resident import command_index  # noqa: PLC0415

    at = command_index(argv)
    if at is None or argv[at] != "mcp" or any(a in ("--http", "-h", "--help") for a in argv[at + 1:]):
        return False
    try:
        return not os.isatty(0)
    except OSError:
        return False


def _exit_now(code: object) -> None:
    """Leave as `sys.exit(code)` does, without tearing down the interpreter: the exit handlers
    run and the output is flushed, but the ~100,000 objects of the imports are not freed one by
    one (about 18 ms of a cold search). Everything memsift writes is closed before this point,
    and an index left open is safe anyway (SQLite's journal). A thread still running (work left
    to finish) gets the ordinary exit, which waits for it."""
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415

    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)  # type: ignore[arg-type]  # sys.exit takes any object (it prints a non-int)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): printed, exit status 1
        print(code, file=sys.stderr)
        status = 1
    import atexit  # noqa: PLC0415

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`memsift search … | head`): nothing to flush into
            if stream is sys.stdout:
                status = status or 120  # what Python's own exit reports for an unflushable stdout
    os._exit(status)
