"""The indexes in a state folder (`memsift index --list`), and removing those whose workspace is gone (`--prune`).

The default index name holds a hash, not the workspace, so every index records its workspace in
its meta. Only files that open as SQLite and carry memsift's meta count as indexes; anything
else in the folder is never listed or removed, and of an index's companions only those with
memsift's own names (its quarantined copies `<db>.corrupt-<time>-<pid>`) go with it. An index
another process is writing (its lock is held) is left alone; a symlink at its lock is never followed.
"""

from __future__ import annotations

import fcntl
import glob
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from memsift.engine.errors import IndexUnusableError

from .index_file import quarantine_name_re
from .store import open_db, read_meta, scalar

__all__ = ["IndexInfo", "list_indexes", "prune_indexes"]


@dataclass(frozen=True)
class IndexInfo:
    path: str
    workspace: str | None  # None: indexed before memsift recorded it (never pruned)
    workspace_exists: bool | None
    provider: str | None
    model: str | None
    files: int
    chunks: int
    bytes: int  # the database with its -wal and -shm files
    modified: float

    def to_json_dict(self) -> dict:
        d = asdict(self)
        return {"path": d["path"], "workspace": d["workspace"], "workspaceExists": d["workspace_exists"],
                "provider": d["provider"], "model": d["model"], "files": d["files"], "chunks": d["chunks"],
                "bytes": d["bytes"], "modified": d["modified"]}


def _companions(db: Path) -> list[str]:
    """The files that belong to index `db`: WAL, shared memory, lock, and the damaged copies memsift
    moved aside (by their names only: `<db>.corrupt-notes` is someone else's)."""
    quarantined = quarantine_name_re(db)
    moved = [p for p in glob.glob(f"{glob.escape(str(db))}.corrupt-*")
             if quarantined.fullmatch(os.path.basename(p).removesuffix("-wal").removesuffix("-shm"))]
    return [f"{db}{s}" for s in ("-wal", "-shm", ".lock") if os.path.exists(f"{db}{s}")] + moved


def _describe(db: Path) -> IndexInfo | None:
    try:
        conn, _ = open_db(db, vector_enabled=False, readonly=True)
    except IndexUnusableError:
        return None  # not a database, or not one we can read: not ours to list
    try:
        meta = read_meta(conn)
        if meta is None:
            return None
        files = scalar(conn, "SELECT count(*) FROM files")
        chunks = scalar(conn, "SELECT count(*) FROM chunks")
    except Exception:
        return None
    finally:
        conn.close()
    ws = meta.get("workspace")
    size = sum(os.path.getsize(p) for p in [str(db), *_companions(db)] if os.path.isfile(p))
    return IndexInfo(str(db), ws, os.path.isdir(ws) if ws else None, meta.get("provider"), meta.get("model"),
                     files, chunks, size, db.stat().st_mtime)


def list_indexes(folder: Path) -> list[IndexInfo]:
    """memsift indexes directly in `folder` (the state folder's `memory/`), by path."""
    if not folder.is_dir():
        return []
    found = (_describe(p) for p in sorted(folder.glob("*.sqlite")) if p.is_file() and not p.is_symlink())
    return [i for i in found if i is not None]


def prune_indexes(folder: Path) -> tuple[list[IndexInfo], list[tuple[IndexInfo, str]]]:
    """Remove the indexes whose recorded workspace no longer exists. Returns (removed, kept with why)."""
    removed, kept = [], []
    for info in list_indexes(folder):
        if info.workspace_exists is not False:
            continue
        db = Path(info.path)
        try:
            fd = os.open(f"{db}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:  # a symlink (or something else) at the lock: never followed
            kept.append((info, f"its lock {db}.lock is not a regular file"))
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                kept.append((info, "in use by another memsift process"))
                continue
            for path in [*_companions(db), str(db)]:
                if not path.endswith(".lock"):
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass
            os.unlink(f"{db}.lock")  # while we hold it: no writer can be waiting on a removed index
            removed.append(info)
        finally:
            os.close(fd)
    return removed, kept
