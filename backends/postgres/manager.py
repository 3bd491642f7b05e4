"""`PostgresSearchManager`: one agent's memory in a shared Postgres database, behind `SearchManager`.

Searches read one generation in a REPEATABLE READ snapshot (never half a rebuild), from the read
replica when `memory.postgres.readDsn` is set. Read-your-writes: after this process syncs, a
search waits up to `replicaWaitMs` for the replica to replay the sync's WAL position, then reads
the primary instead. Ranking, snippets, citations and explain are the engine's (shared with builtin).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import numpy as np

from memsift.engine.search.citations import citations_enabled
from memsift.engine.config import ResolvedConfig
from memsift.engine.embeddings import EmbeddingProvider, ProviderSelection
from memsift.engine.errors import BackendError, ProviderError
from memsift.engine.logging import get_logger
from memsift.engine.manager import SyncReport
from memsift.engine.secrets import redact
from memsift.engine.files.multimodal import indexed_media
from memsift.engine.files.sync import skip_reason
from memsift.engine.compose.shell import IndexedBackend, vectors_missing
from memsift.engine.search.request import SearchRequest
from memsift.engine.embeddings.query import QueryEmbedding
from memsift.engine.results import Degraded, ManagerStatus
from memsift.engine.search.indexed import IndexedAnswer, IndexedSearch, awaited, gather_indexed, rank_gathered
from memsift.engine.search.modes import Sides
from memsift.engine.search.snippets import SNIPPET_MAX_CHARS

from .connect import (
    add_hnsw_name,
    cached_hnsw_names,
    connect_once,
    driver_error,
    drop_pools,
    import_driver,
    mark_schema_checked,
    release_pools,
    remember_hnsw_names,
    resolve_dsns,
    schema_checked,
    shared_pool,
)
from .indexer import Identity, fingerprint_diff, sync_agent, valid_hnsw_names, wanted_meta
from .schema import SCHEMA_VERSION, migrate
from .search import HnswWalk, PgCandidates, hnsw_index_name, hnsw_index_names

__all__ = ["PostgresSearchManager"]

log = get_logger("memsift.postgres")

EMBED_STEP = 64  # texts per embed call for the local model
REPLICA_POLL_S = 0.02


HNSW_RECHECK_S = 60.0  # the database's HNSW indexes are listed again this often (a sync elsewhere may build one)

class PostgresSearchManager(IndexedBackend):
    backend = "postgres"
    indexes_sessions = True  # sync(include_sessions=...) (engine/manager.py IndexesSessions)

    def __init__(self, settings: ResolvedConfig, *, provider: EmbeddingProvider | None = None,
                 selection: ProviderSelection | None = None) -> None:
        super().__init__(settings)
        self.cfg = settings.memory.postgres
        import_driver()
        self.dsns = resolve_dsns(self.cfg)
        if selection is None and provider is not None:
            selection = ProviderSelection(provider, provider.id)
        self.choose_provider(selection)  # else chosen when first needed (ProviderChoice)
        self.agent = settings.agent_id
        self._pool_dsns: set[str] = set()  # the databases whose shared pools this manager holds (connect.py)
        self._hnsw: dict[
            int, tuple[str | None, float]
        ] = {}  # vector size → (the agent's HNSW index walked, when looked)
        self._written_lsn: str | None = None  # the WAL position of this process's last sync
        self._embed_error: str | None = None
        self._sync_lock = anyio.Lock()
        self.snippet_chars = SNIPPET_MAX_CHARS

    # --- connections ----------------------------------------------------------------------------

    @property
    def identity(self) -> Identity:
        p = self.provider
        if p is None:
            return Identity("none", "fts-only", "fts-only")
        return Identity(p.id, p.model, p.fingerprint, getattr(p, "max_input_bytes", None),
                        multimodal=bool(getattr(p, "supports_multimodal", False)))

    def _error(self, exc: BaseException, doing: str) -> BackendError:
        return driver_error(exc, self.dsns.write, doing)

    async def _outage(self, exc: BaseException, doing: str) -> BackendError:
        """A failure as a BackendError; after a lost connection the pools are closed, so the next
        call opens new ones and reaches a server that came back at once (a pool left alone keeps
        backing off its reconnects, and answers PoolTimeout for a while)."""
        await drop_pools(self._pool_dsns | {self.dsns.write})  # for every agent of this process: one database
        return exc if isinstance(exc, BackendError) else self._error(exc, doing)

    async def _ensure_schema(self) -> None:
        """Once per database and process, not per agent: a gateway's hundredth agent pays no migration check."""
        if schema_checked(self.dsns.write):
            return
        conn = await connect_once(self.dsns.write, self.cfg, vectors=False)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        mark_schema_checked(self.dsns.write)

    async def _pool(self, which: str) -> Any:
        dsn = self.dsns.read if which == "read" and self.dsns.read else self.dsns.write
        self._pool_dsns.add(dsn)
        return await shared_pool(dsn, self.cfg, f"memsift-{which}", owner=self)

    async def _read_pool(self) -> Any:
        """The replica, unless it has not replayed this process's last sync within replicaWaitMs."""
        if not self.dsns.read:
            return await self._pool("write")
        replica = await self._pool("read")
        if self._written_lsn is None:
            return replica
        deadline = time.monotonic() + self.cfg.replica_wait_ms / 1000
        async with replica.connection() as conn:
            while True:
                cur = await conn.execute(
                    "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, true)", (self._written_lsn,)
                )
                if (await cur.fetchone())[0]:
                    self._written_lsn = None  # caught up: later writes by others are not ours to wait for
                    return replica
                if time.monotonic() >= deadline:
                    log.info("replica behind this process's last sync; reading the primary", lsn=self._written_lsn)
                    return await self._pool("write")
                await anyio.sleep(REPLICA_POLL_S)

    # --- sync -----------------------------------------------------------------------------------

    async def _embed(self, texts: list[str]) -> np.ndarray:
        assert self.provider is not None
        step = EMBED_STEP if self.provider.id == "local" else len(texts) or 1
        parts = [await self.provider.embed_documents(texts[i : i + step]) for i in range(0, len(texts), step)]
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    async def sync(self, *, force: bool = False, reason: str = "manual", allow_full: bool = True,
                   include_sessions: bool = True) -> SyncReport:
        """Bring the agent's generation up to date with the files (a full rebuild is one switch).
        When embedding fails and `memorySearch.fallback` can be taken, the index is rebuilt with it;
        a sync someone asked for tries the configured provider again first (ProviderChoice)."""
        self.ensure_provider()
        async with self._sync_lock:
            await self.sync_begins_with(reason)
            kw: dict[str, Any] = {"force": force, "reason": reason, "include_sessions": include_sessions}
            try:
                report = await self._sync_agent(allow_full=allow_full, **kw)
            except ProviderError as exc:
                if not self.switch_to_fallback(str(exc)):
                    raise
                return await self._sync_agent(allow_full=True, **kw)
            if report.vectors_error and self.switch_to_fallback(report.vectors_error):  # a backfill failed
                return await self._sync_agent(allow_full=True, **kw)
            return report

    async def index_meta(self) -> dict[str, Any] | None:
        psycopg = import_driver()
        import psycopg_pool  # noqa: PLC0415

        try:
            return await self._agent_meta()
        except (psycopg.Error, psycopg_pool.PoolTimeout, OSError, BackendError):
            return None

    async def _sync_agent(self, *, force: bool, reason: str, allow_full: bool, include_sessions: bool) -> SyncReport:
        psycopg = import_driver()
        seen = self.freshness.sync_begins()
        try:
            await self._ensure_schema()
            conn = await connect_once(self.dsns.write, self.cfg)
            try:
                extra = {"workspace": str(self.settings.workspace), **self.fallback_record()}
                report, self._embed_error = await sync_agent(
                    conn,
                    self.settings,
                    self.identity,
                    self._embed if self.provider else None,
                    force=force,
                    reason=reason,
                    lock_timeout_s=self.cfg.lock_timeout_ms / 1000,
                    meta_extra=extra,
                    allow_full=allow_full,
                    include_sessions=include_sessions,
                    has_hnsw=lambda name: add_hnsw_name(self.dsns.write, name),
                    tolerate_embed_errors=not self.may_fall_back(),
                )
                if self.dsns.read:
                    self._written_lsn = (
                        await (await conn.execute("SELECT pg_current_wal_lsn()::text")).fetchone()
                    )[0]
            finally:
                await conn.close()
        except psycopg.Error as exc:
            raise await self._outage(exc, "syncing") from None
        report.vectors_error = redact(self._embed_error) if self._embed_error else None
        self.sync_finished(report, seen)
        log.info("sync done", **report.model_dump(exclude_none=True))
        return report

    def syncing(self) -> bool:
        return self._sync_lock.locked()

    async def _ensure_fresh(self) -> None:
        if not self.freshness.due():
            return
        meta = await self._agent_meta()
        if meta is None:
            await self.sync(reason="bootstrap")
        elif self.ms.sync.on_search:
            await self.sync(
                reason="search", allow_full=False, include_sessions=False
            )  # transcripts: explicit syncs only
        else:
            self.freshness.settled()

    async def _hnsw_walk(self, conn: Any, dims: int) -> HnswWalk | None:
        """How to walk the agent's own HNSW index for vectors of `dims` (indexer.ensure_hnsw), or
        None (the exact scan). Known once found; else looked up in the database's listing, which
        every agent of this process shares, read again at most every HNSW_RECHECK_S (a sync
        elsewhere may build one); an index this process's sync finds or builds is added at once."""
        if self.cfg.hnsw_above <= 0:
            return None
        known = self._hnsw.get(dims)
        wanted = hnsw_index_name(self.agent, dims)
        if known is None or known[0] != wanted:  # none yet, or the older graph the next sync replaces
            names = cached_hnsw_names(self.dsns.write, HNSW_RECHECK_S)
            if names is None:
                names = await valid_hnsw_names(conn)
                remember_hnsw_names(self.dsns.write, names)
            known = (
                next((name for name in hnsw_index_names(self.agent, dims) if name in names), None),
                time.monotonic(),
            )
            self._hnsw[dims] = known
        if known[0] is None:
            return None
        return HnswWalk(self.cfg.hnsw_ef_search, halves=known[0] == hnsw_index_name(self.agent, dims, halves=True))

    async def _agent_meta(self) -> dict[str, Any] | None:
        await self._ensure_schema()
        pool = await self._pool("write")
        async with pool.connection() as conn:
            row = await (
                await conn.execute("SELECT meta FROM memsift_agents WHERE agent_id = %s", (self.agent,))
            ).fetchone()
        return row[0] if row else None

    # --- search ---------------------------------------------------------------------------------

    async def search_fresh(self, req: SearchRequest, degraded: Degraded, sides: Sides,
                           embedding: QueryEmbedding | None) -> IndexedAnswer:
        psycopg = import_driver()
        import psycopg_pool  # noqa: PLC0415

        try:
            await self._ensure_fresh()
            return await self._search_db(req, degraded, sides, embedding)
        except (psycopg.Error, psycopg_pool.PoolTimeout, OSError, BackendError) as exc:
            raise await self._outage(exc, "searching") from None

    async def _search_db(self, req: SearchRequest, degraded: Degraded, sides: Sides,
                         embedding: QueryEmbedding | None) -> IndexedAnswer:
        """The agent's generation searched through the one orchestration every indexed backend uses
        (engine/search/indexed.search_indexed) over Postgres's store seam (search.PgCandidates),
        in one read-only snapshot. The query's vector is known before a connection is taken."""
        qvec = await self.query_vector(req.q, degraded, embedding) if sides.vector else None

        async def query_vector() -> np.ndarray | None:
            return qvec

        pool = await self._read_pool()
        async with pool.connection() as conn:
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")  # one snapshot: one generation
            try:
                row = await (await conn.execute(
                    "SELECT generation, meta FROM memsift_agents WHERE agent_id = %s", (self.agent,))).fetchone()
                if row is None or row[1] is None:
                    return IndexedAnswer([], "none")
                # Another gateway of the fleet rebuilt it with the fallback, or back: the question
                # (embedded before this snapshot) is embedded again by the index's provider.
                if self.followed(row[1]) and sides.vector:
                    degraded.vector = None
                    qvec = await self.query_vector(req.q, degraded, None)
                tokenizer = self.ms.store.fts.tokenizer
                store = PgCandidates(conn, self.agent, row[0], tokenizer, lambda dims: self._hnsw_walk(conn, dims))
                how = IndexedSearch(self.ms.query, tokenizer, sides, query_vector, degraded, run=awaited,
                                    cite=citations_enabled(self.settings.memory.citations, req.session_key),
                                    snippet_chars=self.snippet_chars)
                gathered = await gather_indexed(store, req, how)
            finally:
                await conn.execute("ROLLBACK")
        # Ranked with the connection back in the pool: another agent's search need not wait for it.
        if gathered is None:
            return IndexedAnswer([], "none")
        return rank_gathered(gathered, how)

    # --- status ---------------------------------------------------------------------------------------

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        psycopg = import_driver()
        import psycopg_pool  # noqa: PLC0415

        self.ensure_provider()
        facts: dict[str, Any] = {"dsn": self.dsns.shown, "readDsn": None, "schemaVersion": SCHEMA_VERSION,
                                 "error": None}
        if self.dsns.read:
            from .connect import shown_dsn  # noqa: PLC0415

            facts["readDsn"] = shown_dsn(self.dsns.read)
        files = chunks = with_vectors = cache = 0
        by_source: dict[str, dict[str, int]] = {}
        meta = None
        skipped: list[dict[str, str]] = []
        known: dict[str, tuple[int, int]] = {}  # the generation's memory files: path → (mtime_ns, size)
        try:
            await self._ensure_schema()
            pool = await self._pool("write")
            async with pool.connection() as conn:
                row = await (
                    await conn.execute(
                        "SELECT generation, meta, skipped FROM memsift_agents WHERE agent_id = %s", (self.agent,)
                    )
                ).fetchone()
                if row:
                    gen, meta, skipped = row
                    facts["generation"] = gen
                    known = {path: (mtime_ns, size) for path, mtime_ns, size in await (await conn.execute(
                        "SELECT path, mtime_ns, size FROM memsift_files WHERE agent_id = %s AND generation = %s AND "
                        "source <> 'sessions'", (self.agent, gen))).fetchall()}
                    for source, n in await (
                        await conn.execute(
                            "SELECT source, count(*) FROM memsift_files WHERE agent_id = %s AND generation = %s GROUP "
                            "BY source",
                            (self.agent, gen),
                        )
                    ).fetchall():
                        by_source.setdefault(source, {})["files"] = n
                    for source, n, v in await (
                        await conn.execute(
                            "SELECT source, count(*), count(embedding) FROM memsift_chunks WHERE agent_id = %s AND "
                            "generation = %s "
                            "GROUP BY source",
                            (self.agent, gen),
                        )
                    ).fetchall():
                        by_source.setdefault(source, {})["chunks"] = n
                        with_vectors += v
                    files = sum(c.get("files", 0) for c in by_source.values())
                    chunks = sum(c.get("chunks", 0) for c in by_source.values())
                cache = (await (await conn.execute(
                    "SELECT count(*) FROM memsift_embedding_cache WHERE agent_id = %s", (self.agent,))).fetchone())[0]
                facts["server"] = (await (await conn.execute("SHOW server_version")).fetchone())[0]
        except (psycopg.Error, psycopg_pool.PoolTimeout, OSError, BackendError) as exc:
            facts["error"] = str(await self._outage(exc, "reading status"))
        self.adopt_index_provider(meta)
        ident = self.identity
        stale = fingerprint_diff(meta, wanted_meta(self.settings, ident)) if meta else None
        pending, skipped = self._pending(known, skipped or []) if not facts["error"] else (0, skipped or [])
        mode = "none" if facts["error"] else ("fts-only" if self.provider is None or stale else "hybrid")
        if facts["error"]:
            now_says = f"fail: the database is unreachable: {facts['error']}"
        elif meta is None:
            now_says = f"build the index first ({pending} file(s)), then search"
        else:
            now_says = (f"{mode} over {chunks} chunks in Postgres (BM25 over postings; exact per-agent cosine)"
                        f"{self.fallback_words()}")
        return ManagerStatus(
            backend=self.backend,
            agent_id=self.agent,
            workspace_dir=str(self.settings.workspace),
            db_path=self.dsns.shown,
            files=None if facts["error"] else files,
            chunks=None if facts["error"] else chunks,
            dirty=meta is None or stale is not None or pending > 0,
            provider=ident.provider,
            requested_provider=self.selection.requested if self.selection else None,
            model=ident.model,
            dimensions=getattr(self.provider, "dimensions", None),
            model_runtime=getattr(self.provider, "runtime", None),
            sources=list(self.ms.sources),
            extra_paths=list(self.ms.extra_paths),
            source_counts={k: {"files": v.get("files", 0), "chunks": v.get("chunks", 0)} for k, v in by_source.items()},
            search_mode=mode,
            search_now=now_says,
            provider_unavailable_reason=self.selection.unavailable_reason if self.selection else None,
            fallback=self.fallback(),
            fts={
                "enabled": True,
                "available": meta is not None,
                "tokenizer": self.ms.store.fts.tokenizer,
                "search": "bm25-postings",
            },
            vector={
                "enabled": self.provider is not None,
                "available": self.provider is not None,
                "rows": with_vectors,
                "search": "pgvector exact per-agent scan",
                "pending": vectors_missing(self.provider, with_vectors, chunks, meta is not None),
            },
            cache={"enabled": self.ms.cache.enabled, "entries": cache, "maxEntries": self.ms.cache.max_entries},
            index={
                "exists": meta is not None,
                "meta": meta,
                "rebuildNeeded": stale,
                "pendingChanges": pending,
                "lastEmbedError": redact(self._embed_error) if self._embed_error else (meta or {}).get("vectorsError"),
                "postgres": facts,
            },
            last_sync=self._last_sync.model_dump(by_alias=True) if self._last_sync else None,
            skipped=skipped or [],
            unavailable=facts["error"],
        )

    def _pending(self, known: dict[str, tuple[int, int]], recorded: list[dict[str, str]]
                 ) -> tuple[int, list[dict[str, str]]]:
        """The memory files changed since the generation was indexed, and the skipped ones with why
        (as the last sync recorded them, else judged now), as builtin's status counts them."""
        return self.changes_since_index(known, {r["path"]: r["reason"] for r in recorded}, judge=skip_reason,
                                        media=indexed_media(self.ms.multimodal, self.identity.multimodal))

    async def aclose(self) -> None:
        await release_pools(self)
        await self.close_providers()
        self.freshness.close()

    async def __aenter__(self) -> PostgresSearchManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
