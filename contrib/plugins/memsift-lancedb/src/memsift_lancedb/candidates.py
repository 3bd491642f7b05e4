"""One generation's tables answering memsift's store seam (`memsift.engine.kit.CandidateStore`):
LanceDB's BM25 full-text index over the chunks' FTS5 tokens, exact cosine search, and filters on
the days a chunk speaks of. memsift's `search_indexed` asks these in its order and ranks.
Blocking calls: memsift runs them in a worker thread."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from memsift.engine.kit import (COMMON_SHARE, Candidate, FtsPlan, QueryItems, ROW_FIELDS, TimeWindow,
                                candidate_from_row, complete_from_embeddings, expansion_items, first_per_day,
                                is_weightless, keyword_scores, query_items, word_terms)

from .sql import quote

__all__ = ["LanceCandidates"]

def _in_window(w: TimeWindow) -> str:
    """Chunks whose days reach into the window (the days they speak of run from first_day to
    last_day); the pipeline then keeps exactly the chunks with a line of those days."""
    lo, hi = w.day_range()
    return f"(first_day <= {quote(hi)} AND last_day >= {quote(lo)})"


class LanceCandidates:
    """`chunks` and `files`: one generation's two tables. A Selection here is a filter expression."""

    def __init__(self, chunks: Any, files: Any, tokenizer: str) -> None:
        self.chunks, self.files, self.tokenizer = chunks, files, tokenizer
        self._notes: int | None = None

    def select_days(self, windows: Sequence[TimeWindow], *, undated_by_mtime: bool) -> str:
        days = " OR ".join(_in_window(w) for w in windows)
        if not undated_by_mtime:
            return days
        paths = []
        for w in windows:  # since/until: undated chunks whose file was modified then
            lo_ns, hi_ns = w.mtime_ns_range()
            rows = self.files.to_arrow().select(["path", "mtime_ns"]).to_pylist()
            paths += [r["path"] for r in rows if lo_ns <= r["mtime_ns"] <= hi_ns]
        undated = f" OR (day IS NULL AND path IN ({', '.join(quote(p) for p in paths)}))" if paths else ""
        return f"({days}{undated})"

    @staticmethod
    def _fts_query(items: QueryItems) -> Any:
        """The plan's terms OR'ed, its phrases as phrases (a CJK pair: a phrase of its two characters)."""
        from lancedb.query import BooleanQuery, MatchQuery, Occur, PhraseQuery  # noqa: PLC0415

        parts: list[Any] = []
        singles = [t for t in items.terms if not (len(t) == 2 and all(ord(ch) > 0x2E7F for ch in t))]
        pairs = [tuple(t) for t in items.terms if t not in singles]
        if singles:
            parts.append(MatchQuery(" ".join(singles), "tokens"))
        parts += [PhraseQuery(" ".join(p), "tokens") for p in [*items.phrases, *pairs]]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else BooleanQuery([(Occur.SHOULD, p) for p in parts])

    def keyword(self, plan: FtsPlan, limit: int, *, within: str | None, prefer: str | None,
                also: Sequence[str]) -> tuple[list[Candidate], dict[str, float]]:
        """BM25-ranked chunks; the question's expansions ("met" for "meet") are matched on their
        own and weigh less, as on builtin and Postgres (engine/search/expansion.py)."""
        fts = self._fts_query(query_items(plan, self.tokenizer))
        if fts is None or not self.chunks.count_rows():
            return [], {}
        cols = [*ROW_FIELDS, *(["vector"] if "vector" in self.chunks.schema.names else [])]

        def run(where: str | None, n: int, query: Any = fts) -> list[dict]:
            q = self.chunks.search(query, query_type="fts").select(cols).limit(n)
            if where:
                q = q.where(where, prefilter=True)
            return q.to_list()

        rows = run(within, limit)
        if prefer:
            taken = {r["id"] for r in rows}
            rows += [r for r in run(prefer, limit) if r["id"] not in taken]
        extra = [i for i in also if i not in {r["id"] for r in rows}]
        if rows and extra:
            ids = f"id IN ({', '.join(quote(i) for i in extra)})"
            rows += run(ids if within is None else f"({within}) AND {ids}", len(extra))
        expansions = expansion_items(plan, self.tokenizer)
        more = self._fts_query(expansions) if expansions.terms or expansions.phrases else None
        xrows = run(within, limit, more) if more is not None else []
        by_id = {r["id"]: r for r in [*xrows, *rows]}
        # FTS5's rank is -bm25: the raw ranks, scored as every store's are (keyword_scores)
        scored = keyword_scores([(r["id"], -float(r["_score"])) for r in rows],
                                [(r["id"], -float(r["_score"])) for r in xrows])
        out, ranks = [], {}
        for chunk_id, score, rank in scored:
            c = candidate_from_row(by_id[chunk_id], text_score=score, keyword_hit=True)
            c.embedding = by_id[chunk_id].get("vector")
            out.append(c)
            if rank is not None:
                ranks[chunk_id] = rank
        return out, ranks

    def vector(self, qvec: Any, limit: int, *, within: str | None) -> list[Candidate]:
        q = np.asarray(qvec, dtype=np.float32)
        if not np.any(q) or "vector" not in self.chunks.schema.names:
            return []
        search = (
            self.chunks.search(q, vector_column_name="vector").distance_type("cosine").select(ROW_FIELDS).limit(limit)
        )
        if within:
            search = search.where(within, prefilter=True)
        return [
            candidate_from_row(r, vector_score=1.0 - float(r["_distance"]), vector_hit=True)
            for r in search.to_list()
            if math.isfinite(r["_distance"])
        ]

    complete_vector_scores = staticmethod(complete_from_embeddings)  # keyword rows carry their vectors

    def weightless(self, word: str) -> bool:
        """Counted by file, up to the count that decides."""
        from lancedb.query import FullTextOperator, MatchQuery  # noqa: PLC0415

        terms = word_terms(word, self.tokenizer)
        if not terms:
            return False
        if self._notes is None:
            self._notes = self.files.count_rows()
        enough = max(1, math.ceil(self._notes * COMMON_SHARE))
        q = MatchQuery(" ".join(terms), "tokens", operator=FullTextOperator.AND)
        rows = self.chunks.search(q, query_type="fts").select(["path"]).limit(enough * 20).to_list()
        return is_weightless(len({r["path"] for r in rows}), self._notes)

    def window_rows(self, windows: Sequence[TimeWindow], per_day: int, cap: int = 5000) -> list[Candidate]:
        out: list[Candidate] = []
        seen: set[str] = set()
        for w in windows:
            rows = self.chunks.search().where(_in_window(w)).select([*ROW_FIELDS]).limit(cap).to_list()
            out += [candidate_from_row(r) for r in first_per_day(rows, per_day, seen)]
        return out

    def file_times(self, paths: set[str]) -> dict[str, float]:
        where = f"path IN ({', '.join(quote(p) for p in paths)})"
        rows = self.files.search().where(where).select(["path", "mtime_ns"]).limit(len(paths)).to_list()
        return {r["path"]: r["mtime_ns"] / 1e9 for r in rows}
