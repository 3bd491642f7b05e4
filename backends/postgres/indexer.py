"""Sync one agent's rows with its Markdown files: incremental by content hash, or a full rebuild
into a new generation made visible in one transaction.

- One writer per agent at a time: a session advisory lock on the connection that does every write
  of the sync. Another process (any host) waits for it, then finds the files already indexed. A
  killed writer's connection drops, the server rolls back its open transaction and frees the lock.
- Incremental: each group of files is one transaction (delete the file's rows, insert the new
  ones), so readers see whole files. A rebuild writes generation+1 beside the live one; the switch
  of `memsift_agents.generation` is one transaction; leftovers of a killed rebuild are removed by
  the next writer (it holds the lock, so no generation but the live one is in use).
- Embeddings come from the embedding cache table, or chunks of the same hash already stored with
  the same provider, before the provider is asked.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import anyio
import numpy as np

from memsift.engine.files.chunking import CHUNKER_REVISION, Chunk, chunk_id
from memsift.engine.files.note_dates import NOTE_DATES_REVISION, ChunkDay
from memsift.engine.config import ResolvedConfig
from memsift.engine.errors import BackendError, embedding_failure
from memsift.engine.search.fts_query import INDEX_TEXT_REVISION
from memsift.engine.files.fingerprint import fingerprint_diff, rebuild_note, version_stamps
from memsift.engine.logging import get_logger
from memsift.engine.manager import SyncReport
from memsift.engine.secrets import redact
from memsift.engine.files.sync import read_markdown, read_media, read_transcript, session_days_key, sort_files
from memsift.engine.files.transcripts import list_transcripts, sessions_folder
from memsift.engine.files.multimodal import TOO_LARGE, indexed_media
from memsift.engine.embeddings.base import MultimodalInput
from memsift.engine.files.discovery import MemoryFile, Skipped, discover_memory_files

from .schema import SCHEMA_VERSION, chunk_number
from memsift.engine.search.terms import chunk_postings

__all__ = ["sync_agent", "wanted_meta", "fingerprint_diff", "agent_lock_key", "CHUNKER_REVISION", "Identity"]

log = get_logger("memsift.postgres.indexer")

GROUP_CHUNKS = 128  # chunks embedded and written per transaction
LOCK_POLL_S = 0.1
ANALYZE_AFTER_CHUNKS = 100
SYNC_STATEMENT_TIMEOUT_MS = 600_000
# An agent's HNSW graph (ensure_hnsw), denser than pgvector's defaults (16, 64): on a million real
# neighbours' vectors its recall@10 at ef_search 800 was 0.978-0.995 (two graphs, two question
# sets), against 0.95-0.995 with m 24 / ef_construction 128 and 0.93-0.978 for the defaults' graph
# of full vectors; what it still misses are whole tight clusters no walk reaches, at any ef_search
# (docs/performance.md). The cost: 1.30 GB at a million (1.16 with m 24), 11 minutes to build.
HNSW_M, HNSW_EF_CONSTRUCTION = 32, 200
EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]


@dataclass(frozen=True)
class Identity:
    provider: str  # "none" for keyword only
    model: str
    provider_key: str
    max_input_bytes: int | None = None
    multimodal: bool = False  # the provider embeds images and audio (gemini-embedding-2-preview)


def agent_lock_key(agent: str) -> int:
    """A stable signed 64-bit advisory lock key per agent."""
    return int.from_bytes(hashlib.sha256(f"memsift-sync:{agent}".encode()).digest()[:8], "big", signed=True)



def wanted_meta(settings: ResolvedConfig, ident: Identity) -> dict[str, Any]:
    """The index fingerprint. The workspace path is not part of it: the agent id owns the rows, and
    every process serving the agent may mount its files elsewhere."""
    ms = settings.memory_search
    out: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "provider": ident.provider,
        "model": ident.model,
        "providerKey": ident.provider_key,
        "extraPaths": sorted(ms.extra_paths),
        "chunkStrategy": ms.chunking.strategy,
        "chunkTokens": ms.chunking.tokens,
        "chunkOverlap": ms.chunking.overlap,
        "chunker": CHUNKER_REVISION,
        "ftsTokenizer": ms.store.fts.tokenizer,
        "ftsText": INDEX_TEXT_REVISION,
        "noteDates": NOTE_DATES_REVISION,
        **session_days_key(ms),
    }
    if ms.multimodal.enabled:  # only then: an index made before this key existed stays valid
        out["multimodal"] = {
            "modalities": sorted(ms.multimodal.modalities),
            "maxFileBytes": ms.multimodal.max_file_bytes,
        }
    return out


@dataclass
class _Pending:
    file: MemoryFile
    hash: str
    mtime_ns: int
    size: int
    chunks: list[Chunk]
    days: list[ChunkDay] = field(default_factory=list)  # each chunk's day (engine/files/note_dates.py)
    inputs: dict[str, MultimodalInput] | None = None  # chunk hash → image/audio input
    rejected: str | None = None  # the provider refused the file (too large): stored with no chunks


class _Sync:
    def __init__(
        self, conn: Any, settings: ResolvedConfig, ident: Identity, embed: EmbedFn | None, report: SyncReport
    ) -> None:
        self.conn, self.settings, self.ident, self.embed, self.report = conn, settings, ident, embed, report
        self.agent = settings.agent_id
        self.ms = settings.memory_search
        self.skipped: list[Skipped] = []
        self.embed_error: str | None = None

    # --- files ----------------------------------------------------------------------------------

    def _read(self, f: MemoryFile, st: os.stat_result) -> _Pending | None:
        if f.modality is not None:  # an image or audio file of an extra path (multimodal), as on builtin
            media = read_media(f, st, self.skipped, self.ms.multimodal.max_file_bytes)
            if media is None:
                return None
            return _Pending(f, media.hash, st.st_mtime_ns, st.st_size, [Chunk(1, 1, media.label, media.hash)],
                            inputs={media.hash: MultimodalInput(media.label, media.mime, media.data)})
        c = self.ms.chunking
        if f.source == "sessions":
            read = read_transcript(f, self.skipped, strategy=c.strategy, tokens=c.tokens, overlap=c.overlap,
                                   max_input_bytes=self.ident.max_input_bytes, zone=self.ms.query.time.timezone)
        else:
            read = read_markdown(f, st, self.skipped, strategy=c.strategy, tokens=c.tokens, overlap=c.overlap,
                                 max_input_bytes=self.ident.max_input_bytes)
        if read is None:
            return None
        return _Pending(f, read.hash, st.st_mtime_ns, st.st_size, read.chunks, read.days)

    async def scan(self, gen: int, *, include_sessions: bool = True
                   ) -> tuple[list[_Pending], list[tuple[str, int, int]], set[str], int]:
        """Files on disk against the generation's files: (changed, touched only, removed, unchanged).
        Session transcripts (`sources: ["memory", "sessions"]`) are compared too unless
        `include_sessions` is false (a search's sync never waits on them, as on builtin); with
        sessions no longer a source, their rows are removed."""
        mm = self.ms.multimodal
        media = indexed_media(mm, self.ident.multimodal)
        files, self.skipped = discover_memory_files(self.settings.workspace, self.ms.extra_paths, media)
        wanted = "sessions" in self.ms.sources
        if wanted and include_sessions:
            folder = sessions_folder(self.settings)
            files += [MemoryFile(str(p), f"sessions/{p.name}", source="sessions") for p in list_transcripts(folder)]
        sources = ["memory", "sessions"] if (include_sessions or not wanted) else ["memory"]
        cur = await self.conn.execute(
            "SELECT path, hash, mtime_ns, size FROM memsift_files WHERE agent_id = %s AND generation = %s AND source "
            "= ANY(%s)",
            (self.agent, gen, sources),
        )
        known = {row[0]: row[1:] for row in await cur.fetchall()}
        found = sort_files(files, known, self.skipped, self._read, lambda p: p.hash)
        touched = [(f.rel_path, mtime_ns, size) for f, mtime_ns, size in found.touched]
        removed = set(known) - ({f.rel_path for f in files} - {s.path for s in self.skipped})
        return found.changed, touched, removed, found.unchanged

    # --- embeddings -----------------------------------------------------------------------------

    async def _known_vectors(self, hashes: list[str], live_gen: int | None) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        if self.ms.cache.enabled:
            cur = await self.conn.execute(
                "SELECT hash, embedding FROM memsift_embedding_cache WHERE agent_id = %s AND provider_key = %s AND "
                "hash = ANY(%s)",
                (self.agent, self.ident.provider_key, hashes),
            )
            found.update({h: v for h, v in await cur.fetchall()})
        todo = [h for h in hashes if h not in found]
        if todo and live_gen is not None:
            cur = await self.conn.execute(
                "SELECT DISTINCT ON (hash) hash, embedding FROM memsift_chunks WHERE agent_id = %s AND generation = %s "
                "AND model = %s AND embedding IS NOT NULL AND hash = ANY(%s)",
                (self.agent, live_gen, self.ident.model, todo),
            )
            found.update({h: v for h, v in await cur.fetchall()})
        return {
            h: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32) for h, v in found.items()
        }

    async def _vectors(self, group: list[_Pending], reuse_gen: int | None, tolerate: bool) -> dict[str, np.ndarray]:
        if self.embed is None:
            return {}
        # After one failure in this sync no further group asks the provider (as builtin): a
        # provider that hangs costs one call's timeouts and retries per sync, not one per group.
        failed = tolerate and self.embed_error is not None
        hashes = list({c.hash for p in group for c in p.chunks})
        vectors = await self._known_vectors(hashes, reuse_gen) if hashes else {}
        self.report.chunks_from_cache += sum(1 for p in group for c in p.chunks if c.hash in vectors)
        missing: dict[str, str] = {}
        for p in group:
            if p.inputs:
                if not failed:
                    await self._embed_media(p, vectors)
                continue
            for c in p.chunks:
                if c.hash not in vectors:
                    missing.setdefault(c.hash, c.text)
        if not missing or failed:
            return vectors
        try:
            matrix = await self.embed(list(missing.values()))
        except Exception as exc:
            if not tolerate:
                raise
            self.embed_error = embedding_failure(exc)  # the text stays searchable; vectors later
            log.warning("embedding failed; chunks stored without vectors", error=self.embed_error)
            return vectors
        if matrix.shape[0] != len(missing):
            raise BackendError(f"provider returned {matrix.shape[0]} vectors for {len(missing)} texts")
        now = time.time()
        rows = []
        for h, vec in zip(missing, matrix):
            vectors[h] = np.asarray(vec, dtype=np.float32)
            rows.append((self.agent, self.ident.provider_key, h, vectors[h], now))
        self.report.chunks_embedded += len(missing)
        if self.ms.cache.enabled:
            async with self.conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO memsift_embedding_cache(agent_id, provider_key, hash, embedding, updated_at) VALUES "
                    "(%s,%s,%s,%s,%s) "
                    "ON CONFLICT (agent_id, provider_key, hash) DO UPDATE SET embedding = excluded.embedding, "
                    "updated_at = excluded.updated_at",
                    rows,
                )
        return vectors

    async def _embed_media(self, p: _Pending, vectors: dict[str, np.ndarray]) -> None:
        """One request per image/audio file, as on builtin; a "too large" refusal keeps the file
        with no chunks (and says so in status)."""
        assert self.embed is not None
        for h, item in (p.inputs or {}).items():
            if h in vectors:
                continue
            try:
                matrix = await self.embed([item])  # type: ignore[list-item]
            except Exception as exc:
                if any(marker in str(exc).lower() for marker in TOO_LARGE):
                    p.rejected = str(exc)
                    self.skipped.append(Skipped(p.file.rel_path, f"provider refused the file: {exc}"))
                    return
                raise
            vectors[h] = np.asarray(matrix[0], dtype=np.float32)
            self.report.chunks_embedded += 1

    # --- writing --------------------------------------------------------------------------------

    async def _delete_paths(self, gen: int, paths: list[str]) -> None:
        args = (self.agent, gen, paths)
        # By chunk number through the postings' (agent, generation, chunk) index: a DELETE … USING
        # join was planned as repeated scans of the postings on a new table's empty statistics.
        cur = await self.conn.execute(
            "DELETE FROM memsift_chunks WHERE agent_id = %s AND generation = %s AND path = ANY(%s) RETURNING chunk, "
            "doc_len",
            args,
        )
        rows = await cur.fetchall()
        chunks = [r for r, _ in rows]
        if chunks:
            await self._add_stats(gen, -len(rows), -sum(n for _, n in rows))
            await self.conn.execute(
                "DELETE FROM memsift_postings WHERE agent_id = %s AND generation = %s AND chunk = ANY(%s)",
                (self.agent, gen, chunks),
            )
        await self.conn.execute(
            "DELETE FROM memsift_files WHERE agent_id = %s AND generation = %s AND path = ANY(%s)", args
        )

    async def _add_stats(self, gen: int, chunks: int, total_len: int) -> None:
        """The generation's BM25 collection size and length (schema._M4), moved in the transaction
        that writes or deletes its chunks: a search reads them as they are in its snapshot."""
        await self.conn.execute(
            "INSERT INTO memsift_stats(agent_id, generation, chunks, total_len) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (agent_id, generation) DO UPDATE SET chunks = memsift_stats.chunks + excluded.chunks, "
            "total_len = memsift_stats.total_len + excluded.total_len",
            (self.agent, gen, chunks, total_len),
        )

    async def _write_group(
        self, gen: int, group: list[_Pending], vectors: dict[str, np.ndarray], *, replace: bool
    ) -> None:
        now = time.time()
        chunk_rows: list[tuple[Any, ...]] = []
        posting_rows: list[tuple[Any, ...]] = []
        seen: set[Any] = set()
        for p in group:
            for i, c in enumerate([] if p.rejected else p.chunks):
                day = p.days[i] if i < len(p.days) else ChunkDay(None, None)
                cid = chunk_id(p.file.source, p.file.rel_path, c.start_line, c.end_line, c.hash, self.ident.model)
                number = chunk_number(cid)
                if number in seen:
                    continue  # an identical chunk (same lines and text)
                seen.add(number)
                postings, length = chunk_postings(c.text, self.ms.store.fts.tokenizer)
                chunk_rows.append(
                    (
                        self.agent,
                        gen,
                        number,
                        cid,
                        p.file.rel_path,
                        p.file.source,
                        c.start_line,
                        c.end_line,
                        c.hash,
                        self.ident.model,
                        c.text,
                        length,
                        vectors.get(c.hash),
                        now,
                        day.day,
                        day.source,
                        list(day.days) if len(day.days) > 1 else None,
                    )
                )
                posting_rows += [(self.agent, gen, po.term, number, po.tf, length, po.positions) for po in postings]
        async with self.conn.transaction():
            if replace:  # a new generation starts empty: nothing to replace
                await self._delete_paths(gen, [p.file.rel_path for p in group])
            async with self.conn.cursor() as cur:
                async with cur.copy(
                    "COPY memsift_chunks(agent_id, generation, chunk, id, path, source, start_line, end_line, hash, "
                    "model, text, "
                    "doc_len, embedding, updated_at, day, day_source, days) FROM STDIN"
                ) as copy:
                    for row in chunk_rows:
                        await copy.write_row(row)
                async with cur.copy(
                    "COPY memsift_postings(agent_id, generation, term, chunk, tf, doc_len, positions) FROM STDIN"
                ) as copy:
                    for row in posting_rows:
                        await copy.write_row(row)
                await cur.executemany(
                    "INSERT INTO memsift_files(agent_id, generation, path, source, hash, mtime_ns, size, indexed_at) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                    [(self.agent, gen, p.file.rel_path, p.file.source, p.hash, p.mtime_ns, p.size, now) for p in group],
                )
            if chunk_rows:
                await self._add_stats(gen, len(chunk_rows), sum(row[11] for row in chunk_rows))
        self.report.chunks_written += len(chunk_rows)
        self.report.files_indexed += len(group)

    async def index(
        self, gen: int, pending: list[_Pending], reuse_gen: int | None, *, tolerate: bool, replace: bool = True
    ) -> None:
        group: list[_Pending] = []
        count = 0
        for p in pending + [None]:  # type: ignore[list-item]
            if p is not None:
                group.append(p)
                count += len(p.chunks)
                if count < GROUP_CHUNKS:
                    continue
            if group:
                vectors = await self._vectors(group, reuse_gen, tolerate)
                await self._write_group(gen, group, vectors, replace=replace)
            group, count = [], 0

    def error_record(self) -> dict[str, str]:
        """The meta's `vectorsError` while chunks wait for vectors (masked), as builtin records it."""
        return {"vectorsError": redact(self.embed_error)} if self.embed_error else {}

    async def backfill(self, gen: int) -> None:
        """Embed chunks stored without vectors (the provider failed earlier)."""
        if self.embed is None or self.embed_error is not None:
            return
        cur = await self.conn.execute(
            "SELECT chunk, hash, text FROM memsift_chunks WHERE agent_id = %s AND generation = %s AND embedding IS "
            "NULL",
            (self.agent, gen),
        )
        rows = await cur.fetchall()
        for i in range(0, len(rows), GROUP_CHUNKS):
            part = rows[i : i + GROUP_CHUNKS]
            try:
                matrix = await self.embed([r[2] for r in part])
            except Exception as exc:
                self.embed_error = embedding_failure(exc)
                log.warning("embedding failed; chunks stored without vectors", error=self.embed_error)
                return
            self.report.chunks_embedded += len(part)
            async with self.conn.transaction():
                async with self.conn.cursor() as c:
                    await c.executemany(
                        "UPDATE memsift_chunks SET embedding = %s WHERE agent_id = %s AND generation = %s AND chunk = "
                        "%s",
                        [(np.asarray(v, dtype=np.float32), self.agent, gen, r[0]) for r, v in zip(part, matrix)],
                    )


async def hnsw_valid(conn: Any, name: str) -> bool:
    """The index exists and is usable (a CONCURRENTLY build that failed leaves an invalid one)."""
    row = await (
        await conn.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s", (name,)
        )
    ).fetchone()
    return bool(row and row[0])


