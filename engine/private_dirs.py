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

__all__ = ["current_path", "default_state_dir", "default_state_path", "home_folder", "make_private_dir", "no_home",
           "private_runtime_path", "user_cache_path", "user_config_path", "MAX_SOCKET_PATH"]


def current_path() -> str | None:
    """The current folder; None where it was deleted or moved away (a shell left in it)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def home_folder() -> str | None:
    """The user's home folder: `$HOME`, else the password database's; None where neither knows one
    (a container run as an arbitrary uid with HOME unset), rather than a folder named "~" made in
    the current one."""
    home = os.path.expanduser("~")
    return home if os.path.isabs(home) else None


def no_home(instead: str) -> Exception:
    """The error for a place that needs a home folder where none is known; `instead`: what to set."""
    from .errors import ConfigError  # noqa: PLC0415  (not on the resident client's path)

    return ConfigError(f"no home folder is known for this user (uid {os.getuid()}: HOME is unset and the password "
                       f"database has no entry for it): set HOME, or {instead}")


def user_cache_path(env: Mapping[str, str]) -> str | None:
    """`$XDG_CACHE_HOME`, else `~/.cache`; None where no home folder is known."""
    return _xdg(env, "XDG_CACHE_HOME", ".cache")


def user_config_path(env: Mapping[str, str]) -> str | None:
    """`$XDG_CONFIG_HOME`, else `~/.config`; None where no home folder is known."""
    return _xdg(env, "XDG_CONFIG_HOME", ".config")


def _xdg(env: Mapping[str, str], name: str, under_home: str) -> str | None:
    if env.get(name):
        return os.path.expanduser(env[name])
    home = home_folder()
    return os.path.join(home, under_home) if home is not None else None


def default_state_path(env: Mapping[str, str]) -> str:
    """`$MEMSIFT_STATE_DIR`, else `$XDG_STATE_HOME/memsift` (`~/.local/state/memsift`); a ConfigError
    where no home folder is known (`no_home`)."""
    if env.get("MEMSIFT_STATE_DIR"):
        return os.path.expanduser(env["MEMSIFT_STATE_DIR"])
    base = _xdg(env, "XDG_STATE_HOME", os.path.join(".local", "state"))
    if base is None:
        raise no_home("MEMSIFT_STATE_DIR to the folder for memsift's index")
    return os.path.join(base, "memsift")


def openclaw_state_dir(env: Mapping[str, str]) -> Path | None:
    """OpenClaw's state folder as OpenClaw finds it: `$OPENCLAW_STATE_DIR`, else `~/.openclaw`
    (None where no home folder is known)."""
    from pathlib import Path  # noqa: PLC0415

    found = _xdg(env, "OPENCLAW_STATE_DIR", ".openclaw")
    return Path(os.path.abspath(found)) if found else None


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


MAX_SOCKET_PATH = 100  # sun_path holds 107 bytes
# A socket's name ("<12 hex>-<pid>.sock") takes up to 26 of them after the folder.
RUNTIME_PATH_MAX = MAX_SOCKET_PATH - 26


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
