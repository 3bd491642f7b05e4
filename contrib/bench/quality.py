"""Retrieval quality on BEIR SciFact and LongMemEval (oracle), per search mode, memsift and QMD.

Modes, all through the public `SearchManager.search` (what a user gets), with `minScore` 0 so the
whole ranking is scored:
- `bm25`: no embedding provider (keyword-only mode);
- `vector`: the local model, `query.hybrid.enabled: false`;
- `hybrid`: the local model with the defaults (weighted merge);
- `hybrid+mmr`: plus `mmr.enabled`;
- `hybrid+decay`: plus `temporalDecay.enabled` (LongMemEval only: its notes are dated daily logs
  and every question has its own "now");
- `qmd`: the real QMD CLI (`qmd search`, BM25) on the same files, through memsift's QMD backend
  with its fallback off, so a QMD failure is an error here, never a silent builtin answer.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from bench_data import LongMemEval, SciFact
from metrics import mean, mrr_at, ndcg_at, percentile, recall_any_at, recall_at

__all__ = ["MODES", "open_mode", "eval_scifact", "eval_longmemeval", "warm_index"]

SCIFACT_HITS = 30  # chunks fetched per query, enough for 10 distinct abstracts
LME_HITS = 10

# Settings per mode, under agents.defaults.memorySearch (None: the mode runs on QMD).
MODES: dict[str, dict[str, Any] | None] = {
    "bm25": {"provider": "none"},
    "vector": {"query": {"hybrid": {"enabled": False}}},
    "hybrid": {},
    "hybrid+mmr": {"query": {"hybrid": {"mmr": {"enabled": True}}}},
    "hybrid+decay": {"query": {"hybrid": {"temporalDecay": {"enabled": True}}}},
    "qmd": None,
}
# Other backends (memsift's or a plugin's) through `open_manager`, as a user opens them: the name
# before ":" is the backend, after it the builtin mode whose settings it uses ("lancedb:hybrid").
BACKEND_KINDS = ("bm25", "hybrid")


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def settings_for(
    workspace: Path,
    state: Path,
    memory_search: dict[str, Any],
    memory: dict[str, Any] | None = None,
    *,
    frozen: bool = True,
):
    """Resolved settings for a benchmark index. `frozen`: the files do not change during the run,
    so searches skip the freshness check (the quality runs); otherwise the defaults apply."""
    from memsift.engine.config import MemsiftConfig, resolve_agent  # noqa: PLC0415

    ms = _deep_merge(
        {"sync": {"onSearch": False, "onSessionStart": False, "watch": False}} if frozen else {}, memory_search
    )
    raw = {"stateDir": str(state), "agents": {"defaults": {"memorySearch": ms}}, "memory": memory or {}}
    return resolve_agent(MemsiftConfig.model_validate(raw), workspace=workspace, environ={})


_PROVIDERS: dict[str, Any] = {}


def local_provider(model_path: str | None = None, int8_graph: str | None = None, notes_model_path: str | None = None):
    """One local model for every manager of the run (it loads once); `model_path` as
    `local.modelPath` (another ONNX encoder: a trained candidate, contrib/embedder/). With
    `int8_graph` (its quantised graph, contrib/embedder/quantise.py) the candidate runs as the
    bundled model does: each window alone, since an int8 graph's activation scales are per run.
    `notes_model_path` as `local.notesModelPath`: notes embedded by that model, questions by this one."""
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

    key = (model_path or "local") + (f"|notes:{notes_model_path}" if notes_model_path else "")
    if key not in _PROVIDERS:
        _PROVIDERS[key] = LocalMiniLMProvider(model_path=model_path, notes_model_path=notes_model_path)
        if int8_graph:
            _PROVIDERS[key]._graph_file = Path(int8_graph)  # `quantised` then holds, as for the bundled graph
    return _PROVIDERS[key]


def run_candidate_as_bundled(extra: dict[str, Any] | None, int8_graph: str) -> None:
    """`--int8-graph`: the model named by `extra`'s local.modelPath runs that int8 graph, as the
    bundled model runs its own (see local_provider), in every manager of the run."""
    model_path = (extra or {}).get("local", {}).get("modelPath")
    if not model_path:
        raise SystemExit("--int8-graph needs the model it was quantised from in --extra's local.modelPath")
    local_provider(model_path, int8_graph)


def open_mode(mode: str, workspace: Path, state: Path, extra: dict[str, Any] | None = None):
    """A manager for `mode`. Modes with a provider share one index; keyword-only has its own."""
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415
    from memsift.engine.embeddings import ProviderSelection  # noqa: PLC0415

    if ":" in mode:
        from memsift.engine.compose.factory import open_manager  # noqa: PLC0415

        backend, kind = mode.split(":", 1)
        ms = _deep_merge(MODES[kind] or {}, extra or {})
        ms = {"provider": "local", **ms}
        return open_manager(settings_for(workspace, state / f"{backend}-{ms['provider']}", ms, {"backend": backend}))
    overrides = MODES[mode]
    if overrides is None:
        from memsift.engine.compose.factory import open_manager  # noqa: PLC0415

        qmd = {
            "backend": "qmd",
            "qmd": {
                "fallback": "none",
                "searchMode": "search",
                "limits": {"maxResults": SCIFACT_HITS, "maxInjectedChars": 10**9, "timeoutMs": 120_000},
                "update": {"debounceMs": 10**12, "updateTimeoutMs": 3_600_000, "commandTimeoutMs": 600_000},
            },
        }
        return open_manager(settings_for(workspace, state / "qmd", {}, qmd), backend="qmd")
    ms = {k: v for k, v in overrides.items() if k != "provider"}
    ms = _deep_merge(ms, extra or {})
    # The stages above the backend, as the factory composes them: the evidence ranker (on by
    # default, off with `{"query": {"ranker": {"enabled": false}}}`) and the rerank stage (when `extra` turns it on).
    from memsift.engine.compose.factory import ranked, reranked  # noqa: PLC0415

    if overrides.get("provider") == "none":
        settings = settings_for(workspace, state / "fts", ms)
        manager = BuiltinSearchManager(
            settings, selection=ProviderSelection(None, "none", unavailable_reason="benchmark: keyword only")
        )
        return reranked(ranked(manager, settings, "builtin"), settings, "builtin")
    settings = settings_for(workspace, state / "local", {"provider": "local", **ms})
    local = settings.memory_search.local
    provider = local_provider(local.model_path, notes_model_path=local.notes_model_path)
    return reranked(ranked(BuiltinSearchManager(settings, provider=provider), settings, "builtin"), settings, "builtin")


async def warm_index(
    mode: str,
    workspace: Path,
    state: Path,
    progress: Callable[[str], None] = print,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build (or bring up to date) the index a mode searches; report how long it took."""
    manager = open_mode(mode, workspace, state, extra)
    try:
        t0 = time.perf_counter()
        report = await manager.sync(reason="bench")
        took = time.perf_counter() - t0
        progress(f"  index for {mode}: {report.files_indexed} files, {report.chunks_embedded} embedded, {took:.1f} s")
        return {"seconds": took, "files": report.files_indexed, "embedded": report.chunks_embedded}
    finally:
        await manager.aclose()


