"""`EvidenceRankedSearchManager`: the evidence ranker (rerank/evidence.py) as a stage above every backend,
composed by the factory under the scope rules and the optional rerank stage.

The backend is asked for `query.ranker.candidates` hits (its merge, time, minScore and keyword
rescue decide which are eligible); their order is rescored from what they show, and the top
`maxResults` are kept. Only hybrid answers are reordered (builtin and Postgres `hybrid`, QMD
`query`): the weights were learned on hybrid scores, and a keyword-only or vector-only score has
another scale. A time-only answer (a day's notes, in order) is left as it is.

The ranker was learned on conversation, and applies where its candidates are mostly conversation:
daily logs (`memory/YYYY-MM-DD*.md`), session transcripts, and hits whose lines are mostly a
speaker's turns (`Caroline: …`, `[D3:8] user: …`) wherever the file lives. On a pool of documents
(extra paths, a knowledge base) the backend's order stands: there, on SciFact, it would cost 0.022 of
nDCG@10.
"""

from __future__ import annotations

import re
import time
from typing import Any

from ..config.models import MmrConfig, RankerConfig
from .wrapped import WrappedManager
from ..manager import SearchManager
from ..search.request import SearchRequest, renote_window
from ..results import ManagerStatus, RankerExplain, RankerSummary, SearchAnswer, SearchHit
from ..rerank.evidence import TURN, EvidenceModel, evidence_features, load_model, ranker_terms
from .rerank_stage import diversify
from ..search.time_rank import inside_before_margin
from ..search.expansion import variants_by_term
from ..search.fts_query import question_words
from ..files.note_dates import file_name_day

__all__ = ["EvidenceRankedSearchManager", "HYBRID_MODES", "rank_by_evidence", "pool_features", "is_conversation",
           "mostly_conversation"]

HYBRID_MODES = frozenset({"hybrid", "query"})
CANDIDATES_PER_HIT = 2
_HEADING = re.compile(r"\s*#{1,6}(?:\s|$)")


def _mostly_turns(snippet: str) -> bool:
    lines = [ln for ln in snippet.split("\n") if ln.strip() and not _HEADING.match(ln)]
    return len(lines) >= 2 and 2 * sum(bool(TURN.match(ln)) for ln in lines) >= len(lines)


def is_conversation(hit: SearchHit) -> bool:
    """A hit from a daily log (a note whose name carries its day, as the time stages read it) or a
    session transcript, or whose lines are mostly a speaker's turns (what the ranker was learned on)."""
    return hit.source == "sessions" or file_name_day(hit.path) is not None or _mostly_turns(hit.snippet)


def mostly_conversation(hits: list[SearchHit]) -> bool:
    return 2 * sum(is_conversation(h) for h in hits) >= len(hits)


def pool_features(query: str, hits: list[SearchHit], *, expansion: str = "synonyms") -> list[dict[str, float]]:
    """Each hit's evidence features, as the stage computes them (and the trainer, from the same call)."""
    terms = ranker_terms(query)
    variants = variants_by_term(question_words(query), terms, expansion=expansion)
    return evidence_features(terms, [(h.path, h.score, h.snippet) for h in hits], query, variants)


def rank_by_evidence(query: str, hits: list[SearchHit], model: EvidenceModel, *, explain: bool,
                     mmr: MmrConfig | None = None, expansion: str = "synonyms") -> list[SearchHit]:
    """`hits` (the backend's order) rescored and sorted; ties keep the backend's order. `expansion`:
    the configured `query.expansion`, whose forms of a word stand in for it where no hit has it."""
    feats = pool_features(query, hits, expansion=expansion)
    scale = model.pool_scale(feats)
    # No time constraint here: the backend's score holds the time factor already, and the ranker
    # lifting a note past the question's window finds answers told far from it (a multiplier by
    # the time factor cost 0.004-0.010 of turn recall@10 on both dev sets; docs/performance.md).
    scores = [model.score(h.score, f, scale) for h, f in zip(hits, feats)]
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
    if mmr is not None and mmr.enabled:
        order = diversify(hits, scores, order, mmr.lambda_)
    out = []
    for i in order:
        h = hits[i]
        if explain:
            h.ranker = RankerExplain(base_score=h.score, base_rank=i + 1,
                                     features={k: round(v, 4) for k, v in feats[i].items()}, final=round(scores[i], 6))
        h.score = round(scores[i], 6)
        out.append(h)
    return out


class EvidenceRankedSearchManager(WrappedManager):
    """A `SearchManager` whose hybrid answers are reordered by the evidence ranker."""


    def __init__(self, inner: SearchManager, config: RankerConfig, *, mmr: MmrConfig | None = None,
                 default_max_results: int = 6, model: EvidenceModel | None = None,
                 expansion: str = "synonyms") -> None:
        super().__init__(inner)
        self.expansion = expansion
        self.config = config
        self.mmr = mmr or MmrConfig()
        self.default_max_results = default_max_results
        self._model = model

    @property
    def model(self) -> EvidenceModel:
        if self._model is None:
            self._model = load_model()
        return self._model

    async def answer(self, request: SearchRequest) -> SearchAnswer:
        wanted = max(1, int(request.max_results if request.max_results is not None else self.default_max_results))
        pool = max(wanted, self.config.candidates)
        # The pool comes from `CANDIDATES_PER_HIT` × pool candidates a side, not the multiplier's
        # 4×: at 10k files that kept the search's p95 within 1.13× of a search without the stage
        # (4× cost 1.32×), for 0.006 of chats' recall@10 and none of lme's.
        candidates = request.candidates if request.candidates is not None else CANDIDATES_PER_HIT * pool
        answer = await self._inner.answer(request.but(max_results=pool, candidates=candidates))
        hits = answer.results
        if (answer.denied is None and answer.unavailable is None and len(hits) > 1
                and answer.mode in HYBRID_MODES and not answer.time_only and mostly_conversation(hits)):
            started = time.perf_counter()
            answer.results = rank_by_evidence(answer.query, hits, self.model, explain=request.explain, mmr=self.mmr,
                                              expansion=self.expansion)
            if answer.time_windows:  # the ranker knows no time: the backend's judgement of the window stands
                answer.results = inside_before_margin(answer.results)
            took = (time.perf_counter() - started) * 1000
            answer.took_ms = round(answer.took_ms + took, 3)
            answer.ranker = RankerSummary(version=self.model.version, candidates=len(hits), took_ms=round(took, 3))
        answer.results = answer.results[:wanted]
        answer.max_results = min(answer.max_results, wanted)
        renote_window(answer)  # a time-only answer cut here says so
        return answer

    async def status(self, *, deep: bool = False, **kw: Any) -> ManagerStatus:
        st = await self._inner.status(deep=deep, **kw)
        st.ranker = {
            "version": self.model.version,
            "candidates": self.config.candidates,
            "weights": dict(self.model.weights),
        }
        return st
