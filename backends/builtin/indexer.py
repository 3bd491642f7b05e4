"""Sync the index with the Markdown files: incremental by content hash, or a full atomic rebuild.

Runs in a worker thread on its own write connection. Embedding goes through `embed`, a blocking
callable the manager supplies (it hops back to the event loop for async providers).

- Incremental: files whose (mtime, size) are unchanged are not read; files whose content hash is
  unchanged are not re-chunked; chunks whose text hash is known (existing chunks or the embedding
  cache) are not re-embedded. Files are processed in groups, each group one transaction.
- Full rebuild (fingerprint changed, or forced): built into `<db>.tmp-<uuid>` and swapped in with
  an atomic rename; if the build fails, the temp file is removed and the old index is untouched.
- A cross-process write lock (`<db>.lock`, flock) serialises every writer.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import apsw
from memsift.engine.lazy import np  # numpy on first use: a keyword search never needs it

from memsift.engine.logging import get_logger
from memsift.engine.files.chunking import CHUNKER_REVISION, Chunk, chunk_id
from memsift.engine.config import ResolvedConfig
from memsift.engine.errors import IndexUnusableError, embedding_failure
from memsift.engine.secrets import redact
from memsift.engine.files.note_dates import NOTE_DATES_REVISION, ChunkDay
from memsift.engine.search.fts_query import INDEX_TEXT_REVISION, index_text
from memsift.engine.files.fingerprint import (
    fingerprint_diff,
    memsift_version,
    rebuild_note,
    reuse_note,
    version_stamps,
)
from memsift.engine.manager import SyncReport
from memsift.engine.embeddings.base import MultimodalInput
from memsift.engine.files.sync import (MAX_MARKDOWN_BYTES, read_markdown, read_media, read_transcript,
                                       session_days_key, sort_files)
from memsift.engine.files.discovery import MemoryFile, Skipped, discover_memory_files
from memsift.engine.private_dirs import make_private_dir
from memsift.engine.files.flock import flock_within
from memsift.engine.files.multimodal import TOO_LARGE, indexed_media
from memsift.engine.files.transcripts import list_transcripts, sessions_folder

from .index_file import inspect_index_file, is_memsift_database, temp_name_re
from .store import (
    MAX_SKIPPED_RECORDED,
    SCHEMA_VERSION,
    VectorState,
    ensure_vec_table,
    note_backfill_start,
    open_db,
    read_meta,
    scalar,
    storage_hint,
    vec_to_blob,
    write_meta,
    write_skipped,
)

__all__ = [
    "Indexer",
    "IndexIdentity",
    "fingerprint_diff",
    "CHUNKER_REVISION",
    "EmbedFn",
    "MAX_MARKDOWN_BYTES",
    "SyncCancelled",
    "storage_failure",
]

log = get_logger("memsift.builtin.indexer")

GROUP_CHUNKS = 256  # chunks embedded and written per transaction
# Without embeddings a group is only SQL: bigger transactions flush FTS5's pending terms less
# often (100k daily logs: 36 s -> 26 s with WRITER_CACHE_KIB; the same index).
KEYWORD_GROUP_CHUNKS = 8192
WRITER_CACHE_KIB = 131072  # the writer's page cache (SQLite's default is 2 MiB): fewer spills mid-transaction
VECTOR_LOG_KEEP = 100_000  # vector_log entries kept for in-memory vectors to catch up from
# Markdown files over this size are skipped (with the reason in status): a memory note is never
# this large, and chunking one would hold hundreds of MB of chunk text at once.
WRITE_LOCK_TIMEOUT_S = 600.0  # how long a writer waits for another process's sync or rebuild
SCAN_REPORT_EVERY = 100  # files checked between two progress reports
EmbedFn = Callable[[Sequence[str]], "np.ndarray"]
# progress(stage, done, total): "files" (files checked), then "embed" (chunks embedded, reused or
# written) or "write" (chunks written, keyword-only index).
ProgressFn = Callable[[str, int, int], None]


class SyncCancelled(BaseException):
    """The sync was asked to stop (its process is closing). Raised between transactions, so
    what was committed is whole files; a BaseException, so no `except Exception` (the tolerated
    embedding failures) can turn it into chunks stored without vectors."""


_STORAGE_ERRORS = (apsw.FullError, apsw.IOError, apsw.ReadOnlyError, apsw.CantOpenError)


def storage_failure(exc: BaseException) -> apsw.Error | None:
    """The storage error behind `exc` (disk full, read-only, I/O), also when SQLite rolled the
    transaction back by itself and the rollback apsw then tried failed with "no transaction is
    active" (which used to hide the real error)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, _STORAGE_ERRORS):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise SyncCancelled()


