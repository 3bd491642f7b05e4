"""One search over an index memsift fills (the store seam): the choreography every indexed backend
shares, written once.

A backend that keeps memsift's chunks in its own engine (LanceDB, Qdrant) implements
`CandidateStore`: the few questions only its engine can answer (keyword candidates, vector
candidates, the cosine of a keyword hit, which rows hold some days, a time's notes, file times,
whether a word selects no notes). `search_indexed` asks them in memsift's order and does the
rest as every backend does: the query plan without the times the question names, the candidate
count, since/until as a filter and a named time as a preference, each side scoring the other's
finds, the time-only decision, the ranking pipeline (merge, time, decay, MMR, minScore, rescue)
and the hits with their snippets, citations and explain.

`Selection` is the store's own handle on "the rows of these days" (a list of row ids, a filter
expression): memsift only passes it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping, Protocol, Sequence

from ..config.models import QueryConfig
from ..config.sizes import SNIPPET_MAX_CHARS
from ..results import Degraded, SearchHit
from .hits import hits_from_ranked
from .modes import Sides
from .pipeline import PipelineParams, rank
from .fts_query import FtsPlan, plan_query
from .ranking import Candidate
from .request import SearchRequest
from .time_only import MAX_COMMON_WORDS, names_only_a_time, nearby_windows, topic_words
from .time_query import TimeWindow
from .time_rank import candidate_windows

__all__ = ["CandidateStore", "IndexedAnswer", "IndexedSearch", "Selection", "search_indexed", "gather_indexed",
           "rank_gathered", "Gathered", "inline", "awaited", "complete_from_embeddings", "MAX_CANDIDATES",
           "ROW_FIELDS", "candidate_from_row", "first_per_day"]

MAX_CANDIDATES = 200  # per side: more costs time and never reaches the top results

Selection = Any


class CandidateStore(Protocol):
    """What an indexed backend answers for one search. `search_indexed` makes each call through its
    `run`: a blocking store's in a worker thread (or on the loop, `inline`), an async store's
    (the same methods as coroutines, Postgres) awaited (`awaited`)."""

    def select_days(self, windows: Sequence[TimeWindow], *, undated_by_mtime: bool) -> Selection:
        """The rows whose days reach into `windows` (and, `undated_by_mtime`, undated rows of files
        modified then): since/until filters by it, a named time prefers it."""

    def keyword(self, plan: FtsPlan, limit: int, *, within: Selection | None, prefer: Selection | None,
                also: Sequence[str]) -> tuple[list[Candidate], dict[str, float]]:
        """BM25-ranked chunks with `text_score` in 0..1 and the raw ranks by chunk id; the vector
        side's `also` ids scored too when they match; `prefer` adds its best."""

    def vector(self, qvec: Any, limit: int, *, within: Selection | None) -> list[Candidate]:
        """The nearest chunks with `vector_score` (cosine)."""

    def complete_vector_scores(self, keyword: list[Candidate], vector: list[Candidate], qvec: Any) -> None:
        """Keyword hits the vector side did not return get their real cosine instead of 0."""

    def weightless(self, word: str) -> bool:
        """Whether a word selects no notes (engine/search/time_only.is_weightless)."""

    def window_rows(self, windows: Sequence[TimeWindow], per_day: int) -> list[Candidate]:
        """A time-only question's notes: the first `per_day` chunks of each day of `windows`."""

    def file_times(self, paths: set[str]) -> dict[str, float]:
        """The files' modification times as indexed (seconds), for decay and undated rows."""


@dataclass
class IndexedAnswer:
    hits: list[SearchHit]
    mode: str  # hybrid, fts-only, vector-only or none
    relaxed: bool = False
    below_min_score: tuple[int, float] | None = None
    time_only: bool | dict[str, Any] | None = None  # the pipeline's window facts for SearchRequest.time_facts
    sync_pending: bool = False  # the sync before the search ran past its budget and goes on
    sync_error: str | None = None  # why the index could not be updated (it answered as it is)


NOTHING = IndexedAnswer([], "none")


