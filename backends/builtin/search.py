"""Builtin retrieval: FTS5 BM25 keyword candidates, vector KNN candidates, and the full pipeline.

Pipeline (spec 3.9, with the issue's OR-of-terms keyword query):
  candidates = min(200, maxResults × candidateMultiplier)
  keyword ∪ vector → weighted merge → temporal decay → sort → MMR → minScore → top-K
with the keyword-only rescue (a pure keyword hit scores at most textWeight, so the threshold for
those is min(minScore, textWeight)), and an FTS-only mode with the reference's lexical boost.
"""

from __future__ import annotations

import heapq
import math
from itertools import islice
import time
from dataclasses import dataclass
from typing import Any, Sequence

import apsw
import numpy as np

from memsift.engine.fts_query import FtsPlan
from memsift.engine.ranking import (
    Candidate,
    bm25_relative_scores,
    brevity_factor,
    dated_file_timestamp,
    decay_multiplier,
    drop_repeated_lines,
    is_evergreen,
    merge_hybrid,
    mmr_rerank,
)
from memsift.engine.text import word_tokens

from .store import VectorState, blob_to_vec

__all__ = ["keyword_candidates", "vector_candidates", "complete_vector_scores", "PipelineParams", "rank", "candidate_count"]

SCAN_BATCH = 4096  # rows per batch in the numpy fallback scan (bounded memory)
MAX_CANDIDATES = 200
RESCUE_TEXT_SCORE = 0.5  # mapped BM25 of 0.5 = a bm25 rank of -1: real keyword evidence
COMMON_TERM_MIN_CHUNKS = 5000  # from this many chunks on, weightless common words leave the query


def candidate_count(max_results: int, multiplier: int) -> int:
    return min(MAX_CANDIDATES, max(1, math.floor(max_results * multiplier)))


def _load_chunks(conn: apsw.Connection, rowids: list[int]) -> dict[int, tuple]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    q = f"SELECT rowid, id, path, source, start_line, end_line, text FROM chunks WHERE rowid IN ({marks})"
    return {row[0]: row for row in conn.execute(q, rowids)}


def _candidate(row: tuple, **scores: Any) -> Candidate:
    _rowid, cid, path, source, start, end, text = row
    return Candidate(chunk_id=cid, path=path, source=source, start_line=start, end_line=end, text=text, **scores)


def _without_weightless_terms(conn: apsw.Connection, plan: FtsPlan) -> str:
    """The MATCH expression without single words found in half the chunks or more.

    FTS5's BM25 clamps a term's IDF to 1e-6 once it occurs in at least half the rows, so such a
    word adds nothing to any score, but ranking still visits every row it matches: in 100k chunks
    "ask" or "class" made an OR query 3-4 times slower for the same top hits. Below
    COMMON_TERM_MIN_CHUNKS the query is fast anyway and the lookups are not worth it. If every
    word is that common, the query is kept as it is."""
    words = [t for t in plan.match_terms if " " not in t]
    if len(plan.match_terms) < 2 or not words:
        return plan.match
    total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    if total < COMMON_TERM_MIN_CHUNKS:
        return plan.match
    weightless = {t for t in words if 2 * conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (t,)).fetchone()[0] >= total}
    if len(weightless) == len(words):
        return plan.match  # nothing but common words: they are all the query has
    return " OR ".join(t for t in plan.match_terms if t not in weightless)


def keyword_candidates(
    conn: apsw.Connection, plan: FtsPlan, limit: int, *, also: Sequence[str] = ()
) -> tuple[list[Candidate], dict[str, float]]:
    """BM25-ranked chunks for the plan. Returns candidates and raw bm25 ranks by chunk id.

    `also`: chunk ids found by the vector side. Those that match the query but fall outside the
    top `limit` get their BM25 score too (they follow the top ones), so the merge does not count
    real keyword evidence as 0 just because the pool was small."""
    scored: dict[int, tuple[float, float | None]] = {}  # rowid -> (text score, bm25 rank)
    extra: set[int] = set()
    if plan.match:
        # Every match with its rank, then the best `limit` here: no slower than ORDER BY rank
        # LIMIT (measured at 100k chunks), and it has the ranks of the vector side's chunks too
        # (FTS5 answers `rowid IN (…)` one full query per id: 0.3 ms each).
        found = conn.execute("SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?", (_without_weightless_terms(conn, plan),)).fetchall()
        rows = heapq.nsmallest(limit, found, key=lambda row: row[1])
        if rows and also:
            wanted = set(_rowids(conn, also)) - {r for r, _ in rows}
            more = [row for row in found if row[0] in wanted]
            extra = {r for r, _ in more}
            rows += more
        for (rowid, rank), score in zip(rows, bm25_relative_scores([r for _, r in rows])):
            scored[rowid] = (score, rank)
    top = heapq.nlargest(limit, ((r, v) for r, v in scored.items() if r not in extra), key=lambda kv: kv[1][0])
    top += [(r, scored[r]) for r in extra]
    rows = _load_chunks(conn, [r for r, _ in top])
    out, ranks = [], {}
    for rowid, (score, rank) in top:
        if rowid in rows:
            c = _candidate(rows[rowid], text_score=score, keyword_hit=True)
            out.append(c)
            if rank is not None:
                ranks[c.chunk_id] = rank
    return out, ranks


