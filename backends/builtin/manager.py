"""`BuiltinSearchManager`: the SQLite FTS5 + sqlite-vec backend behind the `SearchManager` protocol."""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import anyio
import apsw
from memsift.engine.lazy import np  # numpy on first use: a keyword search never needs it

from memsift.engine.logging import get_logger
from memsift.engine.durations import vector_progress_words
from memsift.engine.search.citations import citations_enabled
from memsift.engine.config import ResolvedConfig
from memsift.engine.embeddings import EmbeddingProvider, ProviderSelection
from memsift.engine.embeddings.circuit import QueryCircuit
from memsift.engine.errors import IndexCorruptError, IndexUnusableError, ProviderError
from memsift.engine.manager import SyncReport
from memsift.engine.files.multimodal import indexed_media
from memsift.engine.files.sync import stamp_matches
from memsift.backends.builtin.recent_keys import RecentKeys
from memsift.engine.results import (
    Degraded,
    ManagerStatus,
    SearchHit,
)
from memsift.engine.search.modes import Sides
from memsift.engine.search.indexed import IndexedAnswer, IndexedSearch, inline, search_indexed
from memsift.engine.embeddings.query import QUERY_BUDGET_S, REMOTE_QUERY_BUDGET_S, QueryEmbedding
from memsift.engine.compose.shell import IndexedBackend
from memsift.engine.search.request import SearchRequest
from memsift.engine.search.snippets import SNIPPET_MAX_CHARS

from .index_file import inspect_index_file
from .indexer import Indexer, IndexIdentity, SyncCancelled, fingerprint_diff, wanted_meta, write_lock
from .outlook import Outlook, search_outlook
from .vector_memory import MemoryVectors
from .search import IndexCandidates
from .store import CORRUPT_ERRORS, VectorState, open_db, quarantine, read_meta, read_skipped, scalar, vector_progress

__all__ = ["BuiltinSearchManager"]

log = get_logger("memsift.builtin")

# Batches (indexing) keep long limits (10 min local; remote calls carry their own per-request
# timeouts and retries); a query embedding has its own budget (engine/embeddings/query.py).
BATCH_TIMEOUT_S = {"local": 600.0}
SEARCH_SYNC_BUDGET_S = 2.0  # a search waits this long for files changed since the last sync
# A first search (no index yet) builds the keyword index, then waits this long for the vectors:
# a small workspace answers hybrid at once, a large one (or a provider that does not answer) by
# keyword, saying the vectors are pending, while they are made in the background.
FIRST_SEARCH_VECTOR_BUDGET_S = 10.0
EMBED_STEP = 64  # texts per embed call for the local model and when progress is shown
SYNC_STOP_TIMEOUT_S = 30.0  # aclose waits this long for a sync it asked to stop