@dataclass
class IndexedSearch:
    """How one search runs over a store, besides the store and the request: the query config, the
    index's FTS5 tokenizer, the sides to search, `query_vector()` (the question's vector or None,
    saying why in `degraded`), `run(fn)` (one store call: a blocking one in a worker thread, the
    kit's `IndexedManager.run_blocking`; on the loop, `inline`; an async store's, `awaited`),
    `side_errors` (what one side may raise and leave the other answering, said in `degraded`:
    "vector search failed: …"; anything else propagates), and the hits' citations and snippet size."""

    query: QueryConfig
    tokenizer: str
    sides: Sides
    query_vector: Callable[[], Awaitable[Any]]
    degraded: Degraded
    run: Callable[[Callable[[], Any]], Awaitable[Any]]
    cite: bool = True
    snippet_chars: int = SNIPPET_MAX_CHARS
    side_errors: tuple[type[BaseException], ...] = ()


async def search_indexed(store: CandidateStore | Any, req: SearchRequest, how: IndexedSearch) -> IndexedAnswer:
    """One search of `store`: `gather_indexed`, then `rank_gathered`. Hits carry explain; the caller
    drops it when not asked for."""
    gathered = await gather_indexed(store, req, how)
    return NOTHING if gathered is None else rank_gathered(gathered, how)


@dataclass
class Gathered:
    """What one search asked its store, every store call made: ranking needs the store no more (a
    backend holding a pooled connection for the calls gives it back before `rank_gathered`)."""

    req: SearchRequest
    query: QueryConfig
    plan: FtsPlan
    params: PipelineParams
    keyword: list[Candidate] | None
    vector: list[Candidate] | None
    ranks: dict[str, float]
    window: list[Candidate] | None
    times: Mapping[str, float]


async def gather_indexed(store: CandidateStore | Any, req: SearchRequest, how: IndexedSearch) -> Gathered | None:
    """The store's answers for one search (None when neither side found anything)."""
    query, sides, run, degraded, side_errors = how.query, how.sides, how.run, how.degraded, how.side_errors
    h = query.hybrid
    # The times the question names are not its topic: "week" or "20" must not find notes months away.
    plan = plan_query(req.topic, how.tokenizer, expansion=query.expansion)
    limit = min(MAX_CANDIDATES, req.candidates or max(1, int(req.limit * h.candidate_multiplier)))
    windows = req.windows
    qvec = await how.query_vector() if sides.vector else None
    if sides.set_aside:
        degraded.vector = sides.set_aside

    # A since/until filter searches only its rows; a time the question names adds its rows' best.
    time_filter = req.time_filter
    within = await run(lambda: store.select_days([time_filter], undated_by_mtime=True)) if time_filter else None
    prefer = await run(lambda: store.select_days(candidate_windows(windows), undated_by_mtime=False)) \
        if windows and within is None else None
    vector: list[Candidate] | None = None
    if qvec is not None:
        try:
            vector = await run(lambda: store.vector(qvec, limit, within=within))
            if prefer is not None:
                seen = {c.chunk_id for c in vector or ()}
                vector += [
                    c for c in await run(lambda: store.vector(qvec, limit, within=prefer)) if c.chunk_id not in seen
                ]
        except side_errors as exc:
            degraded.vector = f"vector search failed: {exc}"
    keyword: list[Candidate] | None = None
    ranks: dict[str, float] = {}
    if sides.keyword or (vector is None and sides.requested != "vector"):
        try:
            # Each side scores the other side's finds too: no real evidence counts as 0.
            also = [c.chunk_id for c in vector or ()]
            keyword, ranks = await run(lambda: store.keyword(plan, limit, within=within, prefer=prefer, also=also))
            if vector is not None:
                await run(lambda: store.complete_vector_scores(keyword, vector, qvec))
        except side_errors as exc:
            degraded.fts = f"keyword search failed: {exc}"
    if keyword is None and vector is None:
        return None
    if req.corpus not in (None, "all"):  # the corpus asked for, before anything is ranked or cut
        for side in (keyword, vector):
            if side is not None:
                side[:] = [c for c in side if req.keeps(c.source)]

    time_only = req.time_only
    if windows and not time_only:  # words beside the time may select no notes (a chat's people, in every one)
        words = topic_words(req.q, windows)
        weightless: set[str] = set()
        if words and len(words) <= MAX_COMMON_WORDS:
            for word in words:  # as names_only_a_time asks: until one selects notes
                if not await run(lambda: store.weightless(word)):  # noqa: B023  (awaited here, in its turn)
                    break
                weightless.add(word)
        time_only = names_only_a_time(req.q, windows, weightless.__contains__)
    params = PipelineParams.from_query(query, max_results=req.limit, min_score=req.floor, now=req.now,
                                       windows=windows, time_filter=req.time_filter, time_only=time_only,
                                       show_below=req.min_score is None, boxes=tuple(plan.boxes))
    # A question that names only a time: its windows' notes are the answer (engine/search/time_only.py).
    window = await run(lambda: store.window_rows(nearby_windows(windows), req.limit)) \
        if params.time.time_only and windows else None
    if window is not None and req.corpus not in (None, "all"):
        window = [c for c in window if req.keeps(c.source)]
    paths = {c.path for c in (keyword or []) + (vector or []) + (window or [])}
    times = await run(lambda: store.file_times(paths)) \
        if paths and (query.hybrid.temporal_decay.enabled or req.time_filter) else {}
    return Gathered(req, query, plan, params, keyword, vector, ranks, window, times)


