"""The ranking pipeline every backend shares: weighted merge, temporal decay, MMR, minScore and
the keyword rescue, over candidates a backend found (as OpenClaw does, docs/parity.md, with an OR-of-terms query).

  keyword ∪ vector → weighted merge → time (since/until, question's windows, decay) → sort → MMR → minScore → top-K

with the keyword-only rescue (a pure keyword hit scores at most textWeight, so the threshold for
those is min(minScore, textWeight)), and an FTS-only mode with the reference's lexical boost.
A backend supplies its candidates and a `file_time(path)` lookup (the indexed mtime of an undated
file, for decay); nothing here touches a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .fts_query import box_words
from .ranking import Candidate, brevity_factor, drop_repeated_lines, merge_hybrid, mmr_rerank
from ..text import match_form, word_tokens
from .time_only import NEARBY_DAYS, nearest_notes, window_days, window_first
from .time_query import TimeWindow
from .time_rank import (
    FileTime,
    TimeParams,
    apply_decay,
    apply_time_filter,
    apply_time_windows,
    candidates_inside_first,
)

if TYPE_CHECKING:
    from ..config.models import QueryConfig

__all__ = [
    "PipelineParams",
    "TimeParams",
    "rank",
    "time_only_answer",
    "lexical_boost",
    "covers_all_terms",
    "FileTime",
    "RESCUE_TEXT_SCORE",
]

RESCUE_TEXT_SCORE = 0.5  # mapped BM25 of 0.5 = a bm25 rank of -1: real keyword evidence
# A note of the time a question names is rescued under minScore on this much similarity alone (the
# local model: a related sentence; unrelated notes of the same days score about 0.1).
RESCUE_IN_WINDOW_VECTOR = 0.25
# When nothing reaches the default minScore, the closest few that share the question's topic (a
# keyword match, or a vector this near) are shown below it, marked, instead of an empty answer
# ("how much was the plumbing repair?" against "The plumber came … Invoice €185": 0.55).
BELOW_SHOWN = 3
BELOW_VECTOR_BAR = 0.4

@dataclass
class PipelineParams:
    max_results: int
    min_score: float
    vector_weight: float
    text_weight: float
    mmr_enabled: bool
    mmr_lambda: float
    time: TimeParams = field(default_factory=TimeParams)
    show_below: bool = False  # minScore is the default, not the caller's: an empty cut shows the closest, marked
    boxes: tuple[str, ...] = ()  # the checklist boxes a question about tasks asks for (FtsPlan.boxes)

    @classmethod
    def from_query(
        cls,
        query: QueryConfig,
        *,
        max_results: int,
        min_score: float,
        now: float | None = None,
        windows: list[TimeWindow] | None = None,
        time_filter: TimeWindow | None = None,
        time_only: bool = False,
        show_below: bool = False,
        boxes: tuple[str, ...] = (),
    ) -> PipelineParams:
        """The settings of one search, as every backend builds them."""
        h, decay = query.hybrid, query.hybrid.temporal_decay
        return cls(
            max_results=max_results,
            min_score=min_score,
            vector_weight=h.vector_weight,
            text_weight=h.text_weight,
            mmr_enabled=h.mmr.enabled,
            mmr_lambda=h.mmr.lambda_,
            show_below=show_below,
            boxes=boxes,
            time=TimeParams(
                windows=list(windows or []) if query.time.enabled else [],
                time_only=time_only and query.time.enabled,
                window_weight=query.time.weight,
                filter=time_filter,
                decay_enabled=decay.enabled,
                decay_formula=decay.formula,
                decay_weight=decay.weight,
                half_life_days=decay.half_life_days,
                now=now,
                zone=query.time.timezone,
            ),
        )


def _apply_time(file_time: FileTime, items: list[Candidate], p: PipelineParams, terms: list[str]) -> list[Candidate]:
    """The since/until filter, the question's windows, then decay (engine/search/time_rank.py)."""
    items = apply_time_filter(items, p.time.filter, file_time)
    apply_time_windows(items, p.time.windows, p.time.window_weight)
    apply_decay(items, p.time, file_time, terms)
    return items


