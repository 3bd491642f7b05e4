"""Result models: the contract shared by the CLI's --json, the Python API and the agent tools.

Field names are snake_case in Python and camelCase in JSON (`startLine`), as the reference's
`memory_search` payload has them.
"""

from __future__ import annotations

from typing import Any, Literal

from .records import Record, spec

__all__ = [
    "BelowMinScore",
    "HitExplain",
    "RerankExplain",
    "RerankSummary",
    "RankerExplain",
    "RankerSummary",
    "SearchHit",
    "Fallback",
    "Degraded",
    "ScopeDenial",
    "SearchAnswer",
    "ReadResult",
    "ManagerStatus",
]


class _Out(Record):
    """An answer's part: camelCase in JSON (`Record.to_json_dict`)."""


class HitExplain(_Out):
    """How one hit's score came about (builtin backend)."""

    keyword_score: float | None = None  # mapped BM25 score, None when not a keyword hit
    bm25_rank: float | None = None
    vector_score: float | None = None  # cosine similarity, None when not a vector hit
    vector_weight: float
    text_weight: float
    lexical_boost: float | None = None  # FTS-only mode's overlap/path/length boost
    decay: float = 1.0
    day: str | None = None  # the day the chunk speaks of (ISO), used by time windows, filters and decay
    day_source: str | None = None  # timestamp, heading, file name, or modified (the file's mtime)
    time_factor: float = 1.0  # share of the score kept for the time the question names
    mmr_penalty: float = 0.0
    brevity: float = 1.0  # share of the vector score a near-empty chunk keeps
    final_score: float
    rescued: bool = False  # kept by the keyword-only rescue under minScore


class RerankExplain(_Out):
    """How the rerank stage scored one hit (any backend): final = (1 - weight) * hybrid + weight * rerank."""

    hybrid_score: float  # the backend's score, before the stage
    rerank_score: float  # the reranker's relevance in 0..1 (a logit goes through a sigmoid)
    raw_score: float  # what the reranker returned
    weight: float
    blended: float
    hybrid_rank: int  # 1-based position in the backend's order


class RankerExplain(_Out):
    """How the evidence ranker scored one hit (any backend): (score + Σ weight × feature) / scale."""

    base_score: float  # the backend's score, before the ranker
    base_rank: int  # 1-based position in the backend's order
    features: dict[str, float]
    final: float


class RankerSummary(_Out):
    """The evidence ranker reordered this answer's top hits (query.ranker.enabled)."""

    version: str
    candidates: int
    took_ms: float


class SearchHit(_Out):
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: Literal["memory", "sessions"] = "memory"
    citation: str | None = None
    stale: bool | None = None
    rescued: bool | None = (
        None  # under minScore (the backend's score, before the evidence ranker), kept by the keyword rescue
    )
    below_min_score: bool | None = None  # nothing reached the default minScore: one of the closest few, shown below it
    explain: HitExplain | None = None
    # What only its backend knows of the hit, in the backend's own terms (QMD with --explain: its
    # mode, raw score, docid, collection); one neutral field for every backend.
    details: dict[str, Any] | None = None
    rerank: RerankExplain | None = None  # --explain with the rerank stage on: its score, the hybrid score, the blend
    ranker: RankerExplain | None = None  # --explain: the evidence ranker's features and score
    # For the stages above the backend, never shown: how close the hit's day is to the question's
    # time (1 inside, less in its margins, None undated or no time named) and how many of its topic
    # words it holds, so the evidence ranker keeps an in-window note before a margin's (time_rank.py).
    window_closeness: float | None = spec(default=None, exclude=True)
    topic_words: int | None = spec(default=None, exclude=True)


class Fallback(_Out):
    from_: str = spec(json="from")
    reason: str
    # What failed: the backend (another one answered) or the embedding provider (the fallback
    # provider embedded); None from a memsift that did not say.
    kind: Literal["backend", "provider"] | None = None
    not_covered: list[str] | None = None  # what the failed backend indexes that the answering one does not


class Degraded(_Out):
    """Which retrieval paths were unavailable for this answer, and why."""

    vector: str | None = None
    fts: str | None = None
    rerank: str | None = None  # the rerank stage was skipped (error, budget, open circuit): the backend's order is kept


class RerankSummary(_Out):
    """The rerank stage on this answer: which reranker rescored how many candidates, and its cost."""

    provider: str
    model: str
    candidates: int  # hits the backend handed to the stage
    weight: float
    took_ms: float
    applied: bool  # False: skipped, see degraded.rerank


class ScopeDenial(_Out):
    """Why a chat may not search memory: the rule that decided, and what the key was read as."""

    rule: str
    channel: str | None = None
    chat_type: str
    session_key: str | None = None


class BelowMinScore(_Out):
    """Candidates found but all scored under minScore: how many, and the best score among them."""

    candidates: int
    best_score: float