def rank_gathered(g: Gathered, how: IndexedSearch) -> IndexedAnswer:
    """The ranking pipeline over what was gathered, and the hits (with explain)."""
    ranked, facts = rank(g.times.get, keyword=g.keyword, vector=g.vector, terms=g.plan.terms, params=g.params,
                         window=g.window)
    # a question about tasks: the snippet shows the lines with the boxes it asks for (snippets.make_snippet)
    hits = hits_from_ranked(ranked, facts, terms=g.plan.terms + g.plan.boxes, ranks=g.ranks,
                            hybrid=g.query.hybrid, cite=how.cite, snippet_chars=how.snippet_chars, explain=True)
    for hit in hits:
        hit.rescued = True if hit.explain and hit.explain.rescued else None
    return IndexedAnswer(hits, facts["mode"], facts["relaxed"], facts.get("below_min_score"), facts.get("time_only"))


async def inline(fn: Callable[[], Any]) -> Any:
    """`search_indexed`'s `run` for a store whose calls are quick and bound to the event loop's
    thread (builtin: its read connection is not shared with worker threads)."""
    return fn()


async def awaited(fn: Callable[[], Any]) -> Any:
    """`search_indexed`'s `run` for an async store (Postgres): each call returns an awaitable."""
    return await fn()


def complete_from_embeddings(keyword: list[Candidate], vector: list[Candidate], qvec: Any) -> None:
    """`CandidateStore.complete_vector_scores` for a store whose keyword candidates carry their
    vector (`Candidate.embedding`, dropped here): the real cosine instead of 0."""
    import numpy as np  # noqa: PLC0415  (a keyword search never needs it)

    seen = {c.chunk_id for c in vector}
    q = np.asarray(qvec, dtype=np.float32)
    qn = float(np.linalg.norm(q)) or 1.0
    for c in keyword:
        v, c.embedding = c.embedding, None
        if c.chunk_id in seen or v is None:
            continue
        v = np.asarray(v, dtype=np.float32)
        vn = float(np.linalg.norm(v))
        if vn:
            c.vector_score, c.vector_hit = float(v @ q) / (vn * qn), True


ROW_FIELDS = ["id", "path", "source", "start_line", "end_line", "text", "day", "day_source"]  # what a candidate needs


def candidate_from_row(row: Mapping[str, Any], **scores: Any) -> Candidate:
    """A stored chunk (a row or payload with `ROW_FIELDS`) as a ranking candidate."""
    return Candidate(chunk_id=row["id"], path=row["path"], source=row["source"], start_line=row["start_line"],
                     end_line=row["end_line"], text=row["text"], day=row.get("day"), day_source=row.get("day_source"),
                     **scores)


def first_per_day(rows: Iterable[Mapping[str, Any]], per_day: int, seen: set[str]) -> list[Mapping[str, Any]]:
    """`CandidateStore.window_rows` for one window: its rows in the order of their days (then file
    and line), at most `per_day` of each day, none already in `seen` (which records them)."""
    kept: list[Mapping[str, Any]] = []
    per: dict[str | None, int] = {}
    for row in sorted(rows, key=lambda r: (r.get("day") or "", r["path"], r["start_line"])):
        per[row.get("day")] = per.get(row.get("day"), 0) + 1
        if per[row.get("day")] <= per_day and row["id"] not in seen:
            seen.add(row["id"])
            kept.append(row)
    return kept