def time_only_answer(file_time: FileTime, items: list[Candidate], windows: list[TimeWindow],
                     time_filter: TimeWindow | None, limit: int) -> tuple[list[Candidate], dict[str, Any]]:
    """A question that names only a time: its windows' notes, a day at a time, never cut by
    minScore (each scores 1.0: it is what was asked); the since/until filter still applies. A
    window without notes is answered by the notes of the days around it (at most NEARBY_DAYS
    away, the closest first, scored by closeness), and says so. QMD, whose notes are read from
    files, calls this directly.

    Returns the notes and what the answer says of the window: `window_days` (the days inside it
    that hold notes; 0 when the nearest days' notes are shown) and how many notes are `shown`."""
    items = apply_time_filter(items, time_filter, file_time)
    inside = window_first(items, windows)
    if inside:
        ordered = inside[:limit]
        for c in ordered:
            c.score, c.time_factor = 1.0, 1.0
        return ordered, {"window_days": len(window_days(items, windows)), "shown": len(ordered)}
    ordered = []
    for c, dist in nearest_notes(items, windows)[:limit]:
        c.time_factor = 1.0 - dist / (NEARBY_DAYS + 1)
        c.score = round(c.time_factor, 6)
        ordered.append(c)
    return ordered, {"window_days": 0, "shown": len(ordered)}


def _time_only(file_time: FileTime, window: list[Candidate], keyword: list[Candidate] | None,
               vector: list[Candidate] | None, p: PipelineParams) -> tuple[list[Candidate], dict[str, Any]]:
    """The windows' notes, with any of them the keyword or vector side also found."""
    pool = {c.chunk_id: c for c in window}
    for c in (keyword or []) + (vector or []):
        pool.setdefault(c.chunk_id, c)
    return time_only_answer(file_time, list(pool.values()), p.time.windows, p.time.filter, p.max_results)


def covers_all_terms(text: str, terms: list[str]) -> bool:
    """Every query term occurs in the text (case-insensitive substring; CJK has no word breaks)."""
    if not terms:
        return False
    lower = match_form(text)
    return all(match_form(t) in lower for t in terms)


def holds_boxes(text: str, boxes: tuple[str, ...]) -> bool:
    """The chunk holds a checklist box of the kind a question about tasks asks for: the evidence
    an exact identifier is (a rescued keyword hit)."""
    return bool(boxes) and not set(boxes).isdisjoint(box_words(text))


def lexical_boost(query_terms: list[str], c: Candidate) -> float:
    """FTS-only mode's boost (as OpenClaw does; docs/parity.md): term overlap, density, path and length."""
    q = {match_form(t) for t in query_terms}
    if not q:
        return 0.0
    text_tokens = set(word_tokens(match_form(c.text)))
    overlap = len(q & text_tokens)
    unique_overlap = overlap / len(q)
    density = overlap / len(text_tokens) if text_tokens else 0.0
    path = match_form(c.path)
    path_boost = 0.18 * sum(1 for t in q if t in path)
    length_boost = min(len(c.text) / 160, 0.18)
    return 0.45 * unique_overlap + 0.2 * density + path_boost + length_boost


