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
import math
import os
import re
import time
from pathlib import Path
from typing import Any, Sequence

import anyio
import numpy as np

from memsift.engine.kit import (COMMON_SHARE, CHUNKER_REVISION, EXPANSION_WEIGHT, INDEX_TEXT_REVISION, MAX_COMMON_WORDS,
                                NOTE_DATES_REVISION, SNIPPET_MAX_CHARS, BackendError, BelowMinScore, Candidate, ChunkDay,
                                Degraded, IndexUnusableError, ManagerStatus, MarkdownRead, MemoryFile, MemoryRules,
                                PipelineParams, ProviderError, ProviderSelection, QueryEmbedding, QueryItems, ReadResult,
                                ResolvedConfig, SearchAnswer, SearchHit, SearchRequest, Skipped, SyncReport, TimeBound,
                                TimeWindow, beside, bm25_relative_scores, candidate_windows, chunk_tokens, citations_enabled,
                                discover_memory_files, expansion_items, fingerprint_diff, get_logger, hits_from_ranked,
                                is_weightless, names_only_a_time, nearby_windows, plan_query, query_items, rank, read_markdown,
                                read_memory, search_sides, select_provider, sort_files, topic_words, vector_mode_warning,
                                word_terms)

from .sql import quote

__all__ = ["LanceSearchManager"]

log = get_logger("memsift.lancedb")

SCHEMA = 1
EMBED_STEP = 64
MAX_CANDIDATES = 200
# What LanceDB raises for a damaged dataset: a missing or truncated file, a corrupt page ("lance
# error: …", a panic in a reader task). Disk errors (OSError) are not damage: the data is intact.
DAMAGE = (RuntimeError, ValueError)
_COLUMNS = ["id", "path", "source", "start_line", "end_line", "text", "day", "day_source"]


def _chunk_id(path: str, start: int, end: int, chunk_hash: str, model: str) -> str:
    return hashlib.sha256(f"memory:{path}:{start}:{end}:{chunk_hash}:{model}".encode()).hexdigest()


def _candidate(row: dict[str, Any], **scores: Any) -> Candidate:
    return Candidate(chunk_id=row["id"], path=row["path"], source=row["source"], start_line=row["start_line"],
                     end_line=row["end_line"], text=row["text"], day=row["day"], day_source=row["day_source"], **scores)


