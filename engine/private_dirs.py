"""Create state directories readable by their owner only (the index holds private notes)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["make_private_dir"]


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