def _rowids(conn: apsw.Connection, chunk_ids: Sequence[str]) -> list[int]:
    marks = ",".join("?" * len(chunk_ids))
    return [r for (r,) in conn.execute(f"SELECT rowid FROM chunks WHERE id IN ({marks})", list(chunk_ids))]


def complete_vector_scores(conn: apsw.Connection, keyword: list[Candidate], vector: list[Candidate], query: np.ndarray) -> None:
    """Keyword hits the vector side did not return get their real cosine (from the stored
    embedding) instead of 0: with a small pool, an exact identifier (0.3 × a strong BM25) lost to
    any chunk of 0.5 cosine, and a unique token written in a note could not be found at all."""
    seen = {c.chunk_id for c in vector}
    missing = {c.chunk_id: c for c in keyword if c.chunk_id not in seen}
    if not missing:
        return
    q = np.asarray(query, dtype="<f4")
    marks = ",".join("?" * len(missing))
    rows = [(cid, blob) for cid, blob in conn.execute(
        f"SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL AND id IN ({marks})", list(missing)
    ) if len(blob) == q.nbytes]
    if not rows:
        return
    for (cid, _blob), sim in zip(rows, _cosines([b for _c, b in rows], q / (np.linalg.norm(q) or 1.0)).tolist()):
        missing[cid].vector_score = sim
        missing[cid].vector_hit = True


def vector_candidates(
    conn: apsw.Connection, vec: VectorState, query: np.ndarray, limit: int
) -> list[Candidate]:
    """Nearest chunks by cosine: vec0 KNN when sqlite-vec is loaded, else a bounded numpy scan."""
    q = np.asarray(query, dtype="<f4")
    if not np.any(q):
        return []
    has_vec_table = conn.execute("SELECT 1 FROM sqlite_master WHERE name='chunks_vec'").fetchone()
    hits: list[tuple[int, float]]
    if vec.available and has_vec_table:
        hits = [
            (rowid, 1.0 - dist)
            for rowid, dist in conn.execute(
                "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?", (q.tobytes(), limit)
            )
        ]
    else:
        hits = _numpy_scan(conn, q, limit)
    rows = _load_chunks(conn, [r for r, _ in hits])
    return [_candidate(rows[r], vector_score=s, vector_hit=True) for r, s in hits if r in rows]


def _cosines(blobs: list[bytes], unit_query: np.ndarray) -> np.ndarray:
    """Cosine of each stored embedding with a unit-length query vector (0 for a zero vector)."""
    m = np.stack([blob_to_vec(b) for b in blobs])
    norms = np.linalg.norm(m, axis=1)
    return np.divide(m @ unit_query, norms, out=np.zeros(len(blobs), dtype=np.float32), where=norms > 0)


def _numpy_scan(conn: apsw.Connection, q: np.ndarray, limit: int) -> list[tuple[int, float]]:
    qn = q / (np.linalg.norm(q) or 1.0)
    best: list[tuple[float, int]] = []  # min-heap of (score, rowid)
    cursor = conn.execute("SELECT rowid, embedding FROM chunks WHERE embedding IS NOT NULL")
    while True:
        batch = list(islice(cursor, SCAN_BATCH))
        if not batch:
            break
        usable = [(r, b) for r, b in batch if len(b) == q.nbytes]
        if not usable:
            continue
        for (rowid, _b), s in zip(usable, _cosines([b for _r, b in usable], qn).tolist()):
            if len(best) < limit:
                heapq.heappush(best, (s, rowid))
            elif s > best[0][0]:
                heapq.heapreplace(best, (s, rowid))
    return [(r, s) for s, r in sorted(best, reverse=True)]


# --- the pipeline -------------------------------------------------------------------------------


