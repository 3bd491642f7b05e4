"""A process told to stop is gone within a grace period, whatever it is doing.

A signal's handler runs only between bytecodes of the main thread, and the cancellation it starts
lands only at the next `await`: synchronous work (importing the MCP SDK, building the model's int8
graph, a close that waits for a sync thread, an interpreter exit joining a worker thread) held
`memsift mcp` for 5-12 s, once for a minute, on a busy machine. So the first stop signal
(SIGTERM, SIGINT, or SIGHUP when its terminal closes) also starts a daemon timer (armed at once by
a thread that the C-level signal handler wakes through `signal.set_wakeup_fd`, even while the main
thread is inside a long call; else by the Python handler, when it runs); when it fires, the
process's own children (a QMD sidecar, in a process group of its own) are killed and the process
exits with 128 + the signal's number. Nothing is lost by it: the Markdown files are never written,
and the index and the model cache are written atomically (SQLite's journal; a temporary name,
renamed). `memsift watch` and the resident helper take a longer grace (`STOP_GRACE_S`): a sync
they run stops between transactions, which on a busy machine may take seconds. With Python's fault
handler on (`PYTHONFAULTHANDLER=1`, `-X faulthandler`) a process ended by the grace first prints
every thread's stack, to show what held it.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from typing import Any

__all__ = [
    "end_children",
    "end_on_unraisable_stops",
    "exit_within",
    "own_children",
    "signalled",
    "stop_signals",
    "GRACE_S",
    "STOP_GRACE_S",
    "watch_signals",
]

GRACE_S = 1.0  # a signalled memsift is gone by then (or soon after, on a busy machine), whatever it was doing
STOP_GRACE_S = 10.0  # the same for `watch` and the resident helper, whose syncs end between transactions

_armed: list[threading.Timer] = []


def stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that tell memsift to stop: SIGTERM, SIGINT, and SIGHUP (the terminal or the SSH
    session that ran `memsift watch` or `memsift mcp` closed) unless it is ignored (`nohup`: the
    operator asked that the process outlive its terminal)."""
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None or signal.getsignal(hangup) == signal.SIG_IGN:
        return (signal.SIGTERM, signal.SIGINT)
    return (signal.SIGTERM, signal.SIGINT, hangup)


def own_children() -> list[int]:
    """This process's children: the kernel's list of each thread's (cheap), else a scan of /proc;
    none where there is no /proc."""
    found = list[int]()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", "rb") as fh:
                found += [int(pid) for pid in fh.read().split()]
        return found
    except (OSError, ValueError):
        found = []
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after the command name, which may hold spaces
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def signalled() -> bool:
    """A stop signal has been received (its grace is armed)."""
    return bool(_armed)


def end_children() -> None:
    """Kill this process's children (a sidecar's process group whole) and reap them, so none is
    left for a moment after it; again for one a worker thread started meanwhile (the int8 graph's
    build), a few rounds at most."""
    for _ in range(3):
        children = own_children()
        if not children:
            return
        for child in children:
            try:
                if os.getpgid(child) == child:  # a group of its own: the sidecar and what it started
                    os.killpg(child, signal.SIGKILL)
                else:
                    os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        for child in children:
            try:
                os.waitpid(child, 0)
            except OSError:  # reaped already (its Popen's own wait)
                pass


def _end_now(signum: int, grace_s: float) -> None:
    end_children()
    if faulthandler.is_enabled():  # a developer's run: what held the process
        faulthandler.dump_traceback(all_threads=True)
    try:
        os.write(2, f"memsift: stopped by signal {signum} (its work did not end within {grace_s:g} s)\n".encode())
    except OSError:
        pass
    os._exit(128 + signum)


def end_on_unraisable_stops() -> None:
    """A stop signal's exit raised where Python cannot raise it (inside a weakref callback of the
    import machinery, a finaliser) is printed as "Exception ignored in … Traceback" and dropped, and
    the process goes on until its grace ends: it ends at once instead, quietly, as the grace would
    (its children first). Other unraisable errors keep Python's report. Once per process."""
    previous = sys.unraisablehook
    if getattr(previous, "memsift_stops", False):
        return

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt) or (isinstance(exc, SystemExit) and signalled()):
            code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 130
            end_children()
            os._exit(code)
        previous(unraisable)

    hook.memsift_stops = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def exit_within(signum: int, grace_s: float = GRACE_S) -> None:
    """The process exits `grace_s` from now unless it has by then (armed once; later calls do nothing)."""
    if _armed:
        return
    timer = threading.Timer(grace_s, _end_now, args=(signum, grace_s))
    timer.daemon = True
    _armed.append(timer)
    timer.start()


_watching: list[int] = []


# The wakeup fd is written only for a signal with a Python handler: an ignored SIGHUP never gets here.
_STOPPING = {signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", signal.SIGTERM)}


def _watch(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum in _STOPPING:
                exit_within(signum)


def watch_signals() -> None:
    """Arm the grace the moment a stop signal arrives (their Python handlers must be installed:
    the wakeup fd is written for signals that have one). Once per process; from the main thread."""
    end_on_unraisable_stops()
    if _watching:
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main thread: the Python handlers arm it
        os.close(read_fd)
        os.close(write_fd)
        return
    _watching.append(write_fd)
    threading.Thread(target=_watch, args=(read_fd,), name="memsift-signal-watch", daemon=True).start()
