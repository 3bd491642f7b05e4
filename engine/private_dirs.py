"""State directories: where they are by default, and created readable by their owner only (the
index holds private notes). Standard library only: the resident-search client uses it too."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["default_state_dir", "make_private_dir"]


def default_state_dir(env: Mapping[str, str]) -> Path:
    """`$MEMSIFT_STATE_DIR`, else `$XDG_STATE_HOME/memsift` (`~/.local/state/memsift`)."""
    if env.get("MEMSIFT_STATE_DIR"):
        return Path(env["MEMSIFT_STATE_DIR"]).expanduser()
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "memsift"


def make_private_dir(path: Path) -> None:
    """`mkdir -p` where every directory this call creates gets mode 0700.

    Existing directories are left as they are: they belong to the user, who chose their mode.
    (`Path.mkdir(parents=True, mode=...)` applies the mode to the last component only.)"""
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
