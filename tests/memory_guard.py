"""Proof that memsift left the Markdown memory files alone: a snapshot of every `.md` file under a
folder (inode, size, mtime, content hash), compared after the run; counted into FIGURES."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from figures import FIGURES

Snapshot = dict[str, tuple[int, int, int, str]]


def snapshot(*roots: Path) -> Snapshot:
    out: Snapshot = {}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if name.lower().endswith(".md"):
                    p = Path(dirpath) / name
                    st = os.lstat(p)
                    out[str(p)] = (st.st_ino, st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def assert_untouched(before: Snapshot, *roots: Path) -> None:
    """Every memory file is still there, same inode, size, mtime and bytes; none was added."""
    after = snapshot(*roots)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    FIGURES["memory files checked (renamed, modified or deleted: counted below)"] += len(before)
    FIGURES["memory files renamed, modified or deleted"] += len(changed)
    assert not changed, changed
