"""Running the `qmd` command: its own session and process group, timeouts that kill the whole
group (the `bin/qmd` launcher spawns a second Node process and forwards no signals), capped output.

Errors (all `QmdError`, a `BackendError`): the binary cannot be spawned, a timeout, a non-zero
exit, output over the cap. Callers turn them into a fallback to the builtin backend.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Mapping

import anyio

from memsift.engine.logging import get_logger
from memsift.engine.errors import BackendError
from memsift.engine.limits import waiting_on

__all__ = [
    "QmdError",
    "QmdSpawnError",
    "QmdTimeout",
    "QmdExitError",
    "QmdOutputError",
    "QmdResult",
    "run_qmd",
    "resolve_command",
    "command_prefix",
    "kill_live_groups",
]

log = get_logger("memsift.qmd.process")

MAX_OUTPUT_CHARS = 200_000
KILL_GRACE_S = 2.0
# Process groups of the qmd runs still going in this process. Every run ends its group itself
# (timeout, cancellation, a finished launcher's strays); this is the last resort when memsift
# exits another way (SIGTERM, SIGINT unwinding the CLI): the whole group is killed at exit, so a
# `memory.qmd.command` wrapper script's children die with it.
_LIVE_GROUPS: set[int] = set()


def kill_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _LIVE_GROUPS.discard(pgid)


atexit.register(kill_live_groups)


class QmdError(BackendError):
    """QMD failed; the reason is safe to show."""


class QmdSpawnError(QmdError):
    pass


class QmdTimeout(QmdError):
    pass


class QmdExitError(QmdError):
    def __init__(self, message: str, *, rc: int, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.rc, self.stdout, self.stderr = rc, stdout, stderr


class QmdOutputError(QmdError):
    pass


@dataclass(frozen=True)
class QmdResult:
    rc: int
    stdout: str
    stderr: str
    took_ms: float


_REWRITES = ("/opt/homebrew/bin/qmd", "/usr/local/bin/qmd")


def resolve_command(command: str, env: Mapping[str, str]) -> str:
    """The executable: the first word of the shell-split `memory.qmd.command`, found on PATH."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise QmdSpawnError(f"memory.qmd.command {command!r} cannot be parsed: {exc}") from None
    if not words:
        raise QmdSpawnError("memory.qmd.command is empty")
    exe = "qmd" if words[0] in _REWRITES else words[0]
    found = shutil.which(exe, path=env.get("PATH"))
    if found is None:
        log.debug("qmd not found", command=command, path=env.get("PATH", ""))
        if os.sep in exe and os.path.isfile(exe):
            raise QmdSpawnError(f"{exe} is not executable (memory.qmd.command): make it executable (chmod +x) "
                                "or point memory.qmd.command at qmd")
        if os.sep in exe:
            raise QmdSpawnError(
                f"qmd is not installed at {exe} (memory.qmd.command; see The QMD backend in memsift's docs)"
            )
        raise QmdSpawnError(f"{exe} is not installed or not on PATH (see The QMD backend in memsift's docs)")
    return found


def command_prefix(exe: str, env: Mapping[str, str]) -> list[str]:
    """How to start qmd so that nothing can outlive memsift.

    The npm launcher (`bin/qmd`) spawns a second Node process and forwards no signals; when the
    launcher is recognised, its entry point `dist/cli/qmd.js` is run directly with `node` (one
    process). On Linux, `setpriv --pdeathsig KILL` makes the kernel kill it if memsift dies, even
    by SIGKILL, when no timeout of ours could run.
    """
    argv = [exe]
    real = os.path.realpath(exe)
    entry = os.path.join(os.path.dirname(os.path.dirname(real)), "dist", "cli", "qmd.js")
    node = shutil.which("node", path=env.get("PATH"))
    if real.endswith(os.path.join("@tobilu", "qmd", "bin", "qmd")) and os.path.isfile(entry) and node:
        argv = [node, entry]
    setpriv = shutil.which("setpriv", path=env.get("PATH"))
    if setpriv and os.uname().sysname == "Linux":
        argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
    return argv