def _in_window(w: TimeWindow) -> str:
    """Chunks whose days reach into the window (the days they speak of run from first_day to
    last_day); the pipeline then keeps exactly the chunks with a line of those days."""
    lo, hi = w.day_range()
    return f"(first_day <= {quote(hi)} AND last_day >= {quote(lo)})"


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

    def _sides(self, q: str, requested: str) -> tuple[bool, bool, str | None]:
        """(vector side, keyword side, why vectors stepped aside), as every backend decides them."""
        sides = search_sides(q, requested, hybrid_enabled=self.ms.query.hybrid.enabled, provider=self.provider)
        return sides.vector, sides.keyword, sides.set_aside

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
            want_vector, want_keyword, set_aside = self._sides(req.q, req.mode)
            embedding = QueryEmbedding(self.provider, req.q) if want_vector and self.provider is not None else None

            async def answer() -> Any:
                nonlocal sync_error
                sync_error = await self._ensure_fresh()
                try:
                    return await self._search(req, session_key, degraded, (want_vector, want_keyword, set_aside),
                                              embedding, now=now, candidates=candidates)
                except DAMAGE as exc:  # rebuilt from the files once, then asked again
                    log.error("LanceDB dataset damaged; rebuilding from the Markdown files", error=_short(exc))
                    await self.sync(force=True, reason=f"the dataset was damaged ({_short(exc)})")
                try:
                    return await self._search(req, session_key, degraded, (want_vector, want_keyword, set_aside),
                                              embedding, now=now, candidates=candidates)
                except DAMAGE as exc:
                    raise BackendError(_damaged(self.store.root, exc, again=True)) from None

            hits, answered, relaxed, below, time_only = await beside(embedding.run if embedding else None, answer)
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

    async def _search(self, req: SearchRequest, session_key: str | None, degraded: Degraded, sides: tuple,
                      embedding: QueryEmbedding | None, *, now: float | None, candidates: int | None) -> tuple:
        want_vector, want_keyword, set_aside = sides
        gen = self.store.current()
        if gen is None:
            return [], "none", False, None, False
        h = self.ms.query.hybrid
        tokenizer = self.ms.store.fts.tokenizer
        plan = plan_query(req.topic, tokenizer, expansion=self.ms.query.expansion)  # the time named is not a topic
        items = query_items(plan, tokenizer)
        limit = min(MAX_CANDIDATES, candidates or max(1, int(req.max_results * h.candidate_multiplier)))
        qvec = await self._query_vector(degraded, embedding) if want_vector else None
        if set_aside:
            degraded.vector = set_aside
        if qvec is not None and gen.meta.get("dims") != len(qvec):
            degraded.vector = "the index was built for another embedding model; run `memsift index` to rebuild"
            qvec = None
        chunks = self.store.chunks(gen.number)
        if not chunks.count_rows():  # no memory files yet: nothing to search (and no text index to ask)
            return [], "none", False, None, False
        windows = req.windows
        within = await anyio.to_thread.run_sync(self._filter_clause, gen.number, req.time_filter) if req.time_filter else None
        prefer = " OR ".join(_in_window(w) for w in candidate_windows(windows)) if windows and within is None else None

        def retrieve() -> tuple:
            vector = self._vector(chunks, qvec, limit, within) if qvec is not None else None
            if vector is not None and prefer:
                seen = {c.chunk_id for c in vector}
                vector += [c for c in self._vector(chunks, qvec, limit, prefer) if c.chunk_id not in seen]
            keyword, ranks = None, {}
            if want_keyword or (vector is None and req.mode != "vector"):
                keyword, ranks = self._keyword(chunks, items, limit, within, prefer, [c.chunk_id for c in vector or ()],
                                               expansions=expansion_items(plan, tokenizer))
                if vector is not None:
                    self._complete_vector_scores(chunks, keyword, vector, qvec)
            return vector, keyword, ranks

        vector, keyword, ranks = await anyio.to_thread.run_sync(retrieve)
        if keyword is None and vector is None:
            return [], "none", False, None, False
        time_only = req.time_only
        words = topic_words(req.q, windows) if windows and not time_only else None
        if words and len(words) <= MAX_COMMON_WORDS:  # words beside the time may select no notes
            weightless = self._weightless(chunks, gen.number, words, tokenizer)
            time_only = names_only_a_time(req.q, windows, weightless.__contains__)
        window = self._window_rows(chunks, nearby_windows(windows), req.max_results) if time_only and windows else None
        paths = {c.path for c in (keyword or []) + (vector or []) + (window or [])}
        times = self._file_times(gen.number, paths) if h.temporal_decay.enabled or req.time_filter else {}
        params = PipelineParams.from_query(self.ms.query, max_results=req.max_results, min_score=req.min_score, now=now,
                                           windows=windows, time_filter=req.time_filter, time_only=time_only)
        ranked, facts = rank(times.get, keyword=keyword, vector=vector, terms=plan.terms, params=params, window=window)
        cite = citations_enabled(self.settings.memory.citations, session_key)
        found = hits_from_ranked(ranked, facts, terms=plan.terms, ranks=ranks, hybrid=h, cite=cite,
                                 snippet_chars=SNIPPET_MAX_CHARS, explain=True)
        for hit in found:
            hit.rescued = True if hit.explain and hit.explain.rescued else None
        return found, facts["mode"], facts["relaxed"], facts.get("below_min_score"), facts.get("time_only")

    # --- retrieval (blocking: run in a worker thread) -------------------------------------------

    @staticmethod
    def _fts_query(items: QueryItems) -> Any:
        """The plan's terms OR'ed, its phrases as phrases (a CJK pair: a phrase of its two characters)."""
        from lancedb.query import BooleanQuery, MatchQuery, Occur, PhraseQuery  # noqa: PLC0415

        parts: list[Any] = []
        singles = [t for t in items.terms if not (len(t) == 2 and all(ord(ch) > 0x2E7F for ch in t))]
        pairs = [tuple(t) for t in items.terms if t not in singles]
        if singles:
            parts.append(MatchQuery(" ".join(singles), "tokens"))
        parts += [PhraseQuery(" ".join(p), "tokens") for p in [*items.phrases, *pairs]]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else BooleanQuery([(Occur.SHOULD, p) for p in parts])

    def _keyword(self, chunks: Any, items: QueryItems, limit: int, within: str | None, prefer: str | None,
                 also: Sequence[str], *, expansions: QueryItems | None = None) -> tuple[list[Candidate], dict[str, float]]:
        """BM25-ranked chunks (LanceDB's full-text index); `also` (the vector side's ids) get their
        score too when they match, and `prefer` (the days a question names) adds its best. The
        question's `expansions` ("met" for "meet") are matched on their own and weigh less, as on
        builtin and Postgres (engine/search/expansion.py)."""
        fts = self._fts_query(items)
        if fts is None:
            return [], {}
        cols = [*_COLUMNS, *(["vector"] if "vector" in chunks.schema.names else [])]

        def run(where: str | None, n: int, query: Any = fts) -> list[dict]:
            q = chunks.search(query, query_type="fts").select(cols).limit(n)
            if where:
                q = q.where(where, prefilter=True)
            return q.to_list()

        rows = run(within, limit)
        if prefer:
            taken = {r["id"] for r in rows}
            rows += [r for r in run(prefer if within is None else f"({within}) AND ({prefer})", limit) if r["id"] not in taken]
        extra = [i for i in also if i not in {r["id"] for r in rows}]
        if rows and extra:
            ids = f"id IN ({', '.join(quote(i) for i in extra)})"
            rows += run(ids if within is None else f"({within}) AND {ids}", len(extra))
        ranks_list = [-float(r["_score"]) for r in rows]  # FTS5's rank: -bm25
        scores = bm25_relative_scores(ranks_list)
        out, ranks = [], {}
        for r, score, rnk in zip(rows, scores, ranks_list):
            c = _candidate(r, text_score=score, keyword_hit=True)
            c.embedding = r.get("vector")
            out.append(c)
            ranks[c.chunk_id] = rnk
        more = self._fts_query(expansions) if expansions is not None and (expansions.terms or expansions.phrases) else None
        if more is not None:
            found = {c.chunk_id: c for c in out}
            xrows = run(within, limit, more)
            for r, score in zip(xrows, bm25_relative_scores([-float(r["_score"]) for r in xrows])):
                c = found.get(r["id"])
                if c is None:
                    c = found[r["id"]] = _candidate(r, text_score=0.0, keyword_hit=True)
                    c.embedding = r.get("vector")
                    out.append(c)
                c.text_score = min(1.0, c.text_score + EXPANSION_WEIGHT * score)
        return out, ranks

    @staticmethod
    def _vector(chunks: Any, qvec: np.ndarray, limit: int, where: str | None) -> list[Candidate]:
        q = np.asarray(qvec, dtype=np.float32)
        if not np.any(q):
            return []
        search = chunks.search(q, vector_column_name="vector").distance_type("cosine").select(_COLUMNS).limit(limit)
        if where:
            search = search.where(where, prefilter=True)
        return [_candidate(r, vector_score=1.0 - float(r["_distance"]), vector_hit=True) for r in search.to_list()
                if math.isfinite(r["_distance"])]

    @staticmethod
    def _complete_vector_scores(chunks: Any, keyword: list[Candidate], vector: list[Candidate], qvec: np.ndarray) -> None:
        """Keyword hits the vector side did not return get their real cosine instead of 0 (as builtin)."""
        seen = {c.chunk_id for c in vector}
        q = np.asarray(qvec, dtype=np.float32)
        qn = float(np.linalg.norm(q)) or 1.0
        for c in keyword:
            v = c.embedding
            c.embedding = None
            if c.chunk_id in seen or v is None:
                continue
            v = np.asarray(v, dtype=np.float32)
            vn = float(np.linalg.norm(v))
            if vn:
                c.vector_score, c.vector_hit = float(v @ q) / (vn * qn), True

    def _filter_clause(self, gen: int, window: TimeWindow) -> str:
        """since/until: chunks of those days, and undated ones whose file was modified then."""
        lo_ns, hi_ns = window.mtime_ns_range()
        files = self.store.files(gen).to_arrow().select(["path", "mtime_ns"]).to_pylist()
        paths = [r["path"] for r in files if lo_ns <= r["mtime_ns"] <= hi_ns]
        undated = f" OR (day IS NULL AND path IN ({', '.join(quote(p) for p in paths)}))" if paths else ""
        return f"({_in_window(window)}{undated})"

    def _weightless(self, chunks: Any, gen: int, words: list[str], tokenizer: str) -> set[str]:
        """The words that select no notes (engine/search/time_only.is_weightless), counted by file."""
        notes = self.store.files(gen).count_rows()
        enough = max(1, math.ceil(notes * COMMON_SHARE))
        out = set()
        for w in words:
            terms = word_terms(w, tokenizer)
            if not terms:
                continue
            from lancedb.query import FullTextOperator, MatchQuery  # noqa: PLC0415

            q = MatchQuery(" ".join(terms), "tokens", operator=FullTextOperator.AND)
            rows = chunks.search(q, query_type="fts").select(["path"]).limit(enough * 20).to_list()
            if is_weightless(len({r["path"] for r in rows}), notes):
                out.add(w)
        return out

    @staticmethod
    def _window_rows(chunks: Any, windows: Sequence[TimeWindow], per_day: int, cap: int = 5000) -> list[Candidate]:
        """A time-only question's notes: the first `per_day` chunks of each day of its windows."""
        out: list[Candidate] = []
        seen: set[str] = set()
        for w in windows:
            rows = chunks.search().where(_in_window(w)).select([*_COLUMNS]).limit(cap).to_list()
            rows.sort(key=lambda r: (r["day"] or "", r["path"], r["start_line"]))
            per: dict[str | None, int] = {}
            for r in rows:
                per[r["day"]] = per.get(r["day"], 0) + 1
                if per[r["day"]] <= per_day and r["id"] not in seen:
                    seen.add(r["id"])
                    out.append(_candidate(r))
        return out

    def _file_times(self, gen: int, paths: set[str]) -> dict[str, float]:
        if not paths:
            return {}
        where = f"path IN ({', '.join(quote(p) for p in paths)})"
        rows = self.store.files(gen).search().where(where).select(["path", "mtime_ns"]).limit(len(paths)).to_list()
        return {r["path"]: r["mtime_ns"] / 1e9 for r in rows}

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
