"""Ranked candidates → the hits an answer shows (snippet, lines, citation, explain), for every indexed backend."""

from __future__ import annotations

from typing import Any

from .citations import citation_for
from ..config.models import HybridConfig
from .ranking import Candidate
from ..results import HitExplain, SearchHit
from .snippets import make_snippet

__all__ = ["hits_from_ranked"]


def hits_from_ranked(
    ranked: list[Candidate],
    facts: dict[str, Any],
    *,
    terms: list[str],
    ranks: dict[str, float],
    hybrid: HybridConfig,
    cite: bool,
    snippet_chars: int,
    explain: bool,
) -> list[SearchHit]:
    """`facts` and `ranked` come from `engine.pipeline.rank`; `ranks` holds raw BM25 ranks by chunk id."""
    h = hybrid
    hits = []
    for c in ranked:
        text, first_line = c.text, c.start_line
        if c.focus is not None and c.source != "sessions":  # the lines of the time asked for (time_rank.focus_on)
            lines = c.text.split("\n")
            text, first_line = "\n".join(lines[c.focus[0]: c.focus[1] + 1]), c.start_line + c.focus[0]
        snip = make_snippet(text, first_line, terms, snippet_chars)
        # Transcript chunk lines are JSONL line numbers, not contiguous: keep the chunk's range.
        start, end = (c.start_line, c.end_line) if c.source == "sessions" else (snip.start_line, snip.end_line)
        hit = SearchHit(
            path=c.path,
            start_line=start,
            end_line=end,
            score=round(c.score, 6),
            snippet=snip.text,
            source="sessions" if c.source == "sessions" else "memory",
            citation=citation_for(c.path, start, end) if cite else None,
            below_min_score=True if c.chunk_id in facts.get("below", ()) else None,
            window_closeness=c.window_closeness,
            topic_words=c.topic_words,
        )
        if explain:
            hit.explain = HitExplain(
                keyword_score=c.text_score if c.keyword_hit else None,
                bm25_rank=ranks.get(c.chunk_id),
                vector_score=c.vector_score if c.vector_hit else None,
                vector_weight=h.vector_weight
                if facts["mode"] == "hybrid"
                else (1.0 if facts["mode"] == "vector-only" else 0.0),
                text_weight=h.text_weight
                if facts["mode"] == "hybrid"
                else (1.0 if facts["mode"] == "fts-only" else 0.0),
                lexical_boost=facts["boosts"].get(c.chunk_id),
                decay=c.decay,
                day=c.day,
                day_source=c.day_source,
                time_factor=c.time_factor,
                mmr_penalty=c.mmr_penalty,
                brevity=c.brevity,
                final_score=hit.score,  # the same rounded value the hit shows
                rescued=c.chunk_id in facts["rescued"],
            )
        hits.append(hit)
    return hits