def rank(
    file_time: FileTime,
    *,
    keyword: list[Candidate] | None,
    vector: list[Candidate] | None,
    terms: list[str],
    params: PipelineParams,
    window: list[Candidate] | None = None,
) -> tuple[list[Candidate], dict[str, Any]]:
    """Merge and rank candidates. `None` for a side means that side is unavailable. `window`: the
    notes of the question's time windows, for a question that names only a time.

    Returns the hits and facts for the answer: mode, whether the threshold was relaxed, which hits
    were rescued, each FTS-only boost, and whether the answer is a time's notes (`time_only`).
    """
    facts: dict[str, Any] = {"relaxed": False, "rescued": set(), "boosts": {}}
    if params.time.time_only and window is not None:
        # Answered by the window's notes, or, when it has none, by the days around it (or nothing):
        # never by notes months away that share a word or a number with the question.
        ordered, window_facts = _time_only(file_time, window, keyword, vector, params)
        facts["mode"] = "fts-only" if vector is None else "vector-only" if keyword is None else "hybrid"
        facts["time_only"] = window_facts
        return ordered, facts
    if vector is None:  # FTS-only mode
        facts["mode"] = "fts-only"
        items = keyword or []
        for c in items:
            boost = lexical_boost(terms, c)
            facts["boosts"][c.chunk_id] = boost
            c.score = min(1.0, c.text_score + boost)
        items = _apply_time(file_time, items, params, terms)
        # Hits at the 1.0 clamp keep the order of their unclamped evidence.
        items.sort(key=lambda c: (-c.score, -(c.text_score + facts["boosts"][c.chunk_id]) * c.decay * c.time_factor))
        items = _inside_before_margin(drop_repeated_lines(items), params, terms)
        passing = [c for c in items if c.score >= params.min_score]
        if not passing and items:
            passing, facts["relaxed"] = items, True
        return passing[: params.max_results], facts

    if keyword is None:  # vector-only mode
        facts["mode"] = "vector-only"
        for c in vector:
            c.brevity = brevity_factor(c.text)
            c.score = c.vector_score * c.brevity
        vector = _apply_time(file_time, vector, params, terms)
        vector.sort(key=lambda c: -c.score)
        vector = drop_repeated_lines(vector)
        if params.mmr_enabled:
            vector = mmr_rerank(vector, params.mmr_lambda, limit=params.max_results, min_score=params.min_score)
        vector = _inside_before_margin(vector, params, terms)
        passing = [c for c in vector if c.score >= params.min_score][: params.max_results]
        _note_below(facts, passing, vector)
        return passing or _closest_below(facts, vector, params), facts

    facts["mode"] = "hybrid"
    merged = merge_hybrid(keyword, vector, vector_weight=params.vector_weight, text_weight=params.text_weight)
    merged = _apply_time(file_time, merged, params, terms)
    merged.sort(key=lambda c: (-c.score, c.path, c.start_line))
    merged = drop_repeated_lines(merged)
    if params.mmr_enabled:
        merged = mmr_rerank(merged, params.mmr_lambda, limit=params.max_results, min_score=params.min_score)
    merged = _inside_before_margin(merged, params, terms)
    strict = [c for c in merged if c.score >= params.min_score]
    if len(strict) < params.max_results and keyword:
        # Keyword rescue. A pure BM25 hit scores at most textWeight (0.3), under the default
        # minScore 0.35, so an exact identifier would vanish. Free slots (never displacing a strict
        # hit) go to keyword hits with real evidence: the reference's bar min(minScore, textWeight),
        # every query term present in the chunk, or a strong BM25 score on its own.
        floor = min(params.min_score, params.text_weight)
        text_bar = max(params.min_score, RESCUE_TEXT_SCORE)
        taken = {c.chunk_id for c in strict}
        rescued = [
            c
            for c in merged
            if c.keyword_hit
            and c.chunk_id not in taken
            and (c.score >= floor or c.text_score >= text_bar or covers_all_terms(c.text, terms)
                 or holds_boxes(c.text, params.boxes))
        ]
        if any(c.window_closeness == 1.0 for c in merged):
            rescued = _rescued_in_time(merged, rescued, taken)
        rescued = rescued[: params.max_results - len(strict)]
        facts["rescued"] = {c.chunk_id for c in rescued}
        strict += rescued
    _note_below(facts, strict, merged)
    return strict[: params.max_results] or _closest_below(facts, merged, params), facts


def _inside_before_margin(items: list[Candidate], params: PipelineParams, terms: list[str]) -> list[Candidate]:
    """The question's time before its margins, on the same topic (time_rank.inside_before_margin)."""
    return candidates_inside_first(items, terms) if params.time.windows else items


def _rescued_in_time(merged: list[Candidate], rescued: list[Candidate], taken: set[str]) -> list[Candidate]:
    """The rescue when the question names a time and a note of it was found: the window's notes
    that match a topic word, or are near it in meaning, come first (minScore had cut them: their
    words are few, their day is right; "Met Björn" for "who did I meet yesterday?" where no
    keyword side reads "met" as "meet"), then those of the days around it the keyword bar let
    through. Nothing else is rescued: not a note months away that shares a word ("the meeting"
    in March), nor an undated one (MEMORY.md's list of people for "who did I meet yesterday?");
    either is still shown when it scores minScore on its own."""
    inside = [c for c in merged if c.window_closeness == 1.0 and c.chunk_id not in taken
              and (c.keyword_hit or c.vector_score >= RESCUE_IN_WINDOW_VECTOR)]
    seen = {c.chunk_id for c in inside}
    return inside + [c for c in rescued if c.chunk_id not in seen and (c.window_closeness or 0.0) > 0.0]


def _closest_below(facts: dict[str, Any], scored: list[Candidate], params: PipelineParams) -> list[Candidate]:
    """Nothing reached the default minScore: the best few that share the question's topic, each
    marked (`facts["below"]`); none when the caller set minScore, or nothing is near."""
    if not params.show_below:
        return []
    near = [c for c in scored if c.keyword_hit or c.vector_score >= BELOW_VECTOR_BAR]
    if params.time.windows:  # as the rescue in time: a note of the time asked (or its margins), never months away
        near = [c for c in near if (c.window_closeness or 0.0) > 0.0]
    near = near[: min(BELOW_SHOWN, params.max_results)]
    facts["below"] = {c.chunk_id for c in near}
    return near


def _note_below(facts: dict[str, Any], kept: list[Candidate], scored: list[Candidate]) -> None:
    """When minScore removed every hit, how many scored lower and the best of them (the answer
    says so instead of a bare "No results")."""
    if not kept and scored:
        facts["below_min_score"] = (len(scored), max(c.score for c in scored))