class BuiltinSearchManager(IndexedBackend):
    """Owns one index database, its read connection, and the embedding provider."""

    backend = "builtin"
    indexes_sessions = True  # sync(include_sessions=...) (engine/manager.py IndexesSessions)

    def __init__(
        self,
        settings: ResolvedConfig,
        *,
        selection: ProviderSelection | None = None,
        provider: EmbeddingProvider | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        super().__init__(settings)
        if selection is None and provider is not None:
            selection = ProviderSelection(provider, provider.id)
        self.choose_provider(selection)  # else chosen when first needed (ProviderChoice)
        self.progress = progress
        self.db_path = settings.store_path
        self._conn: apsw.Connection | None = None
        self._searches_reading = 0  # searches between taking the read connection and their hits
        self._retired: list[apsw.Connection] = []  # closed when the last of those searches ends
        self._conn_id: tuple[int, int] | None = None
        self._vec = VectorState(enabled=self.ms.store.vector.enabled)
        # Set by a long-running host (watch_changes): vectors then stay in memory for every index
        # size (vector_memory.py); otherwise only above quantizeAbove.
        self.resident_vectors = False
        self._memory_vectors: MemoryVectors | None = None
        self.search_syncs = 0  # syncs run by searches (a watcher's own sync then finds nothing new)
        self._embed_error: str | None = None
        self._skipped: list[dict[str, str]] = []
        self._sync_lock = anyio.Lock()
        # A sync a search stopped waiting for goes on in its thread; `aclose` stops it cleanly.
        self._closing = threading.Event()
        # Each running sync's "finished" event and its indexer (whose counts say what is pending).
        self._running: dict[threading.Event, Indexer] = {}
        self._embed_scopes: set[anyio.CancelScope] = set()
        self._seen_sessions = RecentKeys()  # bounded: a server sees any number of chats
        self._query_circuit: QueryCircuit | None = None
        self._recovered: str | None = None  # a damaged index moved aside and rebuilt: told in the next answer
        self.search_sync_budget_s = SEARCH_SYNC_BUDGET_S
        self.first_search_vector_budget_s = FIRST_SEARCH_VECTOR_BUDGET_S
        self.snippet_chars = SNIPPET_MAX_CHARS  # the benchmarks raise it to see whole chunks

    # --- identity and connections -------------------------------------------------------------

    @property
    def identity(self) -> IndexIdentity:
        p = self.provider
        if p is None:
            return IndexIdentity("none", "fts-only", "fts-only", None)
        return IndexIdentity(
            p.id,
            p.model,
            p.fingerprint,
            p.dimensions,
            max_input_bytes=getattr(p, "max_input_bytes", None),
            multimodal=bool(getattr(p, "supports_multimodal", False)),
        )

    def _reader(self) -> apsw.Connection | None:
        """The read connection, reopened when the file was swapped by a rebuild. None when there is
        no index yet (no file, or a zero-byte one); a file that is not memsift's is refused."""
        if inspect_index_file(self.db_path, self.settings.state_dir) != "ours":
            self._close_reader()
            return None
        try:
            st = os.stat(self.db_path)
        except FileNotFoundError:
            self._close_reader()
            return None
        ident = (st.st_dev, st.st_ino)
        if self._conn is None or self._conn_id != ident:
            self._close_reader()
            if self._memory_vectors is not None:
                # Vectors in memory outlive a connection (each sync closes it), not the file.
                if self._memory_vectors.file_id != ident:
                    self._memory_vectors = None
                else:
                    self._memory_vectors.reconnected()
            self._conn, self._vec = open_db(  # read-only: only the indexer writes
                self.db_path,
                tokenizer=self.ms.store.fts.tokenizer,
                vector_enabled=self.ms.store.vector.enabled,
                extension_path=self.ms.store.vector.extension_path,
                readonly=True,
            )
            self._conn_id = ident
        return self._conn

    def _close_reader(self) -> None:
        """Stop using the read connection (a sync is about to write or swap the file). A search
        that holds it awaits its query vector meanwhile: it reads on to its end, and the last such
        search closes it (`_reading`)."""
        if self._conn is not None:
            if self._searches_reading:
                self._retired.append(self._conn)
            else:
                self._conn.close()
        self._conn, self._conn_id = None, None

    @contextmanager
    def _reading(self) -> Iterator[None]:
        self._searches_reading += 1
        try:
            yield
        finally:
            self._searches_reading -= 1
            if not self._searches_reading:
                for conn in self._retired:
                    conn.close()
                self._retired.clear()

    def _vectors_in_memory(self) -> MemoryVectors:
        if self._memory_vectors is None:
            self._memory_vectors = MemoryVectors(self.ms.store.vector, str(self.db_path),
                                                 resident=self.resident_vectors, file_id=self._conn_id)
        return self._memory_vectors

    # --- sync ---------------------------------------------------------------------------------

    async def _embed_batch(self, texts: list[str]) -> np.ndarray | None:
        """Embeds for the indexer thread; None when `aclose` stopped it."""
        assert self.provider is not None
        # Shielded: the indexer thread calls this on behalf of a search that may have stopped
        # waiting (its time budget); the sync must still be able to finish. Only `aclose`
        # cancels it (the inner scope).
        with anyio.CancelScope(shield=True):
            with anyio.CancelScope() as stop:
                self._embed_scopes.add(stop)
                try:
                    return await self._embed_batch_now(texts)
                finally:
                    self._embed_scopes.discard(stop)
        return None

    def _embed_from_thread(self, texts: Any) -> np.ndarray:
        """The indexer's embed function: a hop to the event loop, or SyncCancelled when the
        manager is closing (never a failure that would store chunks without vectors)."""
        if self._closing.is_set():
            raise SyncCancelled()
        try:
            matrix = anyio.from_thread.run(self._embed_batch, list(texts))
        except anyio.RunFinishedError:  # the event loop that started the sync is gone
            raise SyncCancelled() from None
        except Exception:
            if self._closing.is_set():
                raise SyncCancelled() from None
            raise
        if matrix is None:
            raise SyncCancelled()
        return matrix

    async def _embed_batch_now(self, texts: list[str]) -> np.ndarray:
        assert self.provider is not None
        limit = BATCH_TIMEOUT_S.get(self.provider.id)
        if limit is None:  # remote: per-request timeouts and retries apply; batch jobs poll longer
            return await self.provider.embed_documents(texts)
        with anyio.fail_after(limit):
            return await self.provider.embed_documents(texts)

    async def sync(
        self, *, force: bool = False, reason: str = "manual", allow_full: bool = True, include_sessions: bool = True,
        defer_vectors: bool = False,
    ) -> SyncReport:
        """Bring the index up to date with the files. Full rebuilds are atomic.

        An explicit sync (allow_full) uses the configured provider again, so an index built with
        the fallback recovers. If embedding fails and a fallback provider is configured, the
        index is rebuilt with the fallback and the switch is recorded (status, answers, meta).
        """
        self.ensure_provider()
        async with self._sync_lock:
            await self.sync_begins_with(reason)
            kw: dict[str, Any] = {"force": force, "reason": reason, "include_sessions": include_sessions,
                                  "defer_vectors": defer_vectors}
            try:
                try:
                    return await self._run_indexer(allow_full=allow_full, **kw)
                except (IndexCorruptError, *CORRUPT_ERRORS) as exc:
                    await self._recover_corrupt(exc)
                    return await self._run_indexer(allow_full=True, **kw)
            except ProviderError as exc:
                if not self.switch_to_fallback(str(exc)):
                    raise
                return await self._run_indexer(allow_full=True, **kw)

    async def _run_indexer(self, *, force: bool, reason: str, allow_full: bool, include_sessions: bool,
                           defer_vectors: bool = False) -> SyncReport:
        # The index name is a hash: `index --list` reads the workspace here.
        extra: dict[str, Any] = {"workspace": str(self.settings.workspace), **self.fallback_record()}
        indexer = Indexer(
            self.settings,
            self.identity,
            self._embed_from_thread if self.provider else None,
            progress=self.progress,
            meta_extra=extra,
            tolerate_embed_errors=not self.may_fall_back(),
            include_sessions=include_sessions,
            embed_step=self._embed_step(),
            cancel=self._closing,
            defer_vectors=defer_vectors,
        )
        # A rebuild swaps the database file: no connection of ours stays open across that.
        self._close_reader()
        seen = self.freshness.sync_begins()  # a change noticed while this sync runs may come after its scan
        finished = threading.Event()
        # Whoever takes it first: the thread that runs the sync, or a caller cancelled before the
        # thread began it (anyio then never runs it), who must say it is over: else `aclose` waited
        # 30 s for a sync that never ran (`memsift mcp` whose client left at once).
        claim = threading.Lock()

        def work() -> SyncReport:
            if not claim.acquire(blocking=False):
                raise SyncCancelled("dropped before it began")
            try:
                return indexer.run(force=force, reason=reason, allow_full=allow_full)
            finally:
                self._running.pop(finished, None)
                finished.set()

        self._running[finished] = indexer
        # abandon_on_cancel: a search that stops waiting (its time budget) lets the sync finish in
        # its thread; it holds the cross-process write lock, so nothing else writes meanwhile.
        # `aclose` stops it (between transactions) and waits for it.
        try:
            report = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except SyncCancelled:
            raise IndexUnusableError("the sync was stopped because memsift is closing") from None
        except BaseException:
            if claim.acquire(blocking=False):
                self._running.pop(finished, None)
                finished.set()
            raise
        self._skipped = [{"path": s.path, "reason": s.reason} for s in indexer.skipped]
        self._embed_error = indexer.embed_error
        report.vectors_error = indexer.vectors_error
        self.sync_finished(report, seen)
        log.info("sync done", **report.model_dump(exclude_none=True))
        return report

    def _embed_step(self) -> int | None:
        """Texts per embed call: small for the local model (one call runs on a CPU thread that
        cannot be interrupted; the model batches by length inside anyway) and whenever progress
        is shown; a provider batch job keeps whole groups (one job each)."""
        p = self.provider
        if p is None or getattr(p, "batch_api", None):
            return None
        return EMBED_STEP if (p.id == "local" or self.progress) else None

    def syncing(self) -> bool:
        return self._sync_lock.locked()

    async def index_meta(self) -> dict[str, Any] | None:
        try:
            conn = self._reader()
            return read_meta(conn) if conn is not None else None
        except (IndexCorruptError, IndexUnusableError, *CORRUPT_ERRORS):
            return None

    def watch_changes(self, probe: Any) -> None:
        super().watch_changes(probe)
        # A host that lives on keeps the vectors in memory: a search then costs a matrix product.
        self.resident_vectors = probe is not None
        self._memory_vectors = None

    async def _ensure_fresh(self, session_key: str | None) -> tuple[bool, str | None]:
        """Before a search: sync what changed (within a time budget), bootstrap an empty index,
        never rebuild on search. Returns (the sync is still running, why the index could not be
        updated): a full disk, a read-only mount or an immutable file leaves the intact index to
        answer from, read-only."""
        if session_key and self.ms.sync.on_session_start and self._seen_sessions.is_new(session_key):
            self.mark_dirty()  # a new session starts from fresh files
        if not self.freshness.due():
            log.debug("index is fresh: no sync before this search")
            return False, None
        conn = self._reader()
        meta = read_meta(conn) if conn is not None else None
        if meta is None:
            # No index yet: no file, a zero-byte file, or a first build that never finished or is
            # still running (here or in another process: the file exists before its meta does).
            # The search waits for the build instead of answering "no results" from nothing.
            if self.progress:
                self.progress("build", 0, 0)  # the CLI says the search builds the index first
            # The keyword index first (no provider call: a provider that never answers cannot
            # hold the first search), then the vectors within a budget; past it the search
            # answers by keyword and the vectors go on being made in the background.
            await self.sync(reason="bootstrap", allow_full=True, defer_vectors=self.provider is not None)
            if self.provider is None:
                return False, None
            with anyio.move_on_after(self.first_search_vector_budget_s):
                await self.sync(reason="bootstrap vectors", allow_full=False, include_sessions=False)
            return False, None  # every file is indexed; vectors still pending are told by `degraded.vector`
        if not self.ms.sync.on_search:
            self.freshness.settled()
            return False, None
        self.search_syncs += 1
        try:
            with anyio.move_on_after(self.search_sync_budget_s) as scope:
                await self.sync(reason="search", allow_full=False, include_sessions=False)
        except IndexCorruptError:
            raise  # damage: moved aside and rebuilt by the caller
        except IndexUnusableError as exc:  # cannot write: the next search tries again
            log.warning("index not updated; answering from it as it is", error=str(exc))
            return False, f"the index could not be updated ({exc}); answering from the index as it is"
        return scope.cancelled_caught, None

    async def _recover_corrupt(self, exc: Exception) -> None:
        """The files are the truth: move the damaged index aside and rebuild it from them (only
        when the file is memsift's: anything else is refused, untouched)."""
        self._close_reader()
        with write_lock(self.db_path):
            inspect_index_file(self.db_path, self.settings.state_dir)
            moved = quarantine(self.db_path, str(exc))
        log.error(
            "index damaged; moved aside and rebuilding from the Markdown files", error=str(exc), moved_to=str(moved)
        )
        # Said once, in the next answer (a log line alone was silent to an agent behind MCP or OpenClaw).
        self._recovered = (f"the index was damaged ({str(exc)[:160]}): it was moved aside to {moved} and rebuilt "
                           "from the Markdown files")
        self.mark_dirty()

    # --- search -------------------------------------------------------------------------------

    async def search_fresh(self, req: SearchRequest, degraded: Degraded, sides: Sides,
                           embedding: QueryEmbedding | None) -> IndexedAnswer:
        """Sync what changed (within its budget), then search the index; a damaged index is moved
        aside and rebuilt from the files once, and asked again."""
        for attempt in (1, 2):
            try:
                syncing, sync_error = await self._ensure_fresh(req.session_key)
                with self._reading():
                    conn = self._reader()
                    meta = read_meta(conn) if conn is not None else None
                    if conn is None or meta is None:
                        return IndexedAnswer([], "none", sync_pending=syncing, sync_error=sync_error)
                    found = await self._search_index(conn, meta, req, degraded, sides, embedding)
                return replace(found, sync_pending=syncing, sync_error=sync_error)
            except (IndexCorruptError, *CORRUPT_ERRORS) as exc:
                if attempt == 2:
                    raise IndexCorruptError(f"index {self.db_path} is damaged again after a rebuild: {exc}") from None
                await self._recover_corrupt(exc)
        raise AssertionError("unreachable")

    def answer_notes(self) -> list[str]:
        """A damaged index rebuilt, what a sync said: told once, in the next answer."""
        notes = [n for n in (self._recovered, *super().answer_notes()) if n]
        self._recovered = None
        return notes

    @property
    def _circuit(self) -> QueryCircuit | None:
        """The query circuit of the provider in use, shared through a file beside the index."""
        if self.provider is None:
            return None
        if self._query_circuit is None or self._query_circuit.fingerprint != self.provider.fingerprint:
            self._query_circuit = QueryCircuit(self.provider.fingerprint, Path(f"{self.db_path}.query-circuit"))
        return self._query_circuit

    def query_embedding(self, q: str) -> QueryEmbedding:
        return QueryEmbedding(self.provider, q, self._circuit)

    async def _search_index(self, conn: apsw.Connection, meta: dict[str, Any], req: SearchRequest, degraded: Degraded,
                            sides: Sides, embedding: QueryEmbedding | None) -> IndexedAnswer:
        """The index searched through the one orchestration every indexed backend uses
        (engine/search/indexed.search_indexed), over builtin's store seam (search.IndexCandidates).
        Blocking calls run here, on the search's own thread of control: a read connection is
        not shared with a worker thread."""
        self.adopt_index_provider(meta)  # another process may have rebuilt it with the fallback, or back
        if sides.vector and meta.get("vectorsPending") and self.provider is not None:
            # A first search built the keyword index alone: its vectors are still being made.
            running = (
                "are being made now" if self._running else "are made by the next sync (`memsift index` makes them now)"
            )
            failed = f"; the last try failed: {meta['vectorsError']}" if meta.get("vectorsError") else ""
            degraded.vector = (
                f"vectors pending: the index was built for keyword search first and its embeddings {running} "
                f"({vector_progress_words(vector_progress(conn))}{failed})"
            )
            sides = Sides(sides.requested, vector=False, keyword=True)
        store = IndexCandidates(conn, self._vec, self._vectors_in_memory)
        found = await search_indexed(store, req, IndexedSearch(
            self.ms.query, meta.get("ftsTokenizer", "unicode61"), sides,
            lambda: self.query_vector(req.q, degraded, embedding), degraded, run=inline,
            cite=citations_enabled(self.settings.memory.citations, req.session_key), snippet_chars=self.snippet_chars,
            side_errors=(apsw.Error, ValueError)))
        if store.vectors_searched and not self._vec.available:
            degraded.vector = f"{self._vec.load_error or 'sqlite-vec disabled'}; using an in-process scan"
        self._flag_stale(conn, found.hits)
        return found

    def _flag_stale(self, conn: apsw.Connection, hits: list[SearchHit]) -> None:
        """Mark hits whose file changed (or vanished) after it was indexed."""
        for path in {h.path for h in hits}:
            row = conn.execute("SELECT mtime_ns, size, source FROM files WHERE path=?", (path,)).fetchone()
            if row is None:
                continue
            base = (
                self.settings.state_dir / "agents" / self.settings.agent_id
                if row[2] == "sessions"
                else self.settings.workspace
            )
            try:
                st = os.lstat(os.path.normpath(base / path))
                stale = not stamp_matches(row[0], row[1], st)
            except OSError:
                stale = True
            if stale:
                for h in hits:
                    if h.path == path:
                        h.stale = True

    # --- status -------------------------------------------------------------------------------

    def _pending_changes(self, conn: apsw.Connection | None) -> tuple[int, list[dict[str, str]]]:
        """Memory files added, removed or modified since they were indexed (by mtime and size): what a
        search's sync takes. Transcripts are left out; their watch syncs them. Images and audio in
        extra paths are memory files where the index holds them (as the indexer finds them)."""
        known = {}
        recorded: list[dict[str, str]] = []
        if conn is not None:
            known = {r[0]: (r[1], r[2])
                     for r in conn.execute("SELECT path, mtime_ns, size FROM files WHERE source <> 'sessions'")}
            recorded = read_skipped(conn)
        # What the last sync skipped (binary, oversize, unreadable), this process's or the index's record.
        reasons = {r["path"]: r["reason"] for r in self._skipped or recorded}
        return self.changes_since_index(known, reasons, media=indexed_media(self.ms.multimodal,
                                                                            self.identity.multimodal))

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        provider_error = None
        try:
            self.ensure_provider()
        except ProviderError as exc:  # status still reports, and says searches fail and why
            provider_error = str(exc)
        sel = self.selection or ProviderSelection(None, self.ms.provider, unavailable_reason=provider_error)
        try:
            conn = self._reader()
            if conn is not None:
                conn.execute("SELECT count(*) FROM files").fetchone()
        except (IndexCorruptError, *CORRUPT_ERRORS) as exc:
            await self._recover_corrupt(exc)
            await self.sync(reason="recovery")
            conn = self._reader()
        meta = read_meta(conn) if conn is not None else None
        if provider_error is None:
            self.adopt_index_provider(meta)
        ident = self.identity
        counts: dict[str, dict[str, int]] = {}
        files = chunks = 0
        cache_entries = 0
        fts: dict[str, Any] = {"enabled": True, "available": False, "tokenizer": self.ms.store.fts.tokenizer}
        if conn is not None:
            for source, nfiles, nchunks in conn.execute(
                "SELECT source, sum(f), sum(c) FROM (SELECT source, 1 AS f, 0 AS c FROM files "
                "UNION ALL SELECT source, 0, 1 FROM chunks) GROUP BY source"
            ):
                counts[source] = {"files": nfiles, "chunks": nchunks}
                files, chunks = files + nfiles, chunks + nchunks
            cache_entries = scalar(conn, "SELECT count(*) FROM embedding_cache")
            fts["available"] = (
                conn.execute("SELECT 1 FROM sqlite_master WHERE name='chunks_fts'").fetchone() is not None
            )
            if meta:
                fts["tokenizer"] = meta.get("ftsTokenizer", fts["tokenizer"])
        pending, skipped = self._pending_changes(conn)
        deep_facts = await self._deep_probe(conn, sel.unavailable_reason) if deep else None
        stale = fingerprint_diff(meta, wanted_meta(self.settings, ident)) if meta else None
        fallback = self.fallback()
        mode, search_now = search_outlook(
            Outlook(
                index_exists=meta is not None,
                provider_error=provider_error,
                provider=f"{ident.provider}/{ident.model}" if self.provider else None,
                requested=sel.requested,
                unavailable_reason=sel.unavailable_reason,
                stale=stale,
                vectors_by_scan=conn is not None and not self._vec.available,
                pending=pending,
                sync_on_search=self.ms.sync.on_search,
                fallback=f"{fallback.from_} failed: {fallback.reason}" if fallback else None,
            )
        )
        vec_rows = None
        if conn is not None and self._vec.available:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name='chunks_vec'").fetchone():
                vec_rows = scalar(conn, "SELECT count(*) FROM chunks_vec")
        stats, batch_api = (
            getattr(self.provider, "stats", None),
            getattr(self.provider, "batch_api", None),
        )  # remote ones
        status = ManagerStatus(
            backend=self.backend,
            agent_id=self.settings.agent_id,
            workspace_dir=str(self.settings.workspace),
            db_path=str(self.db_path),
            files=files,
            chunks=chunks,
            dirty=bool(pending) or meta is None or stale is not None,
            provider=ident.provider,
            requested_provider=sel.requested,
            model=ident.model,
            dimensions=(meta or {}).get("dims") or ident.dims,
            model_runtime=getattr(self.provider, "runtime", None),
            sources=list(self.ms.sources),
            extra_paths=list(self.ms.extra_paths),
            source_counts=counts,
            search_mode=mode,
            search_now=search_now,
            provider_unavailable_reason=sel.unavailable_reason,
            fallback=fallback,
            fts=fts,
            vector={
                "enabled": self._vec.enabled,
                "available": self._vec.available,
                "extensionPath": self._vec.extension_path,
                "loadError": self._vec.load_error,
                "rows": vec_rows,
                "search": "vec0-knn" if self._vec.available else "numpy-scan",
                # a keyword-first index whose vectors are being made (here or by another process)
                "pending": vector_progress(conn) if conn is not None and meta and (
                    meta.get("vectorsPending") or meta.get("vectorsError")) else None,
            },
            cache={"enabled": self.ms.cache.enabled, "entries": cache_entries, "maxEntries": self.ms.cache.max_entries},
            index={
                "exists": meta is not None,
                "meta": meta,
                "pendingChanges": pending,
                "rebuildNeeded": stale,
                # this process's last sync, else the one recorded in the index by any process
                "lastEmbedError": self._embed_error or (meta or {}).get("vectorsError"),
            },
            last_sync=self._last_sync.model_dump(by_alias=True) if self._last_sync else None,
            requests=stats.as_dict() if stats is not None else None,
            batch=batch_api.status() if batch_api else {"enabled": False},
            skipped=skipped,
        )
        status.deep = deep_facts
        return status

    async def _deep_probe(self, conn: apsw.Connection | None, unavailable_reason: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.provider is None:
            out["embedding"] = {"ok": False, "error": unavailable_reason}
        else:
            t0 = time.perf_counter()
            budget = QUERY_BUDGET_S.get(self.provider.id, REMOTE_QUERY_BUDGET_S)  # a search's own bound
            try:
                with anyio.fail_after(budget):
                    vec = await self.provider.embed_query("ping")
                out["embedding"] = {
                    "ok": True,
                    "provider": self.provider.id,
                    "model": self.provider.model,
                    "dimensions": int(vec.shape[0]),
                    "latencyMs": round((time.perf_counter() - t0) * 1000, 1),
                    "fallback": fallback.to_json_dict() if (fallback := self.fallback()) else None,
                }
            except TimeoutError:
                out["embedding"] = {
                    "ok": False,
                    "error": f"{self.provider.id} did not answer a one-word embedding within {budget:g} s",
                }
            except Exception as exc:
                out["embedding"] = {"ok": False, "error": str(exc)}
        if conn is not None:
            try:
                out["integrity"] = scalar(conn, "PRAGMA quick_check")
            except apsw.Error as exc:
                out["integrity"] = f"error: {exc}"
        return out

    def pending_files(self) -> int | None:
        """Changed files a running sync has not written yet (None when no sync runs)."""
        if not self._running:
            return None
        return sum(max(0, i.files_to_index - i.files_done) for i in self._running.values())

    async def aclose(self) -> None:
        await self._stop_syncs()
        self._close_reader()
        await self.close_providers()
        self.freshness.close()

    async def _stop_syncs(self) -> None:
        """Stop syncs still running for searches that stopped waiting for them (the CLI answers
        within its budget, then exits): they end between transactions, so the index holds whole
        files, and no chunk is stored without its vector."""
        running = list(self._running)
        if not running:
            return
        self._closing.set()
        for scope in list(self._embed_scopes):
            scope.cancel()
        deadline = time.monotonic() + SYNC_STOP_TIMEOUT_S
        # Polled on the loop, not waited for in a worker thread: a caller out of time cancels this and
        # exits at once (a worker thread left waiting kept the interpreter's exit for the full 30 s).
        while not all(done.is_set() for done in running) and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        if all(done.is_set() for done in running):
            self._closing.clear()  # all stopped: the manager may be used again
        else:
            log.warning("a sync did not stop in time; leaving it", seconds=SYNC_STOP_TIMEOUT_S)

    async def __aenter__(self) -> BuiltinSearchManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

