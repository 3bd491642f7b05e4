"""The resident helper: a cold `memsift search` starts one, and later CLI searches ask it.

The way Gradle, Bazel and sccache start their servers: the first search pays the cold start and
then launches `memsift … resident-helper` in the background, detached; that process opens the
same manager, keeps the index fresh (as `memsift watch` does) and answers the CLI over the
resident socket (`resident.py`, `resident_server.py`: the same private folder, 0600 socket, and
exact-settings check). It exits after `memory.residentHelper.idleTimeout` without a search.

**One helper per workspace and settings**: its lock file, `<rendezvous>/helper-<key>.lock`, is
named after the resolved settings (the identity the resident server compares: workspace, agent,
config, backend, every key) plus the state folder and the relevant environment, not after how
the command line spelled them: `-v`, `-w ./ws` or another current folder start no second one. The
helper holds an exclusive lock on it for its life and writes what `memsift status` and
`memsift helpers` show (pid, start, idle timeout, workspace); a second one started meanwhile exits
at once. `memsift helpers stop` ends this workspace's helper, `--all` every helper of the user.
At most `memory.residentHelper.maxHelpers` run per user (each holds an index and a model: about
60–230 MB); past it a search is answered cold and starts none. Lock files of helpers that ended
are removed when helpers are listed (`status`, `helpers`, a cold search).
Opt out with `MEMSIFT_NO_RESIDENT=1` or `memory.residentHelper.enabled: false`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Mapping

from .resident import command_index, forget_if_dead, relevant_env, rendezvous_dir, state_tag

__all__ = [
    "helper_argv",
    "helper_lock_path",
    "settings_identity",
    "start_helper",
    "take_helper_lock",
    "write_helper_info",
    "helper_pids",
    "helpers",
    "helper_for",
    "stop_helper",
    "HelperInfo",
]

_VERBOSE = ("-v", "-vv", "-vvv", "--verbose")
STALE_LOCK_S = 60.0  # a lock file nobody holds is removed once this old (a helper starting takes it within a second)


def settings_identity(settings: Any, backend: str | None) -> str:
    """What a resident server answers for: the resolved settings and the backend, as one string."""
    data = settings.model_dump(mode="json")
    data["backend"] = backend or settings.memory.backend
    return json.dumps(data, sort_keys=True, default=str)


def helper_argv(argv: list[str], backend: str | None) -> list[str] | None:
    """The helper's command line for a search's argv: the group options (workspace, agent,
    config, backend; never -v: logs would change nothing it answers), then `resident-helper`;
    None when argv is not a search."""
    cut = command_index(argv)
    if cut is None or argv[cut] != "search":
        return None
    group = [a for a in argv[:cut] if a not in _VERBOSE] + (["--backend", backend] if backend else [])
    return [*group, "resident-helper"]


def helper_lock_path(folder: Path, settings: Any, backend: str | None, env: Mapping[str, str]) -> Path:
    key = json.dumps([state_tag(env), relevant_env(env), settings_identity(settings, backend)], sort_keys=True)
    return folder / f"helper-{hashlib.sha256(key.encode()).hexdigest()[:16]}.lock"


def take_helper_lock(path: Path) -> IO[str] | None:
    """The open, exclusively locked lock file (held for the helper's life), or None when another
    helper holds it. A lock file removed as stale between the open and the lock (`helpers`) is
    not the one at the path any more: opened again."""
    for _ in range(3):
        fh = open(path, "a+")  # noqa: SIM115  (kept open: the lock lives as long as the file handle)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return None
        try:
            if os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino:
                return fh
        except FileNotFoundError:
            pass
        fh.close()
    return None


def _remove_if_stale(lock: Path) -> None:
    """A lock file no helper holds, left for a minute, is removed (taken first, so a helper
    starting on it either holds it, and it stays, or opens the path again)."""
    try:
        if time.time() - lock.stat().st_mtime < STALE_LOCK_S:
            return
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.unlink(missing_ok=True)
    except OSError:
        pass  # held: a helper runs
    finally:
        os.close(fd)


def write_helper_info(lock: IO[str], settings: Any, idle_timeout: str, *, kind: str = "helper") -> None:
    """What `status` and `helpers` show of this helper (`kind`: a helper, or `watch` / `mcp`
    answering the CLI's searches while they run), written into its held lock file."""
    lock.seek(0)
    lock.truncate()
    lock.write(json.dumps({"pid": os.getpid(), "started": time.time(), "idleTimeout": idle_timeout, "kind": kind,
                           "workspace": str(settings.workspace), "agent": settings.agent_id}) + "\n")
    lock.flush()


def start_helper(
    argv: list[str], backend: str | None, settings: Any, env: Mapping[str, str] | None = None
) -> int | None:
    """After a cold search: start a helper unless one runs (or is starting) for these settings,
    or the user opted out. Returns the new process id, or None. Never raises: the search has
    already been answered."""
    env = os.environ if env is None else env
    if env.get("MEMSIFT_NO_RESIDENT") or not settings.memory.resident_helper.enabled:
        return None
    helper = helper_argv(argv, backend)
    folder = rendezvous_dir(env, create=True)
    if helper is None or folder is None:
        return None
    if helpers_at_cap(settings, folder) is not None:
        return None  # enough helpers of this user run (memory.residentHelper.maxHelpers); searches go cold
    try:
        lock = take_helper_lock(helper_lock_path(folder, settings, backend, env))
        if lock is None:
            return None  # one runs, or is loading
        lock.close()  # the helper takes it itself; if two start, the second exits
        proc = subprocess.Popen(
            [sys.executable, "-m", "memsift.engine.cli.main", *helper],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, env=dict(env),
        )
    except OSError:
        return None
    return proc.pid


def helpers_at_cap(settings: Any, folder: Path | None) -> int | None:
    """How many of this user's helpers run, when that is `memory.residentHelper.maxHelpers` or more
    (no new one starts); None while another may start."""
    running = sum(h.get("kind", "helper") == "helper" for h in helpers(folder))
    return running if running >= settings.memory.resident_helper.max_helpers else None


class HelperInfo(dict):
    """A running helper: pid, started, idleTimeout, workspace, agent, ageS, rssMB, lock."""


def _read_info(lock: Path) -> HelperInfo | None:
    """The helper holding `lock`, or None when none does (the file is left by one that ended)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None  # nobody holds it
        except BlockingIOError:
            pass
        raw = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)
    try:
        data = json.loads(raw) if raw.startswith("{") else {"pid": int(raw)}
        info = HelperInfo(data, lock=str(lock))
        info["pid"] = int(info["pid"])
    except (ValueError, KeyError, TypeError):
        return None
    if info.get("started"):
        info["ageS"] = round(time.time() - float(info["started"]), 1)
    try:
        status = Path(f"/proc/{info['pid']}/status").read_text()
        info["rssMB"] = round(int(status.split("VmRSS:")[1].split()[0]) / 1024, 1)
    except (OSError, IndexError, ValueError):
        info["rssMB"] = None
    return info


def helpers(folder: Path | None) -> list[HelperInfo]:
    """Every running helper whose lock file is in `folder` (the user's rendezvous folder); the
    lock files of helpers that ended are removed on the way, and the sockets of servers killed
    before they could remove them (a client cleans only its own settings' sockets)."""
    if folder is None or not folder.is_dir():
        return []
    for sock in folder.glob("*.sock"):
        forget_if_dead(str(sock))
    running = []
    for lock in sorted(folder.glob("helper-*.lock")):
        info = _read_info(lock)
        if info is None:
            _remove_if_stale(lock)
        else:
            running.append(info)
    return running


def helper_for(settings: Any, backend: str | None, env: Mapping[str, str] | None = None) -> HelperInfo | None:
    """The helper serving these settings, if one runs."""
    env = os.environ if env is None else env
    folder = rendezvous_dir(env, create=False)
    return _read_info(helper_lock_path(folder, settings, backend, env)) if folder else None


def stop_helper(info: HelperInfo, wait_s: float = 30.0) -> str | None:
    """SIGTERM the helper (it ends its own children on the way out) and wait for its lock to be
    free; None when it stopped, else why not. A helper stopped during its QMD boot update ends
    QMD's process group first: on a loaded 2-core machine that has taken over 10 s."""
    try:
        os.kill(info["pid"], signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if _read_info(Path(info["lock"])) is None and not _alive(info["pid"]):
            return None
        time.sleep(0.05)
    if _alive(info["pid"]):
        return f"it is still running {wait_s:.0f} s after SIGTERM (`kill -9 {info['pid']}` ends it)"
    return f"it has ended, but its lock {info['lock']} is still held by another process"


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def helper_pids(folder: Path) -> list[int]:
    """Process ids of the helpers running with lock files in `folder` (tests stop them with it)."""
    return [info["pid"] for info in helpers(folder)]