@dataclass
class PipelineParams:
    max_results: int
    min_score: float
    vector_weight: float
    text_weight: float
    mmr_enabled: bool
    mmr_lambda: float
    decay_enabled: bool
    half_life_days: float
    now: float | None = None


def _apply_decay(conn: apsw.Connection, items: list[Candidate], p: PipelineParams) -> None:
    if not p.decay_enabled:
        return
    now = p.now if p.now is not None else time.time()
    mtimes: dict[str, float | None] = {}
    for c in items:
        ts = dated_file_timestamp(c.path)
        if ts is None:
            if is_evergreen(c.path, c.source):
                continue
            if c.path not in mtimes:
                row = conn.execute("SELECT mtime_ns FROM files WHERE path=?", (c.path,)).fetchone()
                mtimes[c.path] = row[0] / 1e9 if row else None
            ts = mtimes[c.path]
            if ts is None:
                continue
        c.decay = decay_multiplier((now - ts) / 86400.0, p.half_life_days)
        c.score *= c.decay


def covers_all_terms(text: str, terms: list[str]) -> bool:
    """Every query term occurs in the text (case-insensitive substring; CJK has no word breaks)."""
    if not terms:
        return False
    lower = text.lower()
    return all(t in lower for t in terms)


def lexical_boost(query_terms: list[str], c: Candidate) -> float:
    """FTS-only mode's boost (spec 3.6): term overlap, density, path and length."""
    q = set(query_terms)
    if not q:
        return 0.0
    text_tokens = set(word_tokens(c.text))
    overlap = len(q & text_tokens)
    unique_overlap = overlap / len(q)
    density = overlap / len(text_tokens) if text_tokens else 0.0
    path = c.path.lower()
    path_boost = 0.18 * sum(1 for t in q if t in path)
    length_boost = min(len(c.text) / 160, 0.18)
    return 0.45 * unique_overlap + 0.2 * density + path_boost + length_boost


def rank(
    conn: apsw.Connection,
    *,
    keyword: list[Candidate] | None,
    vector: list[Candidate] | None,
    terms: list[str],
    params: PipelineParams,
) -> tuple[list[Candidate], dict[str, Any]]:
    """Merge and rank candidates. `None` for a side means that side is unavailable.

    Returns the hits and facts for the answer: mode, whether the threshold was relaxed, which hits
    were rescued, and each FTS-only boost.
    """
    facts: dict[str, Any] = {"relaxed": False, "rescued": set(), "boosts": {}}
    if vector is None:  # FTS-only mode
        facts["mode"] = "fts-only"
        items = keyword or []
        for c in items:
            boost = lexical_boost(terms, c)
            facts["boosts"][c.chunk_id] = boost
            c.score = min(1.0, c.text_score + boost)
        _apply_decay(conn, items, params)
        # Hits at the 1.0 clamp keep the order of their unclamped evidence.
        items.sort(key=lambda c: (-c.score, -(c.text_score + facts["boosts"][c.chunk_id]) * c.decay))
        items = drop_repeated_lines(items)
        passing = [c for c in items if c.score >= params.min_score]
        if not passing and items:
            passing, facts["relaxed"] = items, True
        return passing[: params.max_results], facts

    if keyword is None:  # vector-only mode
        facts["mode"] = "vector-only"
        for c in vector:
            c.brevity = brevity_factor(c.text)
            c.score = c.vector_score * c.brevity
        _apply_decay(conn, vector, params)
        vector.sort(key=lambda c: -c.score)
        vector = drop_repeated_lines(vector)
        if params.mmr_enabled:
            vector = mmr_rerank(vector, params.mmr_lambda, limit=params.max_results, min_score=params.min_score)
        return [c for c in vector if c.score >= params.min_score][: params.max_results], facts

    facts["mode"] = "hybrid"
    merged = merge_hybrid(keyword, vector, vector_weight=params.vector_weight, text_weight=params.text_weight)
    _apply_decay(conn, merged, params)
    merged.sort(key=lambda c: (-c.score, c.path, c.start_line))
    merged = drop_repeated_lines(merged)
    if params.mmr_enabled:
        merged = mmr_rerank(merged, params.mmr_lambda, limit=params.max_results, min_score=params.min_score)
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
            and (c.score >= floor or c.text_score >= text_bar or covers_all_terms(c.text, terms))
        ]
        rescued = rescued[: params.max_results - len(strict)]
        facts["rescued"] = {c.chunk_id for c in rescued}
        strict += rescued
    return strict[: params.max_results], facts