async def valid_hnsw_names(conn: Any) -> frozenset[str]:
    """Every usable per-agent HNSW index of the database (see `hnsw_valid`), in one catalog query."""
    cur = await conn.execute("SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                             "WHERE c.relname LIKE 'memsift\\_hnsw\\_%%' AND i.indisvalid")
    return frozenset(name for (name,) in await cur.fetchall())


async def ensure_hnsw(conn: Any, agent: str, above: int, *, replace_older: bool = True) -> str | None:
    """An HNSW index of the agent's own (a partial index on its id and vector size) once it has at
    least `above` vectors: built CONCURRENTLY, so other agents' writes and every search go on
    meanwhile; a failed build's invalid index is dropped and built again. Returns its name.

    Its graph is of the half copies (schema._M5, normalized: inner product is the cosine), half the
    bytes of the full vectors to build, cache and walk; vectors too long for halves keep a graph
    of full vectors. HNSW_M and HNSW_EF_CONSTRUCTION: see their comment. The graph of full vectors
    an earlier version built is walked until the new one is in place, then dropped; with
    `replace_older` False (a search's own sync, which must not wait minutes) it is kept for now."""
    if above <= 0:
        return None
    kept = await (await conn.execute(  # the sync's own count (schema._M4): most agents stop here
        "SELECT sum(chunks) FROM memsift_stats WHERE agent_id = %s", (agent,))).fetchone()
    if kept is not None and kept[0] is not None and kept[0] < above:
        return None
    cur = await conn.execute(
        "SELECT count(*), max(vector_dims(embedding)) FROM memsift_chunks WHERE agent_id = %s AND embedding IS NOT "
        "NULL",
        (agent,),
    )
    n, dims = await cur.fetchone()
    if not dims or n < above:
        return None
    from psycopg import sql  # noqa: PLC0415

    from .search import hnsw_index_name, hnsw_index_names  # noqa: PLC0415

    dims = int(dims)
    name, *older = hnsw_index_names(agent, dims)
    if not await hnsw_valid(conn, name):
        if not replace_older:
            for old in older:
                if await hnsw_valid(conn, old):
                    return old
        await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
        halves = name == hnsw_index_name(agent, dims, halves=True)
        log.info(
            "building the agent's HNSW index", agent=agent, vectors=n, dims=dims, of="halves" if halves else "vectors"
        )
        started = time.perf_counter()
        column, ops = (
            ("embedding_half::halfvec({})", "halfvec_ip_ops")
            if halves
            else ("embedding::vector({})", "vector_cosine_ops")
        )
        await conn.execute("SET statement_timeout = 0")  # a large agent's graph takes minutes to build
        try:
            await conn.execute(
                sql.SQL(
                    "CREATE INDEX CONCURRENTLY {} ON memsift_chunks USING hnsw ((" + column + ") " + ops + ") "
                    "WITH (m = {}, ef_construction = {}) WHERE agent_id = {} AND vector_dims({}) = {}"
                ).format(
                    sql.Identifier(name),
                    sql.Literal(dims),
                    sql.Literal(HNSW_M),
                    sql.Literal(HNSW_EF_CONSTRUCTION),
                    sql.Literal(agent),
                    sql.Identifier("embedding_half" if halves else "embedding"),
                    sql.Literal(dims),
                )
            )
        finally:
            await conn.execute(f"SET statement_timeout = {SYNC_STATEMENT_TIMEOUT_MS}")
        log.info("HNSW index built", agent=agent, seconds=round(time.perf_counter() - started, 1))
    for old in older:
        if await (await conn.execute("SELECT 1 FROM pg_class WHERE relname = %s", (old,))).fetchone():
            await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(old)))
            log.info("older HNSW index dropped", agent=agent, index=old)
    return name


