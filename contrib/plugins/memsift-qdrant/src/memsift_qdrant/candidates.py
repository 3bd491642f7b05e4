"""One generation's collections answering memsift's store seam (`memsift.engine.kit.CandidateStore`):
BM25 as a sparse-vector query (Qdrant's IDF modifier times the term-frequency weights written at
index time), cosine search over the dense vectors, and payload filters on the days a chunk
speaks of. memsift's `search_indexed` asks these in its order and ranks. Blocking calls: memsift
runs them in a worker thread."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from datetime import date
from typing import Any, Sequence

import numpy as np
from qdrant_client import models

from memsift.engine.kit import (COMMON_SHARE, Candidate, FtsPlan, ROW_FIELDS, TimeWindow, candidate_from_row,
                                complete_from_embeddings, expansion_items, first_per_day, is_weightless,
                                keyword_scores, query_items, word_terms)

from .store import QdrantStore, point_id

__all__ = ["QdrantCandidates", "sparse_document", "day_number", "document_terms"]

K1, B = 1.2, 0.75  # BM25's usual constants (FTS5's too)


def _index(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little")


def _cjk(token: str) -> bool:
    return len(token) == 1 and ord(token) > 0x2E7F


def document_terms(tokens: list[str]) -> list[str]:
    """The chunk's FTS5 tokens and, for CJK text (one token per character), each pair of
    neighbouring characters: the query plan asks for CJK words as such pairs, which FTS5 and
    LanceDB match as two-character phrases and a sparse vector, without positions, as terms."""
    pairs = [a + b for a, b in zip(tokens, tokens[1:]) if _cjk(a) and _cjk(b)]
    return tokens + pairs


def sparse_document(tokens: list[str], average_length: float) -> models.SparseVector:
    """BM25's term-frequency part for each distinct token (the IDF part is Qdrant's, at query time)."""
    counts = Counter(tokens)
    norm = K1 * (1 - B + B * len(tokens) / max(1.0, average_length))
    weights: dict[int, float] = {}
    for token, tf in counts.items():
        i = _index(token)
        weights[i] = weights.get(i, 0.0) + tf * (K1 + 1) / (tf + norm)
    return models.SparseVector(indices=list(weights), values=list(weights.values()))


def _sparse_query(terms: Sequence[str]) -> models.SparseVector | None:
    indices = sorted({_index(t) for t in terms})
    return models.SparseVector(indices=indices, values=[1.0] * len(indices)) if indices else None


def day_number(day: str | None) -> int | None:
    return date.fromisoformat(day).toordinal() if day else None


def _in_window(w: TimeWindow) -> models.Filter:
    """Chunks whose days reach into the window (they speak of first_day to last_day)."""
    bounds = [models.FieldCondition(key="first_day", range=models.Range(lte=w.end.toordinal()))] if w.end else []
    if w.start:
        bounds.append(models.FieldCondition(key="last_day", range=models.Range(gte=w.start.toordinal())))
    # Open at both ends: every dated chunk.
    return models.Filter(must=bounds or [models.FieldCondition(key="first_day", range=models.Range(gte=0))])


def _both(a: models.Filter | None, b: models.Filter | None) -> models.Filter | None:
    return a if b is None else b if a is None else models.Filter(must=[a, b])


class QdrantCandidates:
    """A Selection here is a Qdrant filter."""

    def __init__(self, store: QdrantStore, gen: int, tokenizer: str, dense: bool) -> None:
        self.store, self.tokenizer, self.dense = store, tokenizer, dense
        self.chunks, self.files = store.chunks(gen), store.files(gen)
        self._notes: int | None = None

    def select_days(self, windows: Sequence[TimeWindow], *, undated_by_mtime: bool) -> models.Filter:
        days: list[Any] = [_in_window(w) for w in windows]
        if undated_by_mtime:  # since/until: undated chunks whose file was modified then
            rows = self.store.scroll(self.files, fields=["path", "mtime_ns"])
            for w in windows:
                lo_ns, hi_ns = w.mtime_ns_range()
                paths = [p.payload["path"] for p in rows if lo_ns <= p.payload["mtime_ns"] <= hi_ns]
                if paths:
                    days.append(models.Filter(
                        must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="day")),
                              models.FieldCondition(key="path", match=models.MatchAny(any=paths))]))
        return models.Filter(should=days)

    def _bm25(self, terms: Sequence[str], limit: int, flt: models.Filter | None) -> list[Any]:
        query = _sparse_query(terms)
        if query is None or limit < 1:
            return []
        with self.store.client() as c:
            return c.query_points(self.chunks, query=query, using="bm25", query_filter=flt, limit=limit,
                                  with_payload=ROW_FIELDS, with_vectors=["dense"] if self.dense else False).points

    def keyword(self, plan: FtsPlan, limit: int, *, within: models.Filter | None, prefer: models.Filter | None,
                also: Sequence[str]) -> tuple[list[Candidate], dict[str, float]]:
        """BM25-ranked chunks; the question's expansions ("met" for "meet") are matched on their
        own and weigh less, as on builtin and Postgres (engine/search/expansion.py). The plan's
        phrases (the question word for word, a hyphenated word) have no match here: a sparse
        vector has no positions, and their content words are among the terms already."""
        terms = query_items(plan, self.tokenizer).terms
        points = self._bm25(terms, limit, within)
        if prefer is not None:
            taken = {p.id for p in points}
            points += [p for p in self._bm25(terms, limit, prefer) if p.id not in taken]
        extra = [point_id(i) for i in also if point_id(i) not in {str(p.id) for p in points}]
        if points and extra:
            points += self._bm25(
                terms, len(extra), _both(within, models.Filter(must=[models.HasIdCondition(has_id=extra)]))
            )
        more = expansion_items(plan, self.tokenizer).terms
        xpoints = self._bm25(more, limit, within) if more else []
        by_id = {p.payload["id"]: p for p in [*xpoints, *points]}
        # BM25's score, negated: FTS5's rank, scored as every store's are (keyword_scores)
        scored = keyword_scores([(p.payload["id"], -float(p.score)) for p in points],
                                [(p.payload["id"], -float(p.score)) for p in xpoints])
        out, ranks = [], {}
        for chunk_id, score, rank in scored:
            p = by_id[chunk_id]
            c = candidate_from_row(p.payload, text_score=score, keyword_hit=True)
            c.embedding = (p.vector or {}).get("dense") if self.dense else None
            out.append(c)
            if rank is not None:
                ranks[chunk_id] = rank
        return out, ranks

    def vector(self, qvec: Any, limit: int, *, within: models.Filter | None) -> list[Candidate]:
        q = np.asarray(qvec, dtype=np.float32)
        if not self.dense or not np.any(q):
            return []
        with self.store.client() as c:
            points = c.query_points(self.chunks, query=q.tolist(), using="dense", query_filter=within, limit=limit,
                                    with_payload=ROW_FIELDS).points
        return [
            candidate_from_row(p.payload, vector_score=float(p.score), vector_hit=True)
            for p in points
            if math.isfinite(p.score)
        ]

    complete_vector_scores = staticmethod(complete_from_embeddings)  # keyword rows carry their vectors

    def weightless(self, word: str) -> bool:
        """Counted by file (chunks holding every token of the word), up to the count that decides."""
        terms = word_terms(word, self.tokenizer)
        if not terms:
            return False
        if self._notes is None:
            self._notes = self.store.count(self.files)
        enough = max(1, math.ceil(self._notes * COMMON_SHARE))
        flt = models.Filter(must=[models.FieldCondition(key="tokens", match=models.MatchValue(value=t)) for t in terms])
        points = self.store.scroll(self.chunks, flt, fields=["path"], limit=enough * 20)
        return is_weightless(len({p.payload["path"] for p in points}), self._notes)

    def window_rows(self, windows: Sequence[TimeWindow], per_day: int, cap: int = 5000) -> list[Candidate]:
        out: list[Candidate] = []
        seen: set[str] = set()
        for w in windows:
            points = self.store.scroll(self.chunks, _in_window(w), fields=ROW_FIELDS, limit=cap)
            out += [candidate_from_row(row) for row in first_per_day([p.payload for p in points], per_day, seen)]
        return out

    def file_times(self, paths: set[str]) -> dict[str, float]:
        flt = models.Filter(must=[models.FieldCondition(key="path", match=models.MatchAny(any=sorted(paths)))])
        return {p.payload["path"]: p.payload["mtime_ns"] / 1e9
                for p in self.store.scroll(self.files, flt, fields=["path", "mtime_ns"])}
