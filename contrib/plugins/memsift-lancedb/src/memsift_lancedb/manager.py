"""`LanceSearchManager`: one agent's memory in an embedded LanceDB database, behind memsift's
`SearchManager`.

What is LanceDB's: storage (a Lance dataset per table), the full-text index (BM25 over the
chunk's FTS5 tokens) and vector search (exact cosine; nulls skipped). Everything else is
memsift's, used as its own backends use it: which files are memory and how they are read and
chunked (engine/files), the query plan, the time filters and windows, the ranking pipeline
(weighted merge, decay, MMR, minScore, keyword rescue), snippets, citations and explain
(engine/search), and reads through the memory rules. Above it memsift adds the evidence
ranker, rerank, scope rules and the doors.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from memsift.engine.kit import (CHUNKER_REVISION, INDEX_TEXT_REVISION, NOTE_DATES_REVISION, SNIPPET_MAX_CHARS,
                                BackendError, BelowMinScore, ChunkDay, Degraded, IndexedAnswer, IndexUnusableError,
                                ManagerStatus, MarkdownRead, MemoryFile, MemoryRules, ProviderError, ProviderSelection,
                                QueryEmbedding, ReadResult, ResolvedConfig, SearchAnswer, SearchHit, SearchRequest, Sides,
                                Skipped, SyncReport, TimeBound, beside, chunk_tokens, citations_enabled,
                                discover_memory_files, fingerprint_diff, get_logger, read_markdown, read_memory,
                                search_indexed, search_sides, select_provider, sort_files, vector_mode_warning)

from .candidates import LanceCandidates

__all__ = ["LanceSearchManager"]

log = get_logger("memsift.lancedb")

SCHEMA = 1
EMBED_STEP = 64
# What LanceDB raises for a damaged dataset: a missing or truncated file, a corrupt page ("lance
# error: …", a panic in a reader task). Disk errors (OSError) are not damage: the data is intact.
DAMAGE = (RuntimeError, ValueError)


def _chunk_id(path: str, start: int, end: int, chunk_hash: str, model: str) -> str:
    return hashlib.sha256(f"memory:{path}:{start}:{end}:{chunk_hash}:{model}".encode()).hexdigest()


class LanceSearchManager:
    backend = "lancedb"

    def __init__(self, settings: ResolvedConfig, config: Any, progress: Any = None) -> None:
        self.settings, self.config = settings, config
        self.progress = progress  # (stage, done, total): "files", then "embed", as memsift's CLI shows them
        self.ms = settings.memory_search
        self.agent = settings.agent_id
        root = Path(os.path.expanduser(config.path)) if config.path else settings.state_dir / "agents" / self.agent / "lancedb"
        self.root = root if root.is_absolute() else settings.state_dir / root
        self._store: Any = None
        self.memory_rules = MemoryRules.from_settings(settings)
        self.selection: ProviderSelection | None = None
        self.provider: Any = None
        self._dirty = True
        self._change_probe: Any = None
        self._last_sync: SyncReport | None = None
        self._embed_error: str | None = None
        self._skipped: list[Skipped] = []
        self._lock = anyio.Lock()

    @property
    def store(self) -> Any:
        """The agent's Lance database, opened at first use: importing lancedb takes most of a second,
        and `read` (memory_get) never needs it."""
        if self._store is None:
            from .store import LanceStore  # noqa: PLC0415

            self._store = LanceStore(self.root)
        return self._store

    # --- sync -----------------------------------------------------------------------------------

    def _ensure_provider(self) -> None:
        if self.selection is None:
            self.selection = select_provider(self.ms)
            self.provider = self.selection.provider

    def _wanted_meta(self) -> dict[str, Any]:
        p = self.provider
        c = self.ms.chunking
        return {"schema": SCHEMA, "provider": p.id if p else "none", "model": p.model if p else "fts-only",
                "providerKey": p.fingerprint if p else "fts-only", "dims": p.dimensions if p else None,
                "extraPaths": sorted(self.ms.extra_paths), "chunkStrategy": c.strategy, "chunkTokens": c.tokens,
                "chunkOverlap": c.overlap, "chunker": CHUNKER_REVISION, "ftsTokenizer": self.ms.store.fts.tokenizer,
                "ftsText": INDEX_TEXT_REVISION, "noteDates": NOTE_DATES_REVISION}

    async def sync(self, *, force: bool = False, reason: str = "manual", **_: Any) -> SyncReport:
        self._ensure_provider()
        async with self._lock:
            started = time.perf_counter()
            report = SyncReport(reason=reason, backend=self.backend)
            try:
                with self.store.writing():
                    report = await self._sync_or_heal(report, force, reason)
            except OSError as exc:  # a full disk, a read-only folder: the data as it is stays searchable
                raise IndexUnusableError(f"cannot write the LanceDB dataset at {self.store.root}: {_os_error(exc)}; "
                                         "searches answer from it as it is until it can be updated") from None
            report.took_ms = round((time.perf_counter() - started) * 1000, 3)
        self._last_sync, self._dirty = report, False
        log.info("sync done", **report.model_dump(exclude_none=True))
        return report

    async def _sync_or_heal(self, report: SyncReport, force: bool, reason: str) -> SyncReport:
        try:
            await self._sync(report, force)
        except DAMAGE as exc:
            if (storage := _storage_error(exc)) is not None:
                raise storage from None  # the disk's or the folder's failure: the data is intact
            if force:
                raise BackendError(_damaged(self.store.root, exc, again=True)) from None
            # The files are the truth: a new generation is built from them beside the damaged one
            # (dropped once `keepGenerations` newer ones exist).
            log.error("LanceDB dataset damaged; rebuilding from the Markdown files", error=_short(exc))
            report = SyncReport(reason=reason, backend=self.backend)
            await self._sync(report, True, cause=f"the dataset was damaged ({_short(exc)})")
        return report

    async def _sync(self, report: SyncReport, force: bool, cause: str | None = None) -> None:
        wanted = self._wanted_meta()
        current = self.store.current()
        if force:
            cause = cause or "forced"
        elif current is None:
            cause = "the index pointer (current.json) was damaged" if self.store.pointer.exists() else "no index yet"
        else:
            cause = fingerprint_diff(current.meta, wanted)
        full = cause is not None
        gen = self.store.next_generation() if full else current.number
        if full:
            report.full_reindex, report.reindex_cause = True, cause
            await anyio.to_thread.run_sync(self.store.create, gen, wanted["dims"])
            known: dict[str, tuple] = {}
        else:
            known = await anyio.to_thread.run_sync(self.store.known_files, gen)
        files, skipped = discover_memory_files(self.settings.workspace, self.ms.extra_paths)
        files = [f for f in files if f.modality is None]  # images and audio: not indexed by this backend
        report.files_seen = len(files)
        c = self.ms.chunking

        def read(f: MemoryFile, st: os.stat_result) -> tuple[MemoryFile, os.stat_result, MarkdownRead] | None:
            got = read_markdown(f, st, skipped, strategy=c.strategy, tokens=c.tokens, overlap=c.overlap,
                                max_input_bytes=getattr(self.provider, "max_input_bytes", None))
            return (f, st, got) if got is not None else None

        each = (lambda n: self.progress("files", n, len(files))) if self.progress else None
        sorted_files = sort_files(files, known, skipped, read, lambda p: p[2].hash, each)
        gone = sorted(set(known) - {f.rel_path for f in files})
        changed = sorted_files.changed
        report.files_unchanged, report.files_removed, report.files_skipped = sorted_files.unchanged, len(gone), len(skipped)
        self._skipped = skipped
        rows, file_rows = await self._rows(changed, report)
        touched = [(f.rel_path, known[f.rel_path][0], m, s, f.source) for f, m, s in sorted_files.touched]
        stale = gone + [p[0].rel_path for p in changed] + [t[0] for t in touched]

        def write() -> None:
            import pyarrow as pa  # noqa: PLC0415

            from .store import Generation  # noqa: PLC0415

            if stale and not full:
                self.store.forget_paths(gen, stale)
            if rows:
                self.store.chunks(gen).add(pa.Table.from_pylist(rows, schema=self.store.chunks(gen).schema))
            more = file_rows + [{"path": p, "source": src, "hash": h, "mtime_ns": m, "size": s} for p, h, m, s, src in touched]
            if more:
                self.store.files(gen).add(pa.Table.from_pylist(more, schema=self.store.files(gen).schema))
            if full or (rows and not self.store.has_text_index(gen)):
                if self.store.chunks(gen).count_rows():
                    self.store.index_text(gen)
            elif rows or stale:
                self.store.chunks(gen).optimize()  # folds new rows into the indexes, drops deleted ones
            if full:
                self.store.publish(Generation(gen, wanted))
                self.store.drop_before(gen - self.config.keep_generations + 1)

        await anyio.to_thread.run_sync(write)
        report.files_indexed = len(changed)
        report.chunks_written = len(rows)

    async def _rows(self, changed: list[tuple[MemoryFile, os.stat_result, MarkdownRead]],
                    report: SyncReport) -> tuple[list[dict], list[dict]]:
        model = self.provider.model if self.provider else "fts-only"
        tokenizer = self.ms.store.fts.tokenizer
        rows, file_rows = [], []
        for f, st, got in changed:
            for i, ch in enumerate(got.chunks):
                day = got.days[i] if i < len(got.days) else ChunkDay(None, None)
                rows.append({"id": _chunk_id(f.rel_path, ch.start_line, ch.end_line, ch.hash, model), "path": f.rel_path,
                             "source": f.source, "start_line": ch.start_line, "end_line": ch.end_line, "text": ch.text,
                             "tokens": " ".join(chunk_tokens(ch.text, tokenizer)), "day": day.day, "day_source": day.source,
                             "first_day": min(day.days, default=day.day), "last_day": max(day.days, default=day.day)})
            file_rows.append({"path": f.rel_path, "source": f.source, "hash": got.hash, "mtime_ns": st.st_mtime_ns,
                              "size": st.st_size})
        if self.provider is not None and rows:
            vectors = await self._embed([r["text"] for r in rows])
            for r, v in zip(rows, vectors if vectors is not None else [None] * len(rows)):
                r["vector"] = None if v is None else np.asarray(v, dtype=np.float32)
            report.chunks_embedded = len(rows) if vectors is not None else 0
        return rows, file_rows

    async def _embed(self, texts: list[str]) -> np.ndarray | None:
        """The chunks' vectors; a provider failure keeps the text searchable (vectors null) and is
        shown in status until a sync embeds again."""
        step = EMBED_STEP if self.provider.id == "local" else len(texts)
        try:
            parts = []
            for i in range(0, len(texts), step):
                parts.append(await self.provider.embed_documents(texts[i : i + step]))
                if self.progress:
                    self.progress("embed", min(i + step, len(texts)), len(texts))
        except ProviderError as exc:
            self._embed_error = str(exc)
            log.warning("embedding failed; chunks stored without vectors", error=str(exc))
            return None
        self._embed_error = None
        return np.vstack(parts)

    def mark_dirty(self) -> None:
        self._dirty = True

    def watch_changes(self, probe: Any) -> None:
        self._change_probe = probe
        self.mark_dirty()

    async def _ensure_fresh(self) -> str | None:
        """Sync what changed before a search; returns why the index could not be updated, if so."""
        if self._change_probe is not None and self._change_probe.changed():
            self._dirty = True
        if self.store.current() is None:  # none yet, or its pointer or tables gone: built from the notes
            await self.sync(reason="bootstrap")
        elif not self._dirty:
            return None
        elif self.ms.sync.on_search:
            try:
                await self.sync(reason="search")
            except IndexUnusableError as exc:  # a full disk or a read-only state folder: the index as it is answers
                log.warning("index not updated; answering from it as it is", error=str(exc))
                return f"the index could not be updated ({exc})"
        self._dirty = False
        return None

    # --- search ---------------------------------------------------------------------------------

    async def search(self, query: str, *, max_results: int | None = None, min_score: float | None = None,
                     session_key: str | None = None, explain: bool = False, now: float | None = None,
                     mode: str | None = None, since: TimeBound = None, until: TimeBound = None,
                     candidates: int | None = None) -> SearchAnswer:
        started = time.perf_counter()
        req = SearchRequest.parse(query, self.ms.query, max_results=max_results, min_score=min_score, mode=mode,
                                  since=since, until=until, now=now)
        self._ensure_provider()
        degraded = Degraded()
        hits: list[SearchHit] = []
        answered, relaxed, below, time_only = "none", False, None, False
        sync_error: str | None = None
        if req.q:
            sides = search_sides(req.q, req.mode, hybrid_enabled=self.ms.query.hybrid.enabled, provider=self.provider)
            embedding = QueryEmbedding(self.provider, req.q) if sides.vector and self.provider is not None else None

            async def answer() -> Any:
                nonlocal sync_error
                sync_error = await self._ensure_fresh()
                try:
                    return await self._search(req, session_key, degraded, sides,
                                              embedding, now=now, candidates=candidates)
                except DAMAGE as exc:  # rebuilt from the files once, then asked again
                    log.error("LanceDB dataset damaged; rebuilding from the Markdown files", error=_short(exc))
                    await self.sync(force=True, reason=f"the dataset was damaged ({_short(exc)})")
                try:
                    return await self._search(req, session_key, degraded, sides,
                                              embedding, now=now, candidates=candidates)
                except DAMAGE as exc:
                    raise BackendError(_damaged(self.store.root, exc, again=True)) from None

            found = await beside(embedding.run if embedding else None, answer)
            hits, answered, relaxed, below, time_only = found.hits, found.mode, found.relaxed, found.below_min_score, found.time_only
            if not explain:
                for hit in hits:
                    hit.explain = None
        warning = vector_mode_warning(req.q, self.provider) if req.q and req.mode == "vector" else None
        return SearchAnswer(
            query=req.query, results=hits, backend=self.backend, mode=answered,
            provider=self.provider.id if self.provider else "none", model=self.provider.model if self.provider else None,
            citations=self.settings.memory.citations, degraded=degraded, min_score=req.min_score, max_results=req.max_results,
            took_ms=round((time.perf_counter() - started) * 1000, 3), relaxed=relaxed, sync_error=sync_error,
            **req.time_facts(time_only=time_only),
            below_min_score=BelowMinScore(candidates=below[0], best_score=below[1]) if below else None,
            notes=[warning] if warning else None,
        )

    async def _query_vector(self, degraded: Degraded, embedding: QueryEmbedding | None) -> np.ndarray | None:
        if self.provider is None:
            if self.selection and self.selection.requested != "none":
                degraded.vector = f"no embedding provider: {self.selection.unavailable_reason or 'none configured'}"
            return None
        if embedding is None:
            return None
        await embedding.done.wait()
        if embedding.error:
            degraded.vector = embedding.error
        return embedding.vector

    async def _search(self, req: SearchRequest, session_key: str | None, degraded: Degraded, sides: Sides,
                      embedding: QueryEmbedding | None, *, now: float | None, candidates: int | None) -> IndexedAnswer:
        gen = self.store.current()
        if gen is None:
            return IndexedAnswer([], "none")

        async def query_vector() -> np.ndarray | None:
            qvec = await self._query_vector(degraded, embedding)
            if qvec is not None and gen.meta.get("dims") != len(qvec):
                degraded.vector = "the index was built for another embedding model; run `memsift index` to rebuild"
                return None
            return qvec

        store = LanceCandidates(self.store.chunks(gen.number), self.store.files(gen.number), self.ms.store.fts.tokenizer)
        return await search_indexed(store, req, query=self.ms.query, tokenizer=self.ms.store.fts.tokenizer, sides=sides,
                                    query_vector=query_vector, degraded=degraded, run=anyio.to_thread.run_sync,
                                    cite=citations_enabled(self.settings.memory.citations, session_key),
                                    snippet_chars=SNIPPET_MAX_CHARS, now=now, candidates=candidates)

    # --- read, status, close --------------------------------------------------------------------

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   max_chars: int | None = None, offset: int = 0) -> ReadResult:
        return await read_memory(self.memory_rules, path, from_line, lines, max_chars=max_chars, offset=offset)

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        self._ensure_provider()
        gen = self.store.current()
        files = chunks = vectors = 0
        stale = None
        if gen is not None:
            files = self.store.files(gen.number).count_rows()
            table = self.store.chunks(gen.number)
            chunks = table.count_rows()
            vectors = table.count_rows("vector IS NOT NULL") if "vector" in table.schema.names else 0
            stale = fingerprint_diff(gen.meta, self._wanted_meta())
        p = self.provider
        mode = "fts-only" if p is None or stale else "hybrid"
        now_says = ("build the index first, then search" if gen is None
                    else f"{mode} over {chunks} chunks in LanceDB (its BM25 full-text index; exact cosine)")
        return ManagerStatus(
            backend=self.backend, agent_id=self.agent, workspace_dir=str(self.settings.workspace), db_path=str(self.store.root),
            files=files, chunks=chunks, dirty=gen is None or stale is not None or self._dirty,
            provider=p.id if p else "none", requested_provider=self.selection.requested if self.selection else None,
            model=p.model if p else None, dimensions=getattr(p, "dimensions", None), sources=["memory"],
            extra_paths=list(self.ms.extra_paths), search_mode=mode, search_now=now_says,
            provider_unavailable_reason=self.selection.unavailable_reason if self.selection else None,
            fts={"enabled": True, "available": gen is not None, "tokenizer": self.ms.store.fts.tokenizer, "search": "lancedb-bm25"},
            vector={"enabled": p is not None, "available": p is not None, "rows": vectors, "search": "lancedb exact cosine"},
            cache={"enabled": False, "entries": 0, "maxEntries": 0},
            index={"exists": gen is not None, "meta": gen.meta if gen else None, "rebuildNeeded": stale,
                   "lastEmbedError": self._embed_error, "lancedb": {"generation": gen.number if gen else None,
                                                                    "generations": self.store.generations()}},
            last_sync=self._last_sync.model_dump(by_alias=True) if self._last_sync else None,
            skipped=[{"path": s.path, "reason": s.reason} for s in self._skipped],
        )

    async def aclose(self) -> None:
        if self.provider is not None:
            await self.provider.aclose()


def _os_error(exc: OSError) -> str:
    hint = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied", errno.EDQUOT: "the disk quota is used up"}.get(exc.errno or 0)
    return hint or exc.strerror or str(exc)


def _storage_error(exc: BaseException) -> OSError | None:
    """LanceDB reports an operating-system error inside its own ("… (os error 28)"): that one is the
    disk's or the folder's, not damage, and is raised as the OSError it is."""
    found = re.search(r"\(os error (\d+)\)", str(exc))
    if found is None:
        return None
    number = int(found.group(1))
    return OSError(number, os.strerror(number))


def _short(exc: BaseException) -> str:
    """LanceDB's message without the Rust source location it appends."""
    text = str(exc).split(", /root/.cargo/", 1)[0].split(", /home/", 1)[0]
    return re.sub(r", [^ ]*\.rs:\d+:\d+$", "", text)[:300]


def _damaged(root: Path, exc: BaseException, *, again: bool) -> str:
    when = " again after a rebuild" if again else ""
    return (f"the LanceDB dataset at {root} is damaged{when}: {_short(exc)}; move the folder aside and run "
            "`memsift index --force` (the Markdown files are the truth: nothing of them is lost)")
