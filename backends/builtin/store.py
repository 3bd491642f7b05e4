"""SQLite store for the builtin backend: open (apsw), sqlite-vec, schema migrations, meta.

Schema (numbered migrations in `MIGRATIONS`, tracked by `PRAGMA user_version`):
- `meta(key, value)`: the index fingerprint as JSON under `index`.
- `files(path, source, hash, mtime_ns, size, indexed_at)`.
- `chunks(rowid, id, path, source, start_line, end_line, hash, model, text, embedding BLOB)`:
  the embedding is kept as float32 bytes so vectors survive without sqlite-vec.
- `chunks_fts`: contentless FTS5 (rowid = chunks.rowid) over the chunk's index text.
- `chunks_vec`: vec0 KNN table (rowid = chunks.rowid), created when the dimension is known.
- `embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at)`.
- `vector_log(seq, chunk_rowid, added)`: chunk vectors added and removed, written by triggers
  (migration 3), pruned by each sync; read by vector_memory.py.
- `chunk_days(chunk, day)`: every day a chunk's lines speak of (migration 4); `chunks.day` is the one
  it is shown and grouped by.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import apsw
from memsift.engine.lazy import np  # numpy on first use: a keyword search never needs it

from memsift.engine.errors import IndexCorruptError, IndexUnusableError
from memsift.engine.private_dirs import make_private_dir

from .index_file import APPLICATION_ID, quarantine_name_re

__all__ = [
    "scalar",
    "storage_hint",
    "VectorState",
    "open_db",
    "fts_tokenizer_clause",
    "read_meta",
    "write_meta",
    "ensure_vec_table",
    "vec_to_blob",
    "blob_to_vec",
    "row_estimate",
    "cosines",
    "row_cosines",
    "SCHEMA_VERSION",
    "CORRUPT_ERRORS",
    "quarantine",
    "read_skipped",
    "write_skipped",
]

# What SQLite raises for a damaged or foreign file (a truncated file fails only when a missing page
# is read, so queries raise these too).
CORRUPT_ERRORS = (apsw.CorruptError, apsw.NotADBError)

BUSY_TIMEOUT_MS = 5000
META_KEY = "index"
SKIPPED_KEY = "skipped"
BACKFILL_KEY = "vectorBackfill"  # when the vectors of a keyword-first index began to be made, and how many were there
MAX_SKIPPED_RECORDED = 1000  # bounds the row; the count beyond is summarised


@dataclass
class VectorState:
    enabled: bool
    available: bool = False
    extension_path: str | None = None
    load_error: str | None = None


def fts_tokenizer_clause(tokenizer: str) -> str:
    if tokenizer == "trigram":
        return "trigram case_sensitive 0"
    # Porter stemming over unicode61 (diacritics folded); CJK is spaced into unigrams upstream.
    return "porter unicode61 remove_diacritics 2"


def _migration_1(conn: apsw.Connection, tokenizer: str) -> None:
    conn.execute(
        f"""
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE files(
            path TEXT PRIMARY KEY,
            source TEXT NOT NULL DEFAULT 'memory',
            hash TEXT NOT NULL,
            mtime_ns INTEGER NOT NULL,
            size INTEGER NOT NULL,
            indexed_at REAL NOT NULL
        );
        CREATE TABLE chunks(
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            path TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'memory',
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            hash TEXT NOT NULL,
            model TEXT NOT NULL,
            text TEXT NOT NULL,
            embedding BLOB,
            updated_at REAL NOT NULL
        );
        CREATE INDEX chunks_path ON chunks(path);
        CREATE INDEX chunks_hash ON chunks(hash);
        CREATE TABLE embedding_cache(
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            provider_key TEXT NOT NULL,
            hash TEXT NOT NULL,
            embedding BLOB NOT NULL,
            dims INTEGER NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY(provider, model, provider_key, hash)
        );
        CREATE INDEX embedding_cache_updated ON embedding_cache(updated_at);
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            text, content='', contentless_delete=1, tokenize='{fts_tokenizer_clause(tokenizer)}'
        );
        """
    )


def _migration_2(conn: apsw.Connection, tokenizer: str) -> None:
    """Each chunk's day (engine/files/note_dates.py) and where it came from, for time windows and decay."""
    conn.execute(
        """
        ALTER TABLE chunks ADD COLUMN day TEXT;
        ALTER TABLE chunks ADD COLUMN day_source TEXT;
        CREATE INDEX chunks_day ON chunks(day);
        """
    )


