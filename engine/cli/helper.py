"""The resident helper: a cold `memsift search` starts one, and later CLI searches ask it.

The way Gradle, Bazel and sccache start their servers: the first search pays the cold start and
then launches `memsift … resident-helper` in the background, detached; that process opens the
same manager, keeps the index fresh (as `memsift watch` does) and answers the CLI over the
resident socket (`resident.py`, `resident_server.py`: the same private folder, 0600 socket, and
exact-settings check). It exits after `memory.residentHelper.idleTimeout` without a search.

One helper per workspace and settings: a helper holds an exclusive lock on
`<rendezvous>/helper-<key>.lock` (key: the state directory, the relevant environment, the
folder and the command-line options), and a second one started meanwhile exits at once.
Opt out with `MEMSIFT_NO_RESIDENT=1` or `memory.residentHelper.enabled: false`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, Mapping

from .resident import command_index, relevant_env, rendezvous_dir, state_tag

__all__ = ["helper_argv", "helper_lock_path", "start_helper", "take_helper_lock", "helper_pids"]


def helper_argv(argv: list[str], backend: str | None) -> list[str] | None:
    """The helper's command line for a search's argv: the group options (workspace, agent,
    config, backend), then `resident-helper`; None when argv is not a search."""
    cut = command_index(argv)
    if cut is None or argv[cut] != "search":
        return None
    group = list(argv[:cut]) + (["--backend", backend] if backend else [])
    return [*group, "resident-helper"]


def helper_lock_path(folder: Path, argv: list[str], cwd: str, env: Mapping[str, str]) -> Path:
    key = json.dumps([state_tag(env), relevant_env(env), cwd, argv], sort_keys=True)
    return folder / f"helper-{hashlib.sha256(key.encode()).hexdigest()[:16]}.lock"


def take_helper_lock(path: Path) -> IO[str] | None:
    """The open, exclusively locked lock file (held for the helper's life), or None when another
    helper holds it."""
    fh = open(path, "a+")  # noqa: SIM115  (kept open: the lock lives as long as the file handle)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def start_helper(argv: list[str], backend: str | None, settings: Any, env: Mapping[str, str] | None = None) -> int | None:
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
    try:
        lock = take_helper_lock(helper_lock_path(folder, helper, os.getcwd(), env))
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


def helper_pids(folder: Path) -> list[int]:
    """Process ids of the helpers whose lock files are in `folder` (tests stop them with it)."""
    pids = []
    for lock in folder.glob("helper-*.lock"):
        try:
            pids.append(int(lock.read_text().strip()))
        except (OSError, ValueError):
            continue
    return pids
