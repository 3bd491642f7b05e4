"""`QdrantSearchManager`: one agent's memory in Qdrant, behind memsift's `SearchManager`.

What is Qdrant's: storage (collections per generation, store.py), BM25 as sparse vectors with its
IDF modifier, dense cosine search and payload filters (candidates.py). Everything else is
memsift's, through its backend kit: which files are memory and how they are read and chunked,
the search choreography and ranking (`search_indexed`), snippets, citations and explain, reads
through the memory rules. Above it memsift adds the evidence ranker, rerank, scope and the doors.
"""

from __future__ import annotations

import hashlib
import os
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

from .candidates import QdrantCandidates, day_number, document_terms, sparse_document
from .store import Generation, QdrantStore, point_id

__all__ = ["QdrantSearchManager"]

log = get_logger("memsift.qdrant")

SCHEMA = 1
EMBED_STEP = 64
UPSERT_STEP = 256


def _chunk_id(path: str, start: int, end: int, chunk_hash: str, model: str) -> str:
    return hashlib.sha256(f"memory:{path}:{start}:{end}:{chunk_hash}:{model}".encode()).hexdigest()


def _failure(exc: Exception, where: str) -> BackendError:
    """Qdrant's own errors (a server down, a refused request) as memsift's, said once."""
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return BackendError(f"Qdrant at {where} failed: {text}")