def _migration_3(conn: apsw.Connection, tokenizer: str) -> None:
    """`vector_log`: every chunk vector added, re-embedded or removed, in commit order, so a
    process holding the vectors in memory (vector_memory.py) applies a sync's rows, not all."""
    conn.execute(
        """
        CREATE TABLE vector_log(seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_rowid INTEGER NOT NULL, added INTEGER NOT NULL);
        CREATE TRIGGER chunks_vector_added AFTER INSERT ON chunks WHEN NEW.embedding IS NOT NULL
            BEGIN INSERT INTO vector_log(chunk_rowid, added) VALUES (NEW.rowid, 1); END;
        CREATE TRIGGER chunks_vector_changed AFTER UPDATE OF embedding ON chunks
            BEGIN INSERT INTO vector_log(chunk_rowid, added) VALUES (NEW.rowid, NEW.embedding IS NOT NULL); END;
        CREATE TRIGGER chunks_vector_removed AFTER DELETE ON chunks WHEN OLD.embedding IS NOT NULL
            BEGIN INSERT INTO vector_log(chunk_rowid, added) VALUES (OLD.rowid, 0); END;
        """  # noqa: E501
    )


def _migration_4(conn: apsw.Connection, tokenizer: str) -> None:
    """`chunk_days`: every day a chunk's lines speak of (engine/files/note_dates.py), so a filter or
    a time window finds a chunk by any of them; rows go with their chunk."""
    conn.execute(
        """
        CREATE TABLE chunk_days(chunk INTEGER NOT NULL, day TEXT NOT NULL);
        CREATE INDEX chunk_days_day ON chunk_days(day, chunk);
        CREATE INDEX chunk_days_chunk ON chunk_days(chunk);
        CREATE TRIGGER chunks_days_removed AFTER DELETE ON chunks BEGIN DELETE FROM chunk_days WHERE chunk = OLD.rowid; END;
        """  # noqa: E501
    )


MIGRATIONS: list[Callable[[apsw.Connection, str], None]] = [_migration_1, _migration_2, _migration_3, _migration_4]
SCHEMA_VERSION = len(MIGRATIONS)