def _kill_group(proc: anyio.abc.Process, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the child runs in its own session: pgid == pid
    except (ProcessLookupError, PermissionError):
        pass


async def _terminate(proc: anyio.abc.Process, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the whole group, then SIGKILL what is left after a grace period."""
    if grace_s > 0:
        _kill_group(proc, signal.SIGTERM)
        with anyio.move_on_after(grace_s):
            await proc.wait()
    _kill_group(proc, signal.SIGKILL)  # also reaps a grandchild that ignored SIGTERM
    with anyio.move_on_after(KILL_GRACE_S):
        await proc.wait()


async def _start(argv: list[str], **options: object) -> anyio.abc.Process:
    """Start qmd in its own session; its group is registered before any cancellation goes on.

    A cancellation that lands while the new process is being connected (the first Ctrl-C cancels
    the main task) used to lose it: asyncio killed the direct child only, and a wrapper script's
    children outlived memsift. The start runs as a task of its own, awaited through a shield; a
    caller cancelled meanwhile waits for it to finish, ends the group, then goes on cancelled."""
    start = asyncio.ensure_future(anyio.open_process(argv, **options))  # type: ignore[arg-type]
    try:
        proc = await asyncio.shield(start)
    except asyncio.CancelledError:
        with anyio.CancelScope(shield=True):
            try:
                started = await start
            except Exception:  # noqa: BLE001 (a start that failed left nothing to end)
                raise asyncio.CancelledError from None
            _LIVE_GROUPS.add(started.pid)
            await _terminate(started, 0)
            _LIVE_GROUPS.discard(started.pid)
            await started.aclose()
        raise
    _LIVE_GROUPS.add(proc.pid)
    return proc


async def _drain(stream, sink: list[bytes], limit: int, overflow: list[bool]) -> None:
    size = 0
    async for data in stream:
        if size < limit:
            sink.append(data[: limit - size])
        size += len(data)
        if size > limit:
            overflow[0] = True


def _crash_or_exit(rc: int) -> tuple[str, str]:
    """('crashed (SIGSEGV, signal 11 / exit 139)', hint) for a signal (a negative code, or 128+n
    from a shell in between), else ('exited with code 1', '')."""
    sig = -rc if rc < 0 else rc - 128 if 128 < rc < 128 + 65 else None
    if sig is None:
        return f"exited with code {rc}", ""
    try:
        name = f"{signal.Signals(sig).name}, signal {sig}"
    except ValueError:
        name = f"signal {sig}"
    hint = (
        " (QMD 2.8.3 crashes like this on Node older than 22: check `node --version`)" if sig == signal.SIGSEGV else ""
    )
    return f"crashed ({name}" + (f" / exit {rc})" if rc > 0 else ")"), hint


async def run_qmd(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    timeout_s: float,
    check: bool = True,
    max_output: int = MAX_OUTPUT_CHARS,
    doing: str | None = None,
    kill_grace_s: float = KILL_GRACE_S,
) -> QmdResult:
    """Run qmd, return its output. Raises QmdError subclasses (never leaves a process behind).

    `doing` says what the call does, for messages ("searching collection notes-main");
    `kill_grace_s` is how long a stopped process gets between SIGTERM and SIGKILL (0 for
    read-only calls: they are killed at once)."""
    started = time.perf_counter()
    doing = doing or "running qmd"
    log.debug(f"qmd: {doing}", argv=argv, timeout=f"{timeout_s:.1f} s")
    try:
        proc = await _start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(env), cwd=cwd, start_new_session=True)
    except OSError as exc:
        raise QmdSpawnError(f"cannot start qmd ({argv[0]}) for {doing}: {exc.strerror or exc}") from None
    out: list[bytes] = []
    err: list[bytes] = []
    overflow = [False]
    timed_out = False
    try:
        with anyio.move_on_after(timeout_s) as scope, waiting_on(f"qmd {doing}"):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, proc.stdout, out, max_output * 4, overflow)
                tg.start_soon(_drain, proc.stderr, err, 64_000, [False])
            await proc.wait()
        timed_out = scope.cancelled_caught
    finally:
        if proc.returncode is None:
            with anyio.CancelScope(shield=True):
                await _terminate(proc, kill_grace_s)
        else:
            _kill_group(proc, signal.SIGKILL)  # stray grandchildren of a finished launcher
        _LIVE_GROUPS.discard(proc.pid)
        await proc.aclose() if hasattr(proc, "aclose") else None
    took = (time.perf_counter() - started) * 1000
    stdout = b"".join(out).decode("utf-8", "replace")
    stderr = b"".join(err).decode("utf-8", "replace")
    rc = proc.returncode if proc.returncode is not None else -1  # waited for above: always set by now
    log.debug(f"qmd: done {doing}", rc=rc, ms=round(took))
    if timed_out:
        raise QmdTimeout(f"qmd did not finish {doing} within {timeout_s:.1f} s and was stopped")
    if overflow[0] or len(stdout) > max_output:
        raise QmdOutputError(f"qmd printed more than {max_output} characters while {doing}")
    if check and rc != 0:
        detail = (stderr.strip() or stdout.strip())[:300]
        what, hint = _crash_or_exit(rc)
        message = f"qmd {what} while {doing}" + (f": {detail}" if detail else "") + hint
        raise QmdExitError(message, rc=rc, stdout=stdout, stderr=stderr)
    return QmdResult(rc, stdout, stderr, took)