def _doc_id(path: str) -> str:
    return Path(path).stem


async def _run_queries(
    manager, queries: list[tuple[str, str, float | None]], k: int
) -> tuple[dict[str, list], list[float]]:
    hits, took = {}, []
    for qid, text, now in queries:
        t0 = time.perf_counter()
        answer = await manager.search(text, max_results=k, min_score=0.0, now=now)
        took.append((time.perf_counter() - t0) * 1000)
        if answer.fallback or answer.unavailable:
            raise RuntimeError(
                f"{answer.backend} did not answer {qid!r} itself: {answer.fallback or answer.unavailable}"
            )
        hits[qid] = answer.results
    return hits, took


async def eval_scifact(
    data: SciFact, mode: str, state: Path, split: str = "test", extra: dict | None = None
) -> dict[str, Any]:
    """nDCG@10, recall@10 and MRR@10 over documents (a document ranks at its best chunk)."""
    queries, rels = data.split(split)
    manager = open_mode(mode, data.workspace, state, extra)
    try:
        await manager.search("warm up", max_results=1)
        hits, took = await _run_queries(manager, [(q, t, None) for q, t in queries.items()], SCIFACT_HITS)
    finally:
        await manager.aclose()
    per_query = {}
    for qid, found in hits.items():
        docs = list(dict.fromkeys(_doc_id(h.path) for h in found))
        per_query[qid] = {
            "ndcg@10": ndcg_at(docs, rels[qid], 10),
            "recall@10": recall_at(docs, rels[qid], 10),
            "mrr@10": mrr_at(docs, rels[qid], 10),
        }
    return _summary(per_query, took)


def _ranked_sessions(data: LongMemEval, found: list, answers: set[str]) -> list[str]:
    """Per hit: its answer session the first time one is hit, else a placeholder (no gain), so
    ranks stay hit ranks and no session counts twice."""
    out, seen = [], set()
    for i, h in enumerate(found):
        sid = data.session_of(h.path, h.start_line, h.end_line)
        if sid in answers and sid not in seen:
            seen.add(sid)
            out.append(sid)
        else:
            out.append(f"#miss{i}")
    return out


async def eval_longmemeval(data: LongMemEval, mode: str, state: Path, extra: dict | None = None) -> dict[str, Any]:
    """recall_any@5/@10, nDCG@10 and MRR@10 over hits, each question at its own date."""
    manager = open_mode(mode, data.workspace, state, extra)
    try:
        await manager.search("warm up", max_results=1)
        queries = [(q.qid, q.text, q.now) for q in data.questions]
        hits, took = await _run_queries(manager, queries, LME_HITS)
    finally:
        await manager.aclose()
    per_query, types = {}, {}
    for q in data.questions:
        answers = set(q.answer_sessions)
        ranked = _ranked_sessions(data, hits[q.qid], answers)
        rels = {sid: 1 for sid in answers}
        per_query[q.qid] = {
            "recall_any@5": recall_any_at(ranked, rels, 5),
            "recall_any@10": recall_any_at(ranked, rels, 10),
            "ndcg@10": ndcg_at(ranked, rels, 10),
            "mrr@10": mrr_at(ranked, rels, 10),
        }
        types[q.qid] = q.qtype
    out = _summary(per_query, took)
    by_type: dict[str, list[float]] = defaultdict(list)
    for qid, m in per_query.items():
        by_type[types[qid]].append(m["recall_any@10"])
    out["recall_any@10_by_type"] = {t: round(mean(v), 4) for t, v in sorted(by_type.items())}
    return out


def _summary(per_query: dict[str, dict[str, float]], took_ms: list[float]) -> dict[str, Any]:
    names = next(iter(per_query.values())).keys()
    out: dict[str, Any] = {n: round(mean(m[n] for m in per_query.values()), 4) for n in names}
    out["queries"] = len(per_query)
    out["latency_ms"] = {"p50": round(percentile(took_ms, 0.5), 2), "p95": round(percentile(took_ms, 0.95), 2)}
    return out
