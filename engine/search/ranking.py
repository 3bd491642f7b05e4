"""Scoring: BM25 rank → score, hybrid weighted merge, temporal decay, MMR (as OpenClaw does; docs/parity.md)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone

from ..text import has_cjk, is_cjk_char, word_tokens

__all__ = [
    "bm25_rank_to_score",
    "bm25_relative_scores",
    "Candidate",
    "merge_hybrid",
    "drop_repeated_lines",
    "brevity_factor",
    "NEAR_EMPTY_WORDS",
    "decay_multiplier",
    "dated_file_timestamp",
    "is_evergreen",
    "mmr_rerank",
    "mmr_tokens",
    "jaccard",
]


def bm25_rank_to_score(rank: float) -> float:
    """FTS5 bm25 is lower-is-better (normally negative); map it into (0, 1]."""
    if not math.isfinite(rank):
        return 0.001
    if rank < 0:
        r = -rank
        return r / (1 + r)
    return 1 / (1 + rank)


def bm25_relative_scores(ranks: list[float]) -> list[float]:
    """Keyword scores for one query's BM25 ranks: linear in BM25 relative to the query's best hit,
    which keeps its absolute score `bm25_rank_to_score(best)`.

    The plain mapping r/(1+r) saturates: for a query of many terms every good hit lands near 0.95,
    so the keyword side brings almost no ranking signal into the hybrid merge (on SciFact's train
    split the hybrid scored nDCG@10 0.689 with it, below BM25 alone at 0.701, and 0.733 with this
    scaling). Anchoring at the best hit keeps scores absolute: weak keyword evidence stays weak.
    """
    if not ranks:
        return []
    best = -min(ranks)
    if not math.isfinite(best) or best <= 0:
        return [bm25_rank_to_score(r) for r in ranks]
    top = bm25_rank_to_score(-best)
    return [top * max(0.0, -r) / best if math.isfinite(r) else 0.001 for r in ranks]


@dataclass
class Candidate:
    """One chunk on its way through the pipeline, with every score part kept for explain."""

    chunk_id: str
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    text_score: float = 0.0
    vector_score: float = 0.0
    keyword_hit: bool = False
    vector_hit: bool = False
    score: float = 0.0
    decay: float = 1.0
    mmr_penalty: float = 0.0
    brevity: float = 1.0  # vector evidence kept for a near-empty chunk (brevity_factor)
    day: str | None = None  # the day the chunk speaks of (engine/files/note_dates.py), ISO
    day_source: str | None = None  # timestamp, heading, file name (or mtime, set by decay/filters)
    time_factor: float = 1.0  # the question's time window (engine/search/pipeline.py)
    # How close its days are to the question's windows: 1 inside one, down to 0 past the margins;
    # None when the question names no time or the chunk states no day (time_rank.apply_time_windows).
    window_closeness: float | None = None
    topic_words: int | None = None  # the question's topic words it holds, when the question names a time
    embedding: object | None = field(default=None, repr=False)
    line_days: list | None = field(default=None, repr=False)  # each line's day (time_rank.line_days), when asked for
    focus: tuple[int, int] | None = None  # lines (0-based, inclusive) of the time asked for, when only some are


# A chunk of fewer words than this is near-empty: a heading, a one-line note naming the people.
NEAR_EMPTY_WORDS = 20


def _content_words(text: str) -> float:
    """Words in a text; a CJK run (no spaces) counts one word per two characters."""
    if not has_cjk(text):
        return len(text.split())  # fast: this runs for every candidate of every search
    return sum(len(w) / 2 if has_cjk(w) else 1 for w in word_tokens(text))


def brevity_factor(text: str) -> float:
    """How much of its cosine similarity a chunk keeps: min(1, words / NEAR_EMPTY_WORDS).

    Cosine similarity between a question and a text of a few words is carried by the words they
    share, usually names: a two-line MEMORY.md that names the people is "similar" to every
    question about them and outranked the line holding the answer on vector similarity alone. A
    near-empty chunk cannot hold the evidence a question asks for, so its vector side is scaled
    down (keyword evidence is untouched). On the conversational dev sets this took near-empty
    hits in the top 10 from 21% of queries to 2% with turn recall unchanged (bench/evidence.py).
    """
    if len(text) >= 20 * NEAR_EMPTY_WORDS:  # 400 characters hold 20 words: skip the count
        return 1.0
    return min(1.0, _content_words(text) / NEAR_EMPTY_WORDS)


def merge_hybrid(
    keyword: list[Candidate], vector: list[Candidate], *, vector_weight: float, text_weight: float
) -> list[Candidate]:
    """Union by chunk id; a missing side scores 0; score = wv·vector·brevity + wt·text."""
    merged: dict[str, Candidate] = {}
    for c in vector:
        merged[c.chunk_id] = replace(c, vector_hit=True)
    for c in keyword:
        prev = merged.get(c.chunk_id)
        if prev is None:
            merged[c.chunk_id] = replace(c, keyword_hit=True)
        else:
            prev.text_score = c.text_score
            prev.keyword_hit = True
    for c in merged.values():
        c.brevity = brevity_factor(c.text)
        c.score = vector_weight * c.vector_score * c.brevity + text_weight * c.text_score
    return sorted(merged.values(), key=lambda c: (-c.score, c.path, c.start_line))


def drop_repeated_lines(ranked: list[Candidate]) -> list[Candidate]:
    """Ranked candidates without those whose lines a better one already shows.

    A long line (a long answer, an unwrapped paragraph) is chunked in pieces that all report that
    line; its pieces would fill the top hits with one line, showing the same lines again where
    other evidence could be. The best piece stands for the line (memory_get reads all of it). On
    the lme dev set this raised hybrid turn recall@10 from 0.552 to 0.585.

    A chunk whose text, day and source a better one of another file already shows is a copy: a
    sync tool's conflict copy (`2026-12-01.sync-conflict-….md`, `MEMORY (conflicted copy).md`), a
    note saved twice. The copies stand as one hit, at the best one's rank and score, cited by the
    shortest path (the original's: a copy's name adds to it). The same words on another day are
    another memory and stay, as do the same words twice in one file: a turn that repeats an earlier
    one is its own turn (the lme dev set holds 723 such pieces; folded, its turn recall@10 fell
    0.705 → 0.702).
    """
    shown: dict[tuple[str, str], set[int]] = {}
    copies: dict[tuple[str, str, str | None], int] = {}  # (source, text, day) → its hit's place in `out`
    out: list[Candidate] = []
    for c in ranked:
        lines = set(range(c.start_line, c.end_line + 1))
        seen = shown.setdefault((c.source, c.path), set())
        if lines <= seen:
            continue
        same = (c.source, " ".join(c.text.split()), c.day)
        k = copies.get(same)
        if k is not None and out[k].path != c.path:
            if (len(c.path), c.path) < (len(out[k].path), out[k].path):
                c.score = max(c.score, out[k].score)
                out[k] = c
            continue
        seen |= lines
        copies[same] = len(out)
        out.append(c)
    return out


# --- temporal decay ---------------------------------------------------------------------------

_DATED_RE = re.compile(r"(?:^|/)memory/(\d{4})-(\d{2})-(\d{2})\.md$")


def _normalise_path(path: str) -> str:
    p = path.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def dated_file_timestamp(path: str) -> float | None:
    """UTC midnight of `memory/YYYY-MM-DD.md`, or None (also for impossible dates)."""
    m = _DATED_RE.search(_normalise_path(path))
    if not m:
        return None
    try:
        d = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None
    return datetime(d.year, d.month, d.day, tzinfo=timezone.utc).timestamp()


def is_evergreen(path: str, source: str) -> bool:
    """MEMORY.md, memory.md and undated files under memory/ never decay."""
    if source != "memory":
        return False
    p = _normalise_path(path)
    if p in ("MEMORY.md", "memory.md"):
        return True
    return (p.startswith("memory/") or "/memory/" in p) and not _DATED_RE.search(p)


def decay_multiplier(age_days: float, half_life_days: float) -> float:
    if not math.isfinite(age_days) or half_life_days <= 0:
        return 1.0
    return math.exp(-math.log(2) / half_life_days * max(0.0, age_days))


# --- MMR --------------------------------------------------------------------------------------

_ASCII_TOKEN_RE = re.compile(r"[a-z0-9_]+")


def mmr_tokens(text: str) -> frozenset[str]:
    """ASCII word runs, plus CJK unigrams and bigrams of adjacent CJK characters."""
    lower = text.lower()
    tokens = set(_ASCII_TOKEN_RE.findall(lower))
    if not has_cjk(lower):
        return frozenset(tokens)
    prev = ""
    for ch in lower:
        if is_cjk_char(ch):
            tokens.add(ch)
            if prev:
                tokens.add(prev + ch)
            prev = ch
        else:
            prev = ""
    return frozenset(tokens)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def mmr_rerank(
    items: list[Candidate], lam: float, *, limit: int | None = None, min_score: float = -math.inf
) -> list[Candidate]:
    """Greedy maximal marginal relevance over min-max normalised scores (as OpenClaw does; docs/parity.md).

    Each remaining item's similarity to the chosen set is kept up to date as items are chosen
    (O(n²) Jaccard comparisons, not O(n³)). With `limit`, the greedy choice stops once `limit`
    chosen items score at least `min_score` (all a search can return); the rest follow by score,
    so a pool of 240 candidates for 30 results is not reordered in full."""
    if len(items) <= 1 or lam >= 1:
        return sorted(items, key=lambda c: -c.score)
    scores = [c.score for c in items]
    lo, hi = min(scores), max(scores)
    rel = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    toks = [mmr_tokens(c.text) for c in items]
    penalty = [0.0] * len(items)  # max Jaccard similarity to any chosen item
    remaining = list(range(len(items)))
    chosen: list[int] = []
    passing = 0
    while remaining and (limit is None or passing < limit):
        best, best_val = remaining[0], -math.inf
        for i in remaining:
            val = lam * rel[i] - (1 - lam) * penalty[i]
            if val > best_val or (val == best_val and items[i].score > items[best].score):
                best, best_val = i, val
        items[best].mmr_penalty = (1 - lam) * penalty[best]
        chosen.append(best)
        passing += items[best].score >= min_score
        remaining.remove(best)
        for i in remaining:
            penalty[i] = max(penalty[i], jaccard(toks[i], toks[best]))
    remaining.sort(key=lambda i: -items[i].score)
    return [items[i] for i in chosen + remaining]