@dataclass(frozen=True)
class IndexIdentity:
    """What the vectors and chunks in an index depend on, and what the provider accepts."""

    provider: str  # adapter id, or "none" (FTS-only)
    model: str  # provider model, or "fts-only"
    provider_key: str  # provider fingerprint (model file, endpoint, dims)
    dims: int | None
    max_input_bytes: int | None = None  # chunks over this many UTF-8 bytes are split
    multimodal: bool = False  # the provider embeds images and audio

    @property
    def embeds(self) -> bool:
        return self.provider != "none"


def _scope_hash(settings: ResolvedConfig) -> str:
    mm = settings.memory_search.multimodal
    data = {
        "workspace": str(settings.workspace),
        "extraPaths": sorted(settings.memory_search.extra_paths),
        "multimodal": {"enabled": mm.enabled, "modalities": sorted(mm.modalities), "maxFileBytes": mm.max_file_bytes},
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def wanted_meta(settings: ResolvedConfig, ident: IndexIdentity) -> dict[str, Any]:
    ms = settings.memory_search
    return {
        "schema": SCHEMA_VERSION,
        "provider": ident.provider,
        "model": ident.model,
        "providerKey": ident.provider_key,
        "sources": sorted(ms.sources),
        "scopeHash": _scope_hash(settings),
        "chunkStrategy": ms.chunking.strategy,
        "chunkTokens": ms.chunking.tokens,
        "chunkOverlap": ms.chunking.overlap,
        "chunker": CHUNKER_REVISION,
        "ftsTokenizer": ms.store.fts.tokenizer,
        "ftsText": INDEX_TEXT_REVISION,
        "noteDates": NOTE_DATES_REVISION,
        **session_days_key(ms),
    }



@contextmanager
def write_lock(db_path: Path, cancel: threading.Event | None = None) -> Iterator[None]:
    """Exclusive cross-process lock for everything that writes the index.

    Waits up to WRITE_LOCK_TIMEOUT_S (another process may be rebuilding), then fails clearly
    instead of hanging forever behind a stuck writer. The lock file is never followed if it is a
    symlink. `cancel` stops the wait (SyncCancelled)."""
    lock = f"{db_path}.lock"
    try:
        make_private_dir(db_path.parent)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if os.path.islink(lock):
            raise IndexUnusableError(
                f"lock file {lock} is a symlink; memsift does not follow it. Remove the link"
            ) from None
        now = "the index can be searched but not updated" if db_path.exists() else "there is no index to search yet"
        raise IndexUnusableError(
            f"cannot write in the state folder {db_path.parent}: {exc.strerror}; {now}. Make it writable, or point "
            "MEMSIFT_STATE_DIR (or store.path) at a folder you can write"
        ) from None
    try:
        if not flock_within(fd, WRITE_LOCK_TIMEOUT_S, check=lambda: _check(cancel)):
            raise IndexUnusableError(
                f"index {db_path} is locked by another memsift process (waited {WRITE_LOCK_TIMEOUT_S:.0f} s); "
                "try again when it finishes"
            )
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _remove_db_files(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


@dataclass
class _Pending:
    file: MemoryFile
    hash: str
    mtime_ns: int
    size: int
    chunks: list[Chunk]
    inputs: dict[str, MultimodalInput] | None = None  # chunk hash → image/audio input
    rejected: str | None = None  # the provider refused the file (too large): stored with no chunks
    days: list[ChunkDay] = field(default_factory=list)  # each chunk's day (engine/files/note_dates.py)


# Provider messages meaning "this input is too large" (as OpenClaw does; docs/parity.md): the file is kept with no
# chunks.
class Indexer:
    """One sync run's worth of state: settings, identity, the embed function, progress."""

    def __init__(
        self,
        settings: ResolvedConfig,
        ident: IndexIdentity,
        embed: EmbedFn | None,
        *,
        progress: ProgressFn | None = None,
        meta_extra: dict[str, Any] | None = None,
        tolerate_embed_errors: bool = True,
        include_sessions: bool = True,
        embed_step: int | None = None,
        cancel: threading.Event | None = None,
        defer_vectors: bool = False,
    ) -> None:
        self.settings = settings
        # A first search builds the keyword index alone (fast, no provider call) and records that
        # its vectors are pending; the syncs after it make them (`_backfill_vectors`).
        self.defer_vectors = defer_vectors and ident.embeds
        self.vectors_pending = self.defer_vectors
        # Texts per embed call (None: a whole group at once). Smaller steps report progress more
        # often and let a closing process stop sooner, at no cost for the local model.
        self.embed_step = embed_step
        # Set when the sync must stop (its process is closing): checked while waiting for the
        # write lock, between files and before each group (and each embed call) is written.
        self.cancel = cancel
        # Session transcripts are synced by full rebuilds, explicit syncs and the session-delta
        # watcher; searches and file-watch syncs leave them alone so they never wait on them.
        self.include_sessions = include_sessions and "sessions" in settings.memory_search.sources
        self.sessions_dir = sessions_folder(settings)
        self.meta_extra = meta_extra or {}
        # Without a fallback provider, an embedding failure during an incremental sync keeps the
        # text searchable and retries the vectors later; with one, it fails so the switch happens.
        self.tolerate_embed_errors = tolerate_embed_errors
        self.ms = settings.memory_search
        self.ident = ident
        self.embed = embed if ident.embeds else None
        self.progress = progress
        self.db_path = settings.store_path
        self.skipped: list[Skipped] = []
        self.embed_error: str | None = None
        self.files_to_index = 0  # changed files found by the scan, and how many are written so far
        self.files_done = 0
        self._chunks_total = self._chunks_done = 0
        self._live: apsw.Connection | None = None  # the connection being written
        self._kind = "missing"  # what is at the index path (index_file.inspect_index_file)

    # --- entry point ------------------------------------------------------------------------

    def run(self, *, force: bool = False, reason: str = "manual", allow_full: bool = True) -> SyncReport:
        try:
            return self._run(force=force, reason=reason, allow_full=allow_full)
        except apsw.BusyError as exc:  # another process holds a write transaction on the database
            raise IndexUnusableError(f"index {self.db_path} is locked by another process: {exc}") from None
        except apsw.Error as exc:
            # Disk full, file size limit, quota, read-only, I/O error: a failed rebuild left the old
            # index in place, a failed incremental sync rolled back its last transaction.
            failure = storage_failure(exc)
            if failure is None:
                raise
            raise IndexUnusableError(
                f"cannot write index {self.db_path}: {failure} ({storage_hint(self.db_path)})"
            ) from None

    def _run(self, *, force: bool, reason: str, allow_full: bool) -> SyncReport:
        started = time.perf_counter()
        report = SyncReport(reason=reason)
        with write_lock(self.db_path, self.cancel):
            self._cleanup_orphans()
            want = wanted_meta(self.settings, self.ident)
            # Missing or zero-byte: no index yet (a rebuild makes it); anything not memsift's: refused.
            self._kind = inspect_index_file(self.db_path, self.settings.state_dir)
            current = cause = None
            if self._kind == "ours":
                conn, vec = self._open(self.db_path)
                try:
                    current = read_meta(conn)
                    cause = "forced" if force else fingerprint_diff(current, want)
                    kept = None if cause else reuse_note(current)
                    if kept:
                        report.notes.append(kept)
                        log.info("index kept across an upgrade", note=kept)
                    if not cause:
                        self._incremental(conn, vec, report, want, current or want)
                        self._record_skipped(conn)
                    elif not allow_full and current is not None:
                        self._catch_up_keywords(conn, vec, report)
                        self._record_skipped(conn)
                finally:
                    conn.close()  # closed before any rebuild swaps the file
            else:
                cause = "no index yet"
            if cause and not allow_full and current is not None:
                report.reindex_cause = cause
                report.notes += filter(None, [rebuild_note(current, cause)])
                report.took_ms = (time.perf_counter() - started) * 1000
                return report  # the caller decided not to rebuild now (e.g. during a search)
            if cause:
                log.info("full reindex", cause=cause, db=str(self.db_path))
                report.full_reindex, report.reindex_cause = True, cause
                self._full_rebuild(report, want, first=current is None)
        report.files_skipped = len(self.skipped)
        report.took_ms = (time.perf_counter() - started) * 1000
        return report

    # --- helpers ----------------------------------------------------------------------------

    def _open(self, path: Path) -> tuple[apsw.Connection, VectorState]:
        conn, vec = open_db(
            path,
            tokenizer=self.ms.store.fts.tokenizer,
            vector_enabled=self.ms.store.vector.enabled,
            extension_path=self.ms.store.vector.extension_path,
        )
        conn.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")  # taken as pages fill, not up front
        return conn, vec

    def _cleanup_orphans(self) -> None:
        """Temp databases left by a crashed rebuild (we hold the write lock, so none is live): only
        files with memsift's temp names that carry memsift's mark (or are empty)."""
        pattern = temp_name_re(self.db_path)
        for orphan in glob.glob(f"{glob.escape(str(self.db_path))}.tmp-*"):
            if not pattern.fullmatch(os.path.basename(orphan)) or not is_memsift_database(Path(orphan)):
                continue
            log.warning("removing leftover temporary index", path=orphan)
            _remove_db_files(orphan)

    def _record_skipped(self, conn: apsw.Connection) -> None:
        rows = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        if len(rows) > MAX_SKIPPED_RECORDED:
            rows = rows[:MAX_SKIPPED_RECORDED] + [
                {"path": "…", "reason": f"{len(rows) - MAX_SKIPPED_RECORDED} more skipped"}
            ]
        write_skipped(conn, rows)

    def _scan(self, conn: apsw.Connection) -> tuple[list[_Pending], list[MemoryFile], set[str], int]:
        """Compare files on disk with the `files` table. Returns (changed, touched-only, removed, unchanged)."""
        mm = self.ms.multimodal
        ext = indexed_media(mm, self.ident.multimodal)
        files, self.skipped = discover_memory_files(self.settings.workspace, self.ms.extra_paths, ext)
        scanned = ("memory", "sessions") if self.include_sessions else ("memory",)
        if self.include_sessions:
            files += [
                MemoryFile(str(p), f"sessions/{p.name}", source="sessions") for p in list_transcripts(self.sessions_dir)
            ]
        marks = ",".join("?" * len(scanned))
        known = {
            row[0]: row[1:]
            for row in conn.execute(f"SELECT path, hash, mtime_ns, size FROM files WHERE source IN ({marks})", scanned)
        }

        def each(n: int) -> None:
            if self.progress and n % SCAN_REPORT_EVERY == 0:
                self.progress("files", n, len(files))
            if n % 256 == 0:
                _check(self.cancel)

        found = sort_files(files, known, self.skipped, self._read, lambda p: p.hash, each)
        if self.progress:
            self.progress("files", len(files), len(files))
        on_disk = {f.rel_path for f in files} - {s.path for s in self.skipped}
        removed = set(known) - on_disk
        return found.changed, found.touched, removed, found.unchanged

    def _read(self, f: MemoryFile, st: os.stat_result) -> _Pending | None:
        if f.modality is not None:
            return self._read_multimodal(f, st)
        if f.source == "sessions":
            return self._read_transcript(f, st)
        c = self.ms.chunking
        read = read_markdown(f, st, self.skipped, strategy=c.strategy, tokens=c.tokens, overlap=c.overlap,
                             max_input_bytes=self.ident.max_input_bytes)
        if read is None:
            return None
        return _Pending(f, read.hash, st.st_mtime_ns, st.st_size, read.chunks, days=read.days)

    def _read_transcript(self, f: MemoryFile, st: os.stat_result) -> _Pending | None:
        c = self.ms.chunking
        read = read_transcript(f, self.skipped, strategy=c.strategy, tokens=c.tokens, overlap=c.overlap,
                               max_input_bytes=self.ident.max_input_bytes, zone=self.ms.query.time.timezone)
        return None if read is None else _Pending(f, read.hash, st.st_mtime_ns, st.st_size, read.chunks, days=read.days)

    def _read_multimodal(self, f: MemoryFile, st: os.stat_result) -> _Pending | None:
        media = read_media(f, st, self.skipped, self.ms.multimodal.max_file_bytes)
        if media is None:
            return None
        chunk = Chunk(1, 1, media.label, media.hash)
        return _Pending(f, media.hash, st.st_mtime_ns, st.st_size, [chunk],
                        inputs={media.hash: MultimodalInput(media.label, media.mime, media.data)})

    # --- embeddings -------------------------------------------------------------------------

    def _known_vectors(self, conns: list[apsw.Connection], hashes: set[str]) -> dict[str, bytes]:
        """Embeddings already computed for these chunk hashes (existing chunks, then the cache)."""
        found: dict[str, bytes] = {}
        todo = list(hashes)
        for conn in conns:
            try:
                self._lookup_vectors(conn, todo, found)
            except apsw.Error as exc:  # an unreadable old index only costs re-embedding
                log.warning("cannot reuse embeddings from index", error=str(exc))
        return found

    def _lookup_vectors(self, conn: apsw.Connection, todo: list[str], found: dict[str, bytes]) -> None:
        # Stored chunks are reused only from an index built by this very provider (same key).
        meta = read_meta(conn) or {}
        use_chunks = meta.get("providerKey") == self.ident.provider_key or conn is self._live
        for i in range(0, len(todo), 500):
            part = [h for h in todo[i : i + 500] if h not in found]
            if not part:
                continue
            marks = ",".join("?" * len(part))
            if use_chunks:
                q = f"SELECT hash, embedding FROM chunks WHERE embedding IS NOT NULL AND hash IN ({marks})"
                for h, blob in conn.execute(q, part):
                    found.setdefault(h, blob)
            if self.ms.cache.enabled:
                q = (
                    "SELECT hash, embedding FROM embedding_cache WHERE provider=? AND model=? "
                    f"AND provider_key=? AND hash IN ({marks})"
                )
                args = (self.ident.provider, self.ident.model, self.ident.provider_key, *part)
                for h, blob in conn.execute(q, args):
                    found.setdefault(h, blob)

    def _embed_group(
        self, conn: apsw.Connection, sources: list[apsw.Connection], group: list[_Pending], report: SyncReport
    ) -> dict[str, bytes]:
        if self.embed is None:
            return {}
        hashes = {c.hash for p in group for c in p.chunks}
        vectors = self._known_vectors(sources, hashes)
        cached = sum(1 for p in group for c in p.chunks if c.hash in vectors)
        report.chunks_from_cache += cached
        self._advance(cached)
        missing: dict[str, Any] = {}
        for p in group:
            if p.inputs:
                self._embed_multimodal(p, vectors, report)
                continue
            for c in p.chunks:
                if c.hash not in vectors:
                    missing.setdefault(c.hash, c.text)
        if missing:
            texts = list(missing.values())
            step = self.embed_step or len(texts)
            parts = []
            for i in range(0, len(texts), step):
                part = self.embed(texts[i : i + step])
                if part.shape[0] != len(texts[i : i + step]):
                    raise IndexUnusableError(
                        f"provider returned {part.shape[0]} vectors for {len(texts[i : i + step])} texts"
                    )
                parts.append(part)
                self._advance(part.shape[0])
            matrix = parts[0] if len(parts) == 1 else np.vstack(parts)
            now = time.time()
            rows = []
            for h, vec in zip(missing, matrix):
                blob = vec_to_blob(vec)
                vectors[h] = blob
                rows.append((self.ident.provider, self.ident.model, self.ident.provider_key, h, blob, len(vec), now))
            report.chunks_embedded += len(texts)
            if self.ms.cache.enabled:
                conn.executemany(
                    "INSERT OR REPLACE INTO embedding_cache VALUES (?,?,?,?,?,?,?)",
                    rows,
                )
        return vectors

    def _embed_multimodal(self, p: _Pending, vectors: dict[str, bytes], report: SyncReport) -> None:
        """One request per image/audio file; a "too large" refusal keeps the file with no chunks."""
        assert self.embed is not None  # only a sync that embeds has multimodal inputs
        for h, item in (p.inputs or {}).items():
            if h in vectors:
                continue
            try:
                matrix = self.embed([item])
            except Exception as exc:
                if any(marker in str(exc).lower() for marker in TOO_LARGE):
                    p.rejected = str(exc)
                    self.skipped.append(Skipped(p.file.rel_path, f"provider refused the file: {exc}"))
                    return
                raise
            vectors[h] = vec_to_blob(matrix[0])
            report.chunks_embedded += 1

    # --- writing ----------------------------------------------------------------------------

    def _delete_path(self, conn: apsw.Connection, vec: VectorState, path: str) -> None:
        rowids = [r[0] for r in conn.execute("SELECT rowid FROM chunks WHERE path=?", (path,))]
        if rowids:
            conn.executemany("DELETE FROM chunks_fts WHERE rowid=?", [(r,) for r in rowids])
            if vec.available and _has_table(conn, "chunks_vec"):
                conn.executemany("DELETE FROM chunks_vec WHERE rowid=?", [(r,) for r in rowids])
        conn.execute("DELETE FROM chunks WHERE path=?", (path,))

    def _write_file(
        self, conn: apsw.Connection, vec: VectorState, p: _Pending, vectors: dict[str, bytes], *, fresh: bool = False
    ) -> int:
        if not fresh:  # a new file (full rebuild) has nothing to replace
            self._delete_path(conn, vec, p.file.rel_path)
        tokenizer = self.ms.store.fts.tokenizer
        now = time.time()
        written = 0
        for i, c in enumerate([] if p.rejected else p.chunks):
            blob = vectors.get(c.hash)
            cid = chunk_id(p.file.source, p.file.rel_path, c.start_line, c.end_line, c.hash, self.ident.model)
            day = p.days[i] if i < len(p.days) else ChunkDay(None, None)
            conn.execute(
                "INSERT OR IGNORE INTO chunks(id, path, source, start_line, end_line, hash, model, text, embedding, "
                "updated_at, day, day_source)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    cid,
                    p.file.rel_path,
                    p.file.source,
                    c.start_line,
                    c.end_line,
                    c.hash,
                    self.ident.model,
                    c.text,
                    blob,
                    now,
                    day.day,
                    day.source,
                ),
            )
            if conn.changes() == 0:
                continue  # an identical chunk (same lines and text) already stored
            rowid = conn.last_insert_rowid()
            conn.execute("INSERT INTO chunks_fts(rowid, text) VALUES (?, ?)", (rowid, index_text(c.text, tokenizer)))
            # Every day the chunk's lines speak of: filters and windows find it by any of them.
            conn.executemany(
                "INSERT INTO chunk_days(chunk, day) VALUES (?, ?)", [(rowid, d) for d in day.days or (day.day,) if d]
            )
            if blob is not None and ensure_vec_table(conn, vec, len(blob) // 4):
                conn.execute("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", (rowid, blob))
            written += 1
        conn.execute(
            "INSERT INTO files(path, source, hash, mtime_ns, size, indexed_at) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT(path) DO UPDATE SET hash=excluded.hash, mtime_ns=excluded.mtime_ns, "
            "size=excluded.size, indexed_at=excluded.indexed_at",
            (p.file.rel_path, p.file.source, p.hash, p.mtime_ns, p.size, now),
        )
        return written

    def _groups(self, pending: list[_Pending]) -> Iterator[list[_Pending]]:
        group: list[_Pending] = []
        count = 0
        size = GROUP_CHUNKS if self.embed else KEYWORD_GROUP_CHUNKS
        if self.defer_vectors:
            size = KEYWORD_GROUP_CHUNKS
        for p in pending:
            group.append(p)
            count += len(p.chunks)
            if count >= size:
                yield group
                group, count = [], 0
        if group:
            yield group

    def _index_pending(
        self,
        conn: apsw.Connection,
        vec: VectorState,
        sources: list[apsw.Connection],
        pending: list[_Pending],
        report: SyncReport,
        *,
        tolerate_embed_errors: bool,
        fresh: bool = False,
    ) -> None:
        total = len(pending)
        done = 0
        self.files_to_index, self.files_done = total, 0
        self._chunks_total, self._chunks_done = sum(len(p.chunks) for p in pending), 0
        chunks_written_before = 0  # chunks of the groups written so far
        self._live = conn
        for group in self._groups(pending):
            _check(self.cancel)
            try:
                # After one failure in this sync no further group asks the provider: a provider
                # that hangs costs one request's timeouts and retries, not one per group.
                failed = self.embed_error is not None and tolerate_embed_errors
                vectors = {} if (self.defer_vectors or failed) else self._embed_group(conn, sources, group, report)
            except _STORAGE_ERRORS:
                raise  # the store cannot be written (the embedding cache's rows): not the provider's failure
            except Exception as exc:
                if not tolerate_embed_errors:
                    raise
                # Keep the text searchable; chunks without vectors are embedded on a later sync.
                self.embed_error = embedding_failure(exc)
                log.warning("embedding failed; chunks stored without vectors", error=self.embed_error)
                vectors = {}
            with conn:
                for p in group:
                    report.chunks_written += self._write_file(conn, vec, p, vectors, fresh=fresh)
            done += len(group)
            self.files_done = done
            report.files_indexed += len(group)
            chunks_written_before += sum(len(p.chunks) for p in group)
            self._report_chunks(chunks_written_before)  # exact after each group, whatever was embedded

    def _advance(self, chunks: int) -> None:
        """Count `chunks` more as done (embedded or reused) and report it."""
        self._report_chunks(self._chunks_done + chunks)

    def _report_chunks(self, done: int) -> None:
        done = min(self._chunks_total, done)
        if done == self._chunks_done:
            return
        self._chunks_done = done
        if self.progress:
            self.progress("embed" if self.embed and not self.defer_vectors else "write", done, self._chunks_total)

    @property
    def vectors_error(self) -> str | None:
        """Why this sync left chunks without vectors, secrets masked (the report's and the meta's)."""
        return redact(self.embed_error) if self.embed_error else None

    def _backfill_vectors(self, conn: apsw.Connection, vec: VectorState, report: SyncReport) -> None:
        """Embed chunks stored without vectors (a provider failed earlier, or a first search built
        the keyword index alone), and fill chunks_vec."""
        if self.embed is None or self.embed_error is not None:
            return
        rows: list[Any] = conn.execute("SELECT rowid, hash, text FROM chunks WHERE embedding IS NULL").fetchall()
        if rows:  # for the time left that searches and status tell meanwhile
            total = scalar(conn, "SELECT count(*) FROM chunks")
            note_backfill_start(conn, total - len(rows), total)
        for i in range(0, len(rows), GROUP_CHUNKS):
            part = rows[i : i + GROUP_CHUNKS]
            _check(self.cancel)
            try:
                matrix = self.embed([r[2] for r in part])
            except Exception as exc:
                self.embed_error = embedding_failure(exc)
                log.warning("embedding failed; chunks stored without vectors", error=self.embed_error)
                return
            report.chunks_embedded += len(part)
            with conn:
                for (rowid, _h, _t), v in zip(part, matrix):
                    blob = vec_to_blob(v)
                    conn.execute("UPDATE chunks SET embedding=? WHERE rowid=?", (blob, rowid))
                    if ensure_vec_table(conn, vec, len(v)):
                        conn.execute("DELETE FROM chunks_vec WHERE rowid=?", (rowid,))
                        conn.execute("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", (rowid, blob))
        self._fill_vec_table(conn, vec)

    def _fill_vec_table(self, conn: apsw.Connection, vec: VectorState) -> None:
        """sqlite-vec may have been unavailable when chunks were written: copy their vectors in."""
        if not vec.available:
            return
        with_vec = scalar(conn, "SELECT count(*) FROM chunks WHERE embedding IS NOT NULL")
        if not with_vec:
            return
        have = scalar(conn, "SELECT count(*) FROM chunks_vec") if _has_table(conn, "chunks_vec") else 0
        if have == with_vec:
            return
        log.info("rebuilding vector table from stored embeddings", chunks=with_vec)
        with conn:
            dims = len(scalar(conn, "SELECT embedding FROM chunks WHERE embedding IS NOT NULL LIMIT 1")) // 4
            if _has_table(conn, "chunks_vec"):
                conn.execute("DROP TABLE chunks_vec")
            ensure_vec_table(conn, vec, dims)
            conn.execute(
                "INSERT INTO chunks_vec(rowid, embedding) SELECT rowid, embedding FROM chunks WHERE embedding IS NOT "
                "NULL"
            )

    def _finish(self, conn: apsw.Connection, want: dict[str, Any], *, full: bool = False,
                current: dict[str, Any] | None = None) -> None:
        meta = {**want, **self.meta_extra, **version_stamps(current, rebuilt=full)}  # `current`: the meta it replaces
        if self.vectors_pending:
            meta["vectorsPending"] = True  # searches answer by keyword until the vectors are made
        if self.vectors_error and conn.execute("SELECT 1 FROM chunks WHERE embedding IS NULL LIMIT 1").fetchone():
            meta["vectorsError"] = self.vectors_error  # for status and searches in any process
        row = conn.execute("SELECT embedding FROM chunks WHERE embedding IS NOT NULL LIMIT 1").fetchone()
        meta["dims"] = len(row[0]) // 4 if row else self.ident.dims
        with conn:
            write_meta(conn, meta)
            max_entries = self.ms.cache.max_entries
            if self.ms.cache.enabled and max_entries:
                conn.execute(
                    "DELETE FROM embedding_cache WHERE rowid IN (SELECT rowid FROM embedding_cache "
                    "ORDER BY updated_at DESC LIMIT -1 OFFSET ?)",
                    (int(max_entries),),
                )
            # A new file's readers load every vector anyway; a live one keeps the recent log for
            # processes holding vectors in memory (one further behind reloads them all).
            if full:
                conn.execute("DELETE FROM vector_log")
            else:
                conn.execute(
                    "DELETE FROM vector_log WHERE seq <= (SELECT max(seq) FROM vector_log) - ?", (VECTOR_LOG_KEEP,)
                )

    # --- the two kinds of sync --------------------------------------------------------------

    def _apply_scan(self, conn: apsw.Connection, vec: VectorState,
                    report: SyncReport) -> tuple[list[_Pending], set[str]]:
        """Scan, record touched files' new times and drop removed files' rows; returns (changed, removed)."""
        changed, touched, removed, unchanged = self._scan(conn)
        report.files_seen = len(changed) + unchanged
        report.files_unchanged = unchanged
        with conn:
            for f, mtime_ns, size in touched:
                conn.execute("UPDATE files SET mtime_ns=?, size=? WHERE path=?", (mtime_ns, size, f.rel_path))
            for path in sorted(removed):
                self._delete_path(conn, vec, path)
                conn.execute("DELETE FROM files WHERE path=?", (path,))
        report.files_removed = len(removed)
        return changed, removed

    def _catch_up_keywords(self, conn: apsw.Connection, vec: VectorState, report: SyncReport) -> None:
        """A sync that may not rebuild (a search's) when the index must be (this memsift or the settings
        changed what is stored): the notes written, edited or deleted since are still brought in, by
        keyword, so a search finds them (it answered from the index as the old memsift left it, a note
        written after the upgrade was found only once `memsift index` ran). No vectors are made (the
        rebuild embeds every chunk) and the meta is left as it is: the rebuild stays due."""
        changed, _removed = self._apply_scan(conn, vec, report)
        self.defer_vectors = True  # keyword rows only, written in keyword-sized groups
        self._index_pending(conn, vec, [conn], changed, report, tolerate_embed_errors=True)

    def _incremental(
        self, conn: apsw.Connection, vec: VectorState, report: SyncReport, want: dict[str, Any], current: dict
    ) -> None:
        changed, removed = self._apply_scan(conn, vec, report)
        self._index_pending(conn, vec, [conn], changed, report, tolerate_embed_errors=self.tolerate_embed_errors)
        self._backfill_vectors(conn, vec, report)
        pending_before = bool(current.get("vectorsPending"))
        if pending_before:
            self.vectors_pending = (
                conn.execute("SELECT 1 FROM chunks WHERE embedding IS NULL LIMIT 1").fetchone() is not None
            )
        # dims unknown yet but known now (the first vectors); a keyword-only index (no provider)
        # never has dims, and rewriting its meta would make every search a write.
        dims_learned = current.get("dims") is None and (self.ident.dims is not None or self.embed is not None)
        upgraded = current.get("updatedBy") != memsift_version()  # kept across an upgrade: recorded once
        if changed or removed or pending_before or dims_learned or upgraded or \
                current.get("vectorsError") != self.vectors_error or \
                any(current.get(k) != v for k, v in self.meta_extra.items()):
            self._finish(conn, want, current=current)

    def _full_rebuild(self, report: SyncReport, want: dict[str, Any], *, first: bool = False) -> None:
        """A new index file beside the old one, swapped in whole. A provider failure fails it (the
        old index stays), except a `first` build's where tolerated: a keyword index beats none, and
        the vectors are made by a later sync."""
        tmp = Path(f"{self.db_path}.tmp-{uuid.uuid4().hex[:12]}")
        try:
            conn, vec = self._open(tmp)
        except BaseException:
            _remove_db_files(str(tmp))  # e.g. the disk was too full to create it
            raise
        old: apsw.Connection | None = None
        try:
            if self._kind == "ours":
                try:
                    old, _ = open_db(self.db_path, vector_enabled=False)
                except IndexUnusableError as exc:
                    log.warning("old index unreadable; rebuilding without its embeddings", error=str(exc))
            sources = [conn] + ([old] if old is not None else [])
            changed, _touched, _removed, _unchanged = self._scan(conn)
            report.files_seen = len(changed)
            self._index_pending(conn, vec, sources, changed, report,
                                tolerate_embed_errors=first and self.tolerate_embed_errors, fresh=True)
            if old is not None and self.ms.cache.enabled:
                self._copy_cache(conn, old)
            self._finish(conn, want, full=True)
            self._record_skipped(conn)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except BaseException:
            conn.close()
            if old is not None:
                old.close()
            _remove_db_files(str(tmp))
            raise
        conn.close()
        if old is not None:
            old.close()
        os.replace(tmp, self.db_path)  # atomic: readers see the old file or the new one
        for suffix in ("-wal", "-shm"):
            try:
                os.unlink(f"{self.db_path}{suffix}")  # belonged to the replaced file
            except FileNotFoundError:
                pass
            try:
                os.unlink(f"{tmp}{suffix}")
            except FileNotFoundError:
                pass

    def _copy_cache(self, conn: apsw.Connection, old: apsw.Connection) -> None:
        """Keep the old embedding cache, so switching back and forth never re-embeds."""
        rows = old.execute("SELECT * FROM embedding_cache").fetchall()
        with conn:
            conn.executemany("INSERT OR IGNORE INTO embedding_cache VALUES (?,?,?,?,?,?,?)", rows)


def _has_table(conn: apsw.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name=?", (name,)).fetchone() is not None

