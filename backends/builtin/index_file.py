"""Whose file is at the index path: memsift's own database, nothing yet, or something memsift must
never move, overwrite or follow.

memsift marks every database it creates with `PRAGMA application_id` (set before the file turns
to WAL mode, so it is in the header on disk at once). A file at the index path is memsift's when
its header carries that mark, when it is an older memsift index (readable, with memsift's
tables), or when it sits in memsift's own state folder and is not a readable database of anyone
else (a damaged index there is memsift's to move aside and rebuild). A zero-byte file holds
nothing to lose and counts as no index yet. Anything else (another program's database, a text
file, a symlink, a folder, a fifo) is refused with a message that says what to do; its
quarantine, orphan clean-up and rebuild never touch it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Literal

import apsw

from memsift.engine.errors import IndexUnusableError

__all__ = [
    "APPLICATION_ID",
    "IndexFileKind",
    "inspect_index_file",
    "is_memsift_database",
    "quarantine_name_re",
    "temp_name_re",
]

APPLICATION_ID = 0x6D736674  # "msft" in the SQLite header (offset 68)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_MEMSIFT_TABLES = {"meta", "files", "chunks", "embedding_cache"}
IndexFileKind = Literal["missing", "empty", "ours"]


def _header(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def _read_only(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_NOFOLLOW)
    conn.set_busy_timeout(5000)  # a writer may be checkpointing
    return conn


def _table_names(path: Path) -> set[str] | None:
    """The tables of a readable SQLite database, or None when it cannot be read."""
    try:
        conn = _read_only(path)
    except apsw.Error:
        return None
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except apsw.Error:
        return None
    finally:
        conn.close()


def _inside(path: Path, folder: Path | None) -> bool:
    if folder is None:
        return False
    real, root = Path(os.path.realpath(path.parent)), Path(os.path.realpath(folder))
    return real == root or root in real.parents


def is_memsift_database(path: Path) -> bool:
    """The header carries memsift's mark (or the file is empty): safe for memsift to remove."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        if st.st_size == 0:
            return True
        header = _header(path)
    except OSError:
        return False
    return header.startswith(_SQLITE_MAGIC) and int.from_bytes(header[68:72], "big") == APPLICATION_ID


def inspect_index_file(path: Path, state_dir: Path | None) -> IndexFileKind:
    """What is at the index path; raises IndexUnusableError (with what to do) for anything memsift
    must leave alone."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        raise IndexUnusableError(
            f"cannot inspect index {path}: {exc.strerror}. Check the folders on that path, or point "
            "MEMSIFT_STATE_DIR (or store.path) at a folder you can write"
        ) from None
    if stat.S_ISLNK(st.st_mode):
        raise IndexUnusableError(
            f"index {path} is a symlink; memsift does not follow symlinks where it writes its index. "
            "Remove the link, or point store.path at a real file"
        )
    if not stat.S_ISREG(st.st_mode):
        raise IndexUnusableError(
            f"index {path} is not a regular file (a folder, fifo or device); set store.path to a file"
        )
    if st.st_size == 0:
        return "empty"
    try:
        header = _header(path)
    except OSError as exc:
        raise IndexUnusableError(f"cannot read index {path}: {exc.strerror}") from None
    if header.startswith(_SQLITE_MAGIC):
        mark = int.from_bytes(header[68:72], "big")
        if mark == APPLICATION_ID:
            return "ours"
        if mark == 0:
            tables = _table_names(path)
            if tables is not None and _MEMSIFT_TABLES <= tables:
                return "ours"  # made before databases carried the mark
            if tables is None and _inside(path, state_dir):
                return "ours"  # damaged beyond reading, in memsift's own folder
        what = "another program's SQLite database"
    elif _inside(path, state_dir):
        return "ours"  # a damaged index in memsift's own state folder (header overwritten)
    else:
        what = "not a SQLite database"
    raise IndexUnusableError(
        f"{path} is not a memsift index ({what}); memsift never moves or overwrites files it did not make. "
        "Move the file away, or set store.path to another file, then run `memsift index`"
    )


def quarantine_name_re(db: Path) -> re.Pattern[str]:
    """Names memsift gives the damaged indexes it moves aside (`<db>.corrupt-<time>-<pid>`)."""
    return re.compile(re.escape(db.name) + r"\.corrupt-\d{8}-\d{6}-\d+")


def temp_name_re(db: Path) -> re.Pattern[str]:
    """Names of memsift's rebuild databases (`<db>.tmp-<12 hex>`)."""
    return re.compile(re.escape(db.name) + r"\.tmp-[0-9a-f]{12}")
