"""Proof that memsift left the Markdown memory files alone: a snapshot of every `.md` file under a
folder (inode, size, mtime, content hash), compared after the run; counted into FIGURES."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from figures import FIGURES

Snapshot = dict[str, tuple[int, int, int, str]]


def _entry(p: Path) -> tuple[int, int, int, str]:
    st = os.lstat(p)
    return st.st_ino, st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()


def snapshot(*roots: Path) -> Snapshot:
    out: Snapshot = {}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if name.lower().endswith(".md"):
                    out[str(Path(dirpath) / name)] = _entry(Path(dirpath) / name)
    return out


def assert_untouched(before: Snapshot, *roots: Path, new_files_allowed: bool = False) -> None:
    """Every memory file is still there, same inode, size, mtime and bytes; none was added (unless
    the test adds notes itself: `new_files_allowed`)."""
    after = snapshot(*roots)
    names = before.keys() if new_files_allowed else before.keys() | after.keys()
    changed = sorted(p for p in names if before.get(p) != after.get(p))
    FIGURES["memory files checked (renamed, modified or deleted: counted below)"] += len(before)
    FIGURES["memory files renamed, modified or deleted"] += len(changed)
    assert not changed, changed