def _vec_extension_path() -> str:
    """sqlite-vec's loadable extension, found without importing its Python module (which imports
    numpy and sqlite3: ~60 ms of a cold keyword search). Same path as `sqlite_vec.loadable_path()`."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        raise ImportError("the sqlite-vec package is not installed (pip install sqlite-vec)")
    return os.path.join(os.path.dirname(spec.origin), "vec0")


def _load_vec(conn: apsw.Connection, state: VectorState) -> None:
    if not state.enabled:
        return
    try:
        if state.extension_path:
            path = state.extension_path
        else:
            path = _vec_extension_path()
        conn.enable_load_extension(True)
        conn.load_extension(path)
        conn.enable_load_extension(False)
        state.extension_path = path
        state.available = True
    except Exception as exc:  # ImportError, apsw.ExtensionLoadingError, OSError
        state.available = False
        state.load_error = f"sqlite-vec unavailable: {exc}"


def _restrict_permissions(path: Path) -> None:
    try:
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    except OSError:
        pass


def storage_hint(path: Path) -> str:
    """What is likely wrong with the folder of `path` when SQLite cannot write there."""
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return "disk full, read-only or I/O error?"
    if st.f_flag & os.ST_RDONLY:
        return "the filesystem is read-only"
    if st.f_bavail * st.f_frsize < 256 * 1024:
        return "the disk is full"
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "the index or its folder is read-only (or immutable)"
    return "disk full, file size limit, read-only file or I/O error?"


def _open_immutable(path: Path) -> apsw.Connection:
    """A read-only connection that needs nothing written beside the file (no -shm): for an index
    on a read-only mount or a full disk. It reads the database file alone, as it is."""
    uri = "file:" + urllib.parse.quote(str(path)) + "?immutable=1"
    return apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI | apsw.SQLITE_OPEN_NOFOLLOW)


def open_db(
    path: Path,
    *,
    tokenizer: str = "unicode61",
    vector_enabled: bool = True,
    extension_path: str | None = None,
    readonly: bool = False,
) -> tuple[apsw.Connection, VectorState]:
    """Open (creating if needed) an index database with the schema migrated and sqlite-vec loaded.

    Never follows a symlink at `path`. A database memsift writes carries its mark
    (`PRAGMA application_id`); one marked by another program is refused."""
    state = VectorState(enabled=vector_enabled, extension_path=extension_path)
    try:
        if not readonly:
            make_private_dir(path.parent)
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        conn = apsw.Connection(str(path), flags=flags | apsw.SQLITE_OPEN_NOFOLLOW)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        if readonly:
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except (apsw.CantOpenError, apsw.IOError, apsw.ReadOnlyError, apsw.FullError):
                conn.close()  # cannot make its -shm (read-only mount, full disk): read the file alone
                conn = _open_immutable(path)
                conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        _load_vec(conn, state)
        if not readonly:
            _restrict_permissions(path)
            mark = scalar(conn, "PRAGMA application_id")
            if mark not in (0, APPLICATION_ID):
                conn.close()
                raise IndexUnusableError(f"{path} is not a memsift index (another program's SQLite database); "
                                         "memsift never overwrites files it did not make")
            if mark == 0:  # before WAL mode, so a new file has the mark in its header at once
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            version = scalar(conn, "PRAGMA user_version")
            if version > SCHEMA_VERSION:
                raise IndexUnusableError(
                    f"index {path} has schema version {version}, newer than this memsift "
                    f"({SCHEMA_VERSION}); upgrade memsift or delete the index to rebuild it"
                )
            with conn:
                for number in range(version, SCHEMA_VERSION):
                    MIGRATIONS[number](conn, tokenizer)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        if readonly:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # touches the header
        return conn, state
    except CORRUPT_ERRORS as exc:
        raise IndexCorruptError(f"index {path} is damaged: {exc}") from None
    except (apsw.CantOpenError, apsw.IOError, apsw.ReadOnlyError, apsw.FullError) as exc:
        raise IndexUnusableError(f"cannot open index {path}: {exc} ({storage_hint(path)})") from None
    except apsw.Error as exc:
        raise IndexUnusableError(f"cannot open index {path}: {exc}") from None


def scalar(conn: apsw.Connection, sql: str, params: Any = ()) -> Any:
    """The first column of a query's first row (None when it has no row)."""
    row = conn.execute(sql, params).fetchone()
    return row[0] if row is not None else None


def read_meta(conn: apsw.Connection) -> dict[str, Any] | None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key=?", (META_KEY,)).fetchone()
    except apsw.SQLError:
        return None
    return json.loads(row[0]) if row else None


def write_meta(conn: apsw.Connection, meta: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (META_KEY, json.dumps(meta, sort_keys=True)),
    )