async def _take_lock(conn: Any, agent: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    key = agent_lock_key(agent)
    while True:
        row = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))).fetchone()
        if row[0]:
            return
        if time.monotonic() >= deadline:
            raise BackendError(
                f"agent {agent!r} is being indexed by another memsift process (waited {timeout_s:.0f} s, "
                "memory.postgres.lockTimeoutMs); try again when it finishes"
            )
        await anyio.sleep(LOCK_POLL_S)


async def _apply_scan(s: _Sync, live: int, *, include_sessions: bool) -> tuple[list[_Pending], set[str]]:
    """Scan the live generation, record touched files' new times and drop removed files' rows;
    returns (changed, removed)."""
    changed, touched, removed, unchanged = await s.scan(live, include_sessions=include_sessions)
    s.report.files_seen, s.report.files_unchanged, s.report.files_removed = (
        len(changed) + unchanged, unchanged, len(removed))
    async with s.conn.transaction():
        async with s.conn.cursor() as cur:
            await cur.executemany(
                "UPDATE memsift_files SET mtime_ns = %s, size = %s WHERE agent_id = %s AND generation = %s "
                "AND path = %s",
                [(m, z, s.agent, live, p) for p, m, z in touched],
            )
        if removed:
            await s._delete_paths(live, sorted(removed))
    return changed, removed