class SearchAnswer(_Out):
    """Results plus how they were served: an empty list is never left to be guessed at.

    `mode` is `hybrid`, `fts-only`, `vector-only` or `none` on the builtin backend, and the
    effective QMD mode (`search`, `vsearch`, `query`) on the QMD backend."""

    query: str
    results: list[SearchHit]
    backend: str
    mode: str
    provider: str | None = None
    model: str | None = None
    citations: Literal["auto", "on", "off"] = "auto"
    degraded: Degraded = spec(factory=Degraded)
    fallback: Fallback | None = None
    min_score: float
    max_results: int
    took_ms: float
    relaxed: bool = False  # FTS-only: nothing passed minScore, so the threshold was relaxed
    sync_pending: bool | None = None  # files changed and are still being indexed (hits may be stale)
    pending_files: int | None = None  # with sync_pending: changed files not indexed yet when answered
    sync_error: str | None = None  # the index could not be updated (disk full, read-only): answered as it is
    denied: ScopeDenial | None = None  # scope rules refused this session key
    unavailable: str | None = None  # the backend failed and no fallback is allowed
    notes: list[str] | None = None
    time_windows: list[str] | None = (
        None  # the times the question names, as day windows ("2023-04-11 ('last Tuesday')")
    )
    time_filter: str | None = None  # the since/until filter applied
    time_only: bool | None = None  # the question names only a time: the hits are that time's notes, in order
    time_window_days: int | None = None
    time_note: str | None = (
        None  # time-only: the window holds no notes, or more days than are shown (and how to see them)
    )
    rerank: RerankSummary | None = None  # the rerank stage ran (query.rerank.enabled)
    ranker: RankerSummary | None = None  # the evidence ranker reordered the hits (query.ranker.enabled)
    below_min_score: BelowMinScore | None = None  # no hit passed minScore, though these scored lower


class ReadResult(_Out):
    path: str
    text: str
    from_line: int = spec(default=1, json="from")
    lines: int | None = None
    total_lines: int = 0
    missing: bool = False
    denied: ScopeDenial | None = None  # scope rules refused this session key: nothing was read
    truncated: bool | None = None  # the text was cut at the read's character bound
    next_from: int | None = None  # ... and the rest starts at this line
    next_offset: int | None = None  # ... this many characters (UTF-16 units) into it


class ManagerStatus(_Out):
    """status(): what the backend is, what it holds, and which parts are degraded."""

    backend: str
    agent_id: str
    workspace_dir: str
    db_path: str | None = None
    files: int | None = 0  # None: not known now (the database is unreachable), never a made-up 0
    chunks: int | None = 0
    dirty: bool = False
    provider: str | None = None
    requested_provider: str | None = None
    model: str | None = None
    dimensions: int | None = None
    model_runtime: str | None = None  # the local model: which graph, on what CPU ("int8 graph · AVX2, no VNNI")
    sources: list[str] = spec(factory=list)
    extra_paths: list[str] = spec(factory=list)
    source_counts: dict[str, dict[str, int]] = spec(factory=dict)
    search_mode: str = "hybrid"  # what a search answers in right now (fts-only while a rebuild is needed)
    time_zone: str | None = None  # whose days "yesterday" and since/until read (config/zones.py zone_shown)
    transcripts: str | None = None  # the folder session transcripts are read from, when they are a source
    search_now: str | None = None  # what a search would do right now, and why, in one sentence
    provider_unavailable_reason: str | None = None
    fallback: Fallback | None = None
    fts: dict[str, Any] = spec(factory=dict)
    vector: dict[str, Any] = spec(factory=dict)
    cache: dict[str, Any] = spec(factory=dict)
    index: dict[str, Any] = spec(factory=dict)
    last_sync: dict[str, Any] | None = None
    skipped: list[dict[str, str]] = spec(factory=list)
    requests: dict[str, Any] | None = None  # remote provider: requests, retries, failures, last error
    batch: dict[str, Any] = spec(factory=dict)  # provider batch API state
    # What only this backend reports, in its own terms (QMD: version, collections, last update and
    # embed, errors); one neutral field for every backend.
    details: dict[str, Any] | None = None
    deep: dict[str, Any] | None = None
    denied: ScopeDenial | None = None  # scope rules refused this session key: nothing is shown
    rerank: dict[str, Any] | None = None  # the rerank stage: provider, model, candidates, circuit, requests
    ranker: dict[str, Any] | None = None  # the evidence ranker: version, candidates, weights
    helper: dict[str, Any] | None = None  # CLI: the resident helper serving these settings (pid, age, memory)
    plugins: list[dict[str, Any]] | None = (
        None  # CLI: backends, providers and rerankers from other packages (engine/plugins)
    )
    # The backend cannot be reached and no fallback answers (Postgres down, QMD failing with
    # fallback "none"): what was tried, when, and what failed. The CLI's status then exits 7.
    unavailable: str | None = None