def read_skipped(conn: apsw.Connection) -> list[dict[str, str]]:
    """The files the last sync skipped, with reasons (shown by `status`)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key=?", (SKIPPED_KEY,)).fetchone()
    except apsw.SQLError:
        return []
    return json.loads(row[0]) if row else []


def write_skipped(conn: apsw.Connection, skipped: list[dict[str, str]]) -> None:
    """Record what a sync skipped (only when it changed, so a no-op sync writes nothing)."""
    if read_skipped(conn) == skipped:
        return
    with conn:
        conn.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (SKIPPED_KEY, json.dumps(skipped)),
        )


def note_backfill_start(conn: apsw.Connection, done: int, total: int) -> None:
    """Record that vectors are being made from now (`vector_progress` reads it, in any process)."""
    with conn:
        conn.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (BACKFILL_KEY, json.dumps({"startedAt": time.time(), "done": done, "total": total})),
        )


def vector_progress(conn: apsw.Connection) -> dict[str, Any]:
    """Chunks with a vector out of all chunks, and, while a backfill makes the rest, the seconds it
    should still take at its rate so far (`etaSeconds`, None until a rate can be told)."""
    done = scalar(conn, "SELECT count(*) FROM chunks WHERE embedding IS NOT NULL")
    total = scalar(conn, "SELECT count(*) FROM chunks")
    eta = None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key=?", (BACKFILL_KEY,)).fetchone()
        started = json.loads(row[0]) if row else None
    except (apsw.SQLError, ValueError):
        started = None
    if isinstance(started, dict) and done < total:
        elapsed = time.time() - float(started.get("startedAt", 0))
        made = done - int(started.get("done", 0))
        if made > 0 and elapsed > 0:
            eta = round((total - done) * elapsed / made)
    return {"done": done, "total": total, "etaSeconds": eta}


def vec_table_dims(conn: apsw.Connection) -> int | None:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name='chunks_vec'").fetchone()
    if not row:
        return None
    import re  # noqa: PLC0415

    m = re.search(r"float\[(\d+)\]", row[0])
    return int(m.group(1)) if m else None


def ensure_vec_table(conn: apsw.Connection, state: VectorState, dims: int) -> bool:
    """Create the vec0 table for `dims` (recreating it if the dimension changed)."""
    if not state.available:
        return False
    current = vec_table_dims(conn)
    if current == dims:
        return True
    if current is not None:
        conn.execute("DROP TABLE chunks_vec")
    conn.execute(f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{dims}] distance_metric=cosine)")
    return True


def vec_to_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype="<f4").tobytes()


def blob_to_vec(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


def row_estimate(conn: apsw.Connection) -> int:
    """About how many chunks the index holds, at no cost (count(*) reads a whole index: 15 ms at
    1M chunks). SQLite reuses freed top rowids and a rebuild numbers from 1."""
    return int(scalar(conn, "SELECT max(rowid) FROM chunks") or 0)


def cosines(blobs: list[bytes], unit_query: np.ndarray) -> np.ndarray:
    """Cosine of each stored embedding with a unit-length query vector (0 for a zero vector)."""
    m = np.stack([blob_to_vec(b) for b in blobs])
    norms = np.linalg.norm(m, axis=1)
    return np.divide(m @ unit_query, norms, out=np.zeros(len(blobs), dtype=np.float32), where=norms > 0)


def row_cosines(
    conn: apsw.Connection, rowids: list[int], unit_query: np.ndarray, batch: int = 500
) -> list[tuple[int, float]]:
    """(rowid, cosine) of the given chunk rows that have an embedding of the query's size."""
    out: list[tuple[int, float]] = []
    for i in range(0, len(rowids), batch):
        part = rowids[i : i + batch]
        marks = ",".join("?" * len(part))
        rows = [
            (r, b)
            for r, b in conn.execute(
                f"SELECT rowid, embedding FROM chunks WHERE embedding IS NOT NULL AND rowid IN ({marks})", part
            )
            if len(b) == unit_query.nbytes
        ]
        if rows:
            out += zip([r for r, _ in rows], cosines([b for _, b in rows], unit_query).tolist())
    return out


def quarantine(path: Path, reason: str, *, keep: int = 1) -> Path | None:
    """Move a damaged index (and its -wal/-shm) aside as `<db>.corrupt-<time>-<pid>`; keep the
    last `keep` (one: an index is derived, and each copy is as large as the index). The caller has checked that the file
    is memsift's (`inspect_index_file`); only files with memsift's quarantine names are ever pruned, and symlinks
    never."""
    import time as _time  # noqa: PLC0415

    if not os.path.lexists(path):
        return None
    target = path.with_name(f"{path.name}.corrupt-{_time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.is_file() and not side.is_symlink():
            os.replace(side, Path(f"{target}{suffix}"))
    pattern = quarantine_name_re(path)
    ours = []
    for p in path.parent.iterdir():
        if pattern.fullmatch(p.name):
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                ours.append((st.st_mtime, p.name, p))
    for _mtime, _name, stale in sorted(ours)[:-keep]:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{stale}{suffix}").unlink(missing_ok=True)
    return target