async def _catch_up_keywords(s: _Sync, live: int) -> None:
    """A search's sync when the index must be rebuilt: the changed notes' rows, without vectors
    (`s` embeds nothing), in the live generation; a note written after an upgrade is found by keyword."""
    changed, _removed = await _apply_scan(s, live, include_sessions=False)
    await s.index(live, changed, live, tolerate=True)


async def sync_agent(
    conn: Any,
    settings: ResolvedConfig,
    ident: Identity,
    embed: EmbedFn | None,
    *,
    force: bool,
    reason: str,
    lock_timeout_s: float,
    meta_extra: dict[str, Any] | None = None,
    allow_full: bool = True,
    include_sessions: bool = True,
    has_hnsw: Callable[[str], None] | None = None,
    tolerate_embed_errors: bool = True,
) -> tuple[SyncReport, str | None]:
    """One sync of `settings.agent_id` on `conn` (a dedicated autocommit connection). Returns the
    report and the last embedding error (None when every chunk has its vector). A full rebuild
    always reads session transcripts (when they are a source): it replaces the whole generation.
    `has_hnsw(name)`: told the agent's HNSW index when it has one (built now or before).

    A provider failure leaves chunks without vectors, searchable by keyword, where
    `tolerate_embed_errors` (False: it raises, for the caller to take its fallback provider); a
    full rebuild raises it anyway when there is an index to keep, and tolerates it for a first build
    (a keyword index beats none: the vectors are made by a later sync)."""
    started = time.perf_counter()
    report = SyncReport(reason=reason, backend="postgres")
    agent = settings.agent_id
    # A sync's statements move whole generations (deletes of 100k+ postings): the search timeout
    # (statementTimeoutMs) is for searches; a dropped connection still fails a sync at once.
    await conn.execute(f"SET statement_timeout = {SYNC_STATEMENT_TIMEOUT_MS}")
    await _take_lock(conn, agent, lock_timeout_s)
    try:
        await conn.execute(
            "INSERT INTO memsift_agents(agent_id) VALUES (%s) ON CONFLICT (agent_id) DO NOTHING", (agent,)
        )
        live, meta = await (await conn.execute(
            "SELECT generation, meta FROM memsift_agents WHERE agent_id = %s", (agent,))).fetchone()
        # A killed rebuild's rows.
        for table in ("memsift_postings", "memsift_chunks", "memsift_files", "memsift_stats"):
            await conn.execute(f"DELETE FROM {table} WHERE agent_id = %s AND generation <> %s", (agent, live))
        want = {**wanted_meta(settings, ident), **(meta_extra or {})}
        cause = "forced" if force else fingerprint_diff(meta, wanted_meta(settings, ident))
        s = _Sync(conn, settings, ident, embed, report)
        if cause and not allow_full and meta is not None:
            report.reindex_cause = cause  # a search does not rebuild: it answers from what is there
            report.notes += filter(None, [rebuild_note(meta, cause)])
            # ... with the notes written since brought in by keyword (no vectors: the rebuild embeds
            # every chunk; the meta is kept: the rebuild stays due), as on builtin.
            await _catch_up_keywords(_Sync(conn, settings, ident, None, report), live)
        elif cause:
            log.info("full reindex", cause=cause, agent=agent)
            report.full_reindex, report.reindex_cause = True, cause
            target = live + 1
            changed, _t, _r, _u = await s.scan(target)
            report.files_seen = len(changed)
            reuse = live if meta and meta.get("providerKey") == ident.provider_key else None
            await s.index(target, changed, reuse, tolerate=tolerate_embed_errors and meta is None, replace=False)
            async with conn.transaction():  # the switch: readers see the old generation or the new one
                await conn.execute(
                    "UPDATE memsift_agents SET generation = %s, meta = %s, skipped = %s, updated_at = now() WHERE "
                    "agent_id = %s",
                    (
                        target,
                        json.dumps({**want, **version_stamps(meta, rebuilt=True), **s.error_record()}),
                        json.dumps([{"path": k.path, "reason": k.reason} for k in s.skipped]),
                        agent,
                    ),
                )
            for table in ("memsift_postings", "memsift_chunks", "memsift_files", "memsift_stats"):
                await conn.execute(f"DELETE FROM {table} WHERE agent_id = %s AND generation = %s", (agent, live))
        else:
            changed, removed = await _apply_scan(s, live, include_sessions=include_sessions)
            await s.index(live, changed, live, tolerate=tolerate_embed_errors)
            await s.backfill(live)
            skipped = [{"path": k.path, "reason": k.reason} for k in s.skipped]
            # Which memsift built and last updated it, and why vectors are missing (status, any process).
            want = {**want, **version_stamps(meta, rebuilt=False), **s.error_record()}
            if changed or removed or meta != want or skipped:
                await conn.execute(
                    "UPDATE memsift_agents SET meta = %s, skipped = %s, updated_at = now() WHERE agent_id = %s",
                    (json.dumps(want), json.dumps(skipped), agent),
                )
        if embed is not None:
            name = await ensure_hnsw(conn, agent, settings.memory.postgres.hnsw_above, replace_older=reason != "search")
            if name is not None and has_hnsw is not None:
                has_hnsw(name)
        if s.ms.cache.enabled and s.ms.cache.max_entries:
            await conn.execute(
                "DELETE FROM memsift_embedding_cache WHERE agent_id = %s AND hash IN (SELECT hash FROM "
                "memsift_embedding_cache "
                "WHERE agent_id = %s AND provider_key = %s ORDER BY updated_at DESC OFFSET %s) AND provider_key = %s",
                (agent, agent, ident.provider_key, int(s.ms.cache.max_entries), ident.provider_key),
            )
        if report.chunks_written >= ANALYZE_AFTER_CHUNKS:
            # Fresh statistics: planned on an empty table's, the phrase and BM25 queries of a new
            # agent took seconds (nested loops over postings) until autovacuum came by.
            await conn.execute("ANALYZE memsift_chunks, memsift_postings")
        report.files_skipped = len(s.skipped)
        report.took_ms = (time.perf_counter() - started) * 1000
        return report, s.embed_error
    finally:
        try:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (agent_lock_key(agent),))
        except Exception:  # the connection is gone: so is its lock
            pass
