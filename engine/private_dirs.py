"""State directories: where they are by default, and created readable by their owner only (the
index holds private notes). The resident-search client uses `default_state_path` before anything
else is imported, so this module imports only `os` (not even pathlib: a second CLI search is
mostly interpreter start-up, and pathlib with its imports is 10 ms of it)."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["default_state_dir", "default_state_path", "make_private_dir", "private_runtime_path"]


def default_state_path(env: Mapping[str, str]) -> str:
    """`$MEMSIFT_STATE_DIR`, else `$XDG_STATE_HOME/memsift` (`~/.local/state/memsift`)."""
    if env.get("MEMSIFT_STATE_DIR"):
        return os.path.expanduser(env["MEMSIFT_STATE_DIR"])
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(os.path.expanduser(base), "memsift")


def default_state_dir(env: Mapping[str, str]) -> Path:
    """`default_state_path` as a Path."""
    from pathlib import Path  # noqa: PLC0415

    return Path(default_state_path(env))


def make_private_dir(path: Path) -> None:
    """`mkdir -p` where every directory this call creates gets mode 0700.

    Existing directories are left as they are: they belong to the user, who chose their mode.
    (`Path.mkdir(parents=True, mode=...)` applies the mode to the last component only.)"""
    from pathlib import Path  # noqa: PLC0415

    missing: list[Path] = []
    p = Path(path)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)  # mkdir's mode is masked by the umask


# A socket's path must fit sun_path (107 bytes); a socket's name ("<12 hex>-<pid>.sock") takes up to 26.
RUNTIME_PATH_MAX = 74


def private_runtime_path(env: Mapping[str, str], *, create: bool = False) -> str | None:
    """This user's private runtime folder: `$XDG_RUNTIME_DIR/memsift`, else (also when that path is
    too long to hold a socket: a sandbox's deep runtime folder) `/tmp/memsift-<uid>` (the resident
    helpers' sockets; the model cache's fallback). None when it is missing, or not safely ours:
    another user's folder, a symlink, or one others can write to is never used."""
    runtime = env.get("XDG_RUNTIME_DIR")
    folder = os.path.join(runtime, "memsift") if runtime and os.path.isdir(runtime) else ""
    if not folder or len(folder.encode("utf-8", "surrogateescape")) > RUNTIME_PATH_MAX:
        folder = f"/tmp/memsift-{os.getuid()}"
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder
