"""memsift-example: a backend plugin in under 150 lines, written against memsift's backend kit.

It keeps the memory files' chunks in memory (brought up to date before each search) and answers
keyword searches with a plain BM25 over the terms SQLite FTS5 would index. Which files are
memory, chunking, note dates, the request, ranking (time, minScore, rescue), snippets, citations,
reads and the scope rules are memsift's own, through the kit, so it passes the backend contract.
A real backend keeps its index on disk and adds vectors: see memsift-lancedb.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import anyio

from memsift.engine.kit import (SNIPPET_MAX_CHARS, BackendPlugin, Candidate, Degraded, ManagerStatus,
                                KeywordSearch, MemoryRules, PipelineParams, ResolvedConfig, SearchAnswer, SearchRequest,
                                SyncReport,
                                chunk_tokens, citations_enabled, discover_memory_files, hits_from_ranked, plan_query,
                                query_items, rank, read_markdown, read_memory, sort_files)

K1, B = 1.2, 0.75  # BM25's usual constants


class ExampleSearchManager(KeywordSearch):  # `search(query, …)` from `answer(request)`
    backend = "example"

    def __init__(self, settings: ResolvedConfig) -> None:
        self.settings, self.ms = settings, settings.memory_search
        self.rules = MemoryRules.from_settings(settings)
        self.tokenizer = self.ms.store.fts.tokenizer
        # path → (hash, mtime_ns, size, its chunks with their term counts); replaced whole on sync,
        # so a search during a sync reads the old index or the new one, never half of one.
        self.index: dict[str, tuple[str, int, int, list[tuple[Candidate, Counter]]]] = {}

    async def sync(self, *, force: bool = False, reason: str = "manual", **_: Any) -> SyncReport:
        report = SyncReport(reason=reason, backend=self.backend, full_reindex=force)
        self.index = await anyio.to_thread.run_sync(self._build, force, report)
        return report

    def _build(self, force: bool, report: SyncReport) -> dict:
        files, skipped = discover_memory_files(self.settings.workspace, self.ms.extra_paths)
        files = [f for f in files if f.modality is None]  # Markdown only
        c = self.ms.chunking

        def read(f, st):
            got = read_markdown(f, st, skipped, strategy=c.strategy, tokens=c.tokens, overlap=c.overlap)
            return (f, st, got) if got is not None else None

        old = {} if force else self.index
        sort = sort_files(files, old, skipped, read, lambda p: p[2].hash)
        paths = {f.rel_path for f in files}
        index = {p: entry for p, entry in old.items() if p in paths}
        for f, mtime, size in sort.touched:
            index[f.rel_path] = (index[f.rel_path][0], mtime, size, index[f.rel_path][3])
        for f, st, got in sort.changed:
            chunks = [(Candidate(chunk_id=f"{f.rel_path}:{ch.start_line}:{ch.hash}", path=f.rel_path, source=f.source,
                                 start_line=ch.start_line, end_line=ch.end_line, text=ch.text, day=d.day,
                                 day_source=d.source), Counter(chunk_tokens(ch.text, self.tokenizer)))
                      for ch, d in zip(got.chunks, got.days)]
            index[f.rel_path] = (got.hash, st.st_mtime_ns, st.st_size, chunks)
        report.files_seen, report.files_indexed = len(files), len(sort.changed)
        report.files_unchanged, report.files_skipped = sort.unchanged, len(skipped)
        report.files_removed = len(set(old) - paths)
        return index

    def _keyword(self, terms: list[str], limit: int) -> tuple[list[Candidate], dict[str, float]]:
        chunks = [pair for entry in self.index.values() for pair in entry[3]]
        if not chunks or not terms:
            return [], {}
        avg = sum(sum(tf.values()) for _, tf in chunks) / len(chunks)
        df = {t: sum(1 for _, tf in chunks if t in tf) for t in terms}
        scored = []
        for cand, tf in chunks:
            length = sum(tf.values())
            s = sum(math.log(1 + (len(chunks) - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] * (K1 + 1)
                    / (tf[t] + K1 * (1 - B + B * length / avg)) for t in terms if tf[t])
            if s > 0:
                scored.append((s, cand))
        scored.sort(key=lambda x: -x[0])
        best = scored[0][0] if scored else 1.0  # scores in 0..1, relative to the best hit (as builtin's)
        out = [replace(c, text_score=s / (1 + best), keyword_hit=True) for s, c in scored[:limit]]
        return out, {c.chunk_id: float(i + 1) for i, c in enumerate(out)}

    @property
    def query_config(self) -> Any:
        return self.ms.query

    async def answer(self, req: SearchRequest) -> SearchAnswer:
        started = time.perf_counter()
        # Each search first reads what changed since the last (a stat of every file): a manager kept
        # open by a gateway sees every note written before the search. Builtin asks inotify instead.
        await self.sync(reason="search")
        degraded = (
            Degraded(vector="this backend searches keywords only") if req.mode in ("vector", "hybrid") else Degraded()
        )
        plan = plan_query(req.topic, self.tokenizer, expansion=self.ms.query.expansion)
        h = self.ms.query.hybrid
        keyword, ranks = self._keyword(query_items(plan, self.tokenizer).terms,
                                       req.candidates or max(1, int(req.limit * h.candidate_multiplier)))
        params = PipelineParams.from_query(self.ms.query, max_results=req.limit, min_score=req.floor, now=req.now,
                                           windows=req.windows, time_filter=req.time_filter)
        ranked, facts = rank(lambda _path: None, keyword=keyword, vector=None, terms=plan.terms, params=params)
        hits = hits_from_ranked(ranked, facts, terms=plan.terms, ranks=ranks, hybrid=h, explain=req.explain,
                                cite=citations_enabled(self.settings.memory.citations, req.session_key),
                                snippet_chars=SNIPPET_MAX_CHARS)
        return SearchAnswer(query=req.query, results=hits, backend=self.backend, mode=facts["mode"] if hits else "none",
                            provider="none", citations=self.settings.memory.citations, degraded=degraded,
                            min_score=req.floor, max_results=req.limit, relaxed=facts["relaxed"],
                            took_ms=round((time.perf_counter() - started) * 1000, 3), **req.time_facts(time_only=False))

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   max_chars: int | None = None, offset: int = 0, **_: Any) -> Any:
        return await read_memory(self.rules, path, from_line, lines, max_chars=max_chars, offset=offset)

    async def status(self, *, deep: bool = False, **_: Any) -> ManagerStatus:
        return ManagerStatus(backend=self.backend, agent_id=self.settings.agent_id, provider="none",
                             workspace_dir=str(self.settings.workspace), files=len(self.index), search_mode="fts-only",
                             chunks=sum(len(e[3]) for e in self.index.values()))

    async def aclose(self) -> None:
        self.index = {}


backend = BackendPlugin(name="example", open=lambda ctx: ExampleSearchManager(ctx.settings),
                        description="in-memory keyword search (memsift's example plugin)")