class QdrantSearchManager:
    backend = "qdrant"

    def __init__(self, settings: ResolvedConfig, config: Any, progress: Any = None) -> None:
        self.settings, self.config = settings, config
        self.progress = progress  # (stage, done, total): "files", then "embed", as memsift's CLI shows them
        self.ms = settings.memory_search
        self.agent = settings.agent_id
        root = Path(os.path.expanduser(config.path)) if config.path else settings.state_dir / "agents" / self.agent / "qdrant"
        self.root = root if root.is_absolute() else settings.state_dir / root
        self._store: QdrantStore | None = None
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
    def store(self) -> QdrantStore:
        if self._store is None:
            self._store = QdrantStore(self.config, self.root, self.agent)
        return self._store

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        """A blocking store call with the client held for its length; Qdrant's errors said as memsift's."""
        def work() -> Any:
            with self.store.client():
                return fn(*args)

        try:
            return await anyio.to_thread.run_sync(work)
        except (BackendError, IndexUnusableError):
            raise
        except OSError as exc:
            raise IndexUnusableError(f"cannot write Qdrant's local folder {self.store.where}: {exc.strerror or exc}") from None
        except Exception as exc:  # the client's transport and API errors: many classes, one meaning
            raise _failure(exc, self.store.where) from None

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
            await self._sync(report, force)
            report.took_ms = round((time.perf_counter() - started) * 1000, 3)
        self._last_sync, self._dirty = report, False
        log.info("sync done", **report.model_dump(exclude_none=True))
        return report

    async def _sync(self, report: SyncReport, force: bool) -> None:
        wanted = self._wanted_meta()
        current = await self._in_thread(self.store.current)
        cause = "forced" if force else "no index yet" if current is None else fingerprint_diff(current.meta, wanted)
        full = cause is not None
        if full:
            gen = await self._in_thread(self.store.next_generation)
            report.full_reindex, report.reindex_cause = True, cause
            await self._in_thread(self.store.create, gen, wanted["dims"])
            known: dict[str, tuple] = {}
        else:
            gen = current.number
            known = await self._in_thread(self.store.known_files, gen)
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
        # BM25's average length is the generation's own, measured when it is built (an incremental
        # sync keeps it, as the weights already written use it).
        average = None if full else current.meta.get("averageLength")
        points, file_points, average = await self._points(changed, report, average)
        touched = [(f, known[f.rel_path][0], m, s) for f, m, s in sorted_files.touched]
        file_points += [self._file_point(f.rel_path, f.source, h, m, s) for f, h, m, s in touched]
        stale = gone + [p[0].rel_path for p in changed]

        def write() -> None:
            with self.store.client() as client:
                if stale and not full:
                    self.store.forget_paths(gen, stale)
                for i in range(0, len(points), UPSERT_STEP):  # the chunks first, each file's record last
                    client.upsert(self.store.chunks(gen), points=points[i : i + UPSERT_STEP])
                for i in range(0, len(file_points), UPSERT_STEP):
                    client.upsert(self.store.files(gen), points=file_points[i : i + UPSERT_STEP])
                if full:
                    self.store.publish(Generation(gen, {**wanted, "averageLength": average}))
                    self.store.drop_before(gen - self.config.keep_generations + 1)

        await self._in_thread(write)
        report.files_indexed = len(changed)
        report.chunks_written = len(points)

    @staticmethod
    def _file_point(path: str, source: str, digest: str, mtime_ns: int, size: int) -> Any:
        from qdrant_client import models  # noqa: PLC0415

        return models.PointStruct(id=point_id(f"file:{path}"), vector={},
                                  payload={"path": path, "source": source, "hash": digest, "mtime_ns": mtime_ns, "size": size})

    async def _points(self, changed: list[tuple[MemoryFile, os.stat_result, MarkdownRead]], report: SyncReport,
                      average: float | None) -> tuple[list[Any], list[Any], float]:
        from qdrant_client import models  # noqa: PLC0415

        model = self.provider.model if self.provider else "fts-only"
        tokenizer = self.ms.store.fts.tokenizer
        rows: list[tuple[str, dict[str, Any], list[str]]] = []
        file_points = []
        for f, st, got in changed:
            for i, ch in enumerate(got.chunks):
                day = got.days[i] if i < len(got.days) else ChunkDay(None, None)
                tokens = chunk_tokens(ch.text, tokenizer)
                cid = _chunk_id(f.rel_path, ch.start_line, ch.end_line, ch.hash, model)
                rows.append((cid, {"id": cid, "path": f.rel_path, "source": f.source, "start_line": ch.start_line,
                                   "end_line": ch.end_line, "text": ch.text, "day": day.day, "day_source": day.source,
                                   "tokens": sorted(set(tokens)),
                                   "first_day": day_number(min(day.days, default=day.day)),
                                   "last_day": day_number(max(day.days, default=day.day))}, tokens))
            file_points.append(self._file_point(f.rel_path, f.source, got.hash, st.st_mtime_ns, st.st_size))
        if not average:
            average = sum(len(document_terms(tokens)) for _, _, tokens in rows) / len(rows) if rows else self.ms.chunking.tokens * 0.75
        vectors = None
        if self.provider is not None and rows:
            vectors = await self._embed([payload["text"] for _, payload, _ in rows])
            report.chunks_embedded = len(rows) if vectors is not None else 0
        points = []
        for n, (cid, payload, tokens) in enumerate(rows):
            vector: dict[str, Any] = {"bm25": sparse_document(document_terms(tokens), average)}
            if vectors is not None:
                vector["dense"] = np.asarray(vectors[n], dtype=np.float32).tolist()
            points.append(models.PointStruct(id=point_id(cid), vector=vector, payload=payload))
        return points, file_points, average

    async def _embed(self, texts: list[str]) -> np.ndarray | None:
        """The chunks' vectors; a provider failure keeps the text searchable (no dense vector) and
        is shown in status until a sync embeds again."""
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
        if await self._in_thread(self.store.current) is None:  # none yet, or its collections gone
            await self.sync(reason="bootstrap")
        elif not self._dirty:
            return None
        elif self.ms.sync.on_search:
            try:
                await self.sync(reason="search")
            except IndexUnusableError as exc:  # a full disk or a read-only folder: the index as it is answers
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
        found = IndexedAnswer([], "none")
        sync_error: str | None = None
        if req.q:
            sides = search_sides(req.q, req.mode, hybrid_enabled=self.ms.query.hybrid.enabled, provider=self.provider)
            embedding = QueryEmbedding(self.provider, req.q) if sides.vector and self.provider is not None else None

            async def answer() -> IndexedAnswer:
                nonlocal sync_error
                sync_error = await self._ensure_fresh()
                return await self._search(req, session_key, degraded, sides, embedding, now=now, candidates=candidates)

            found = await beside(embedding.run if embedding else None, answer)
            hits = found.hits
            if not explain:
                for hit in hits:
                    hit.explain = None
        warning = vector_mode_warning(req.q, self.provider) if req.q and req.mode == "vector" else None
        return SearchAnswer(
            query=req.query, results=hits, backend=self.backend, mode=found.mode,
            provider=self.provider.id if self.provider else "none", model=self.provider.model if self.provider else None,
            citations=self.settings.memory.citations, degraded=degraded, min_score=req.min_score, max_results=req.max_results,
            took_ms=round((time.perf_counter() - started) * 1000, 3), relaxed=found.relaxed, sync_error=sync_error,
            **req.time_facts(time_only=found.time_only),
            below_min_score=BelowMinScore(candidates=found.below_min_score[0], best_score=found.below_min_score[1])
            if found.below_min_score else None,
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
        gen = await self._in_thread(self.store.current)
        if gen is None:
            return IndexedAnswer([], "none")

        async def query_vector() -> np.ndarray | None:
            qvec = await self._query_vector(degraded, embedding)
            if qvec is not None and gen.meta.get("dims") != len(qvec):
                degraded.vector = "the index was built for another embedding model; run `memsift index` to rebuild"
                return None
            return qvec

        tokenizer = self.ms.store.fts.tokenizer
        store = QdrantCandidates(self.store, gen.number, tokenizer, dense=bool(gen.meta.get("dims")))
        return await search_indexed(store, req, query=self.ms.query, tokenizer=tokenizer, sides=sides,
                                    query_vector=query_vector, degraded=degraded, run=self._in_thread,
                                    cite=citations_enabled(self.settings.memory.citations, session_key),
                                    snippet_chars=SNIPPET_MAX_CHARS, now=now, candidates=candidates)

    # --- read, status, close --------------------------------------------------------------------

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   max_chars: int | None = None, offset: int = 0) -> ReadResult:
        return await read_memory(self.memory_rules, path, from_line, lines, max_chars=max_chars, offset=offset)

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        self._ensure_provider()

        def counts() -> tuple[Generation | None, int, int, list[int]]:
            gen = self.store.current()
            if gen is None:
                return None, 0, 0, self.store.generations()
            return (gen, self.store.count(self.store.files(gen.number)), self.store.count(self.store.chunks(gen.number)),
                    self.store.generations())

        gen, files, chunks, generations = await self._in_thread(counts)
        stale = fingerprint_diff(gen.meta, self._wanted_meta()) if gen else None
        p = self.provider
        mode = "fts-only" if p is None or stale else "hybrid"
        now_says = ("build the index first, then search" if gen is None
                    else f"{mode} over {chunks} chunks in Qdrant (BM25 sparse vectors; dense cosine)")
        return ManagerStatus(
            backend=self.backend, agent_id=self.agent, workspace_dir=str(self.settings.workspace), db_path=self.store.where,
            files=files, chunks=chunks, dirty=gen is None or stale is not None or self._dirty,
            provider=p.id if p else "none", requested_provider=self.selection.requested if self.selection else None,
            model=p.model if p else None, dimensions=getattr(p, "dimensions", None), sources=["memory"],
            extra_paths=list(self.ms.extra_paths), search_mode=mode, search_now=now_says,
            provider_unavailable_reason=self.selection.unavailable_reason if self.selection else None,
            fts={"enabled": True, "available": gen is not None, "tokenizer": self.ms.store.fts.tokenizer, "search": "qdrant-bm25-sparse"},
            vector={"enabled": p is not None, "available": p is not None, "search": "qdrant dense cosine"},
            cache={"enabled": False, "entries": 0, "maxEntries": 0},
            index={"exists": gen is not None, "meta": gen.meta if gen else None, "rebuildNeeded": stale,
                   "lastEmbedError": self._embed_error,
                   "qdrant": {"where": self.store.where, "mode": "server" if self.config.url else "local",
                              "generation": gen.number if gen else None, "generations": generations}},
            last_sync=self._last_sync.model_dump(by_alias=True) if self._last_sync else None,
            skipped=[{"path": s.path, "reason": s.reason} for s in self._skipped],
        )

    async def aclose(self) -> None:
        if self.provider is not None:
            await self.provider.aclose()
        if self._store is not None:
            self._store.close()
