"""Builtin retrieval: FTS5 BM25 keyword candidates, vector KNN candidates and a time's rows, as the
store seam `IndexCandidates` answers them to engine/search/indexed.search_indexed (which asks
min(200, maxResults × candidateMultiplier) a side and ranks them)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable, Sequence

import apsw
from memsift.engine.lazy import np  # numpy on first use: a keyword search never needs it

from memsift.engine.search.expansion import keyword_scores
from memsift.engine.search.fts_query import FtsPlan
from memsift.engine.search.time_only import COMMON_SHARE, is_weightless
from memsift.engine.search.time_query import TimeWindow
from memsift.engine.search.ranking import Candidate

from .store import VectorState, cosines, row_cosines, row_estimate, scalar
from .vector_memory import MemoryVectors

__all__ = [
    "IndexCandidates",
    "Days",
    "keyword_candidates",
    "vector_candidates",
    "vector_candidates_within",
    "day_rowids",
    "complete_vector_scores",
    "indexed_file_time",
    "WINDOW_SCAN_MAX",
    "window_candidates",
    "weightless_word_test",
]

SCAN_BATCH = 4096  # rows per batch in the numpy fallback scan (bounded memory)
COMMON_TERM_MIN_CHUNKS = 5000  # from this many chunks on, weightless common words leave the query
LARGE_INDEX_CHUNKS = 200_000  # from this many on, only rare terms are ranked (_large_index_match)
COMMON_MATCHES = 20_000  # in a large index, a term matching this many rows is common
RANK_ROWS_MAX = 30_000  # in a large index, at most this many matches of rare terms are ranked (the newest)
COMMON_RANK_ROWS_MAX = 10_000  # ... and of a query made of common words only


def _load_chunks(conn: apsw.Connection, rowids: list[int]) -> dict[int, tuple]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    q = (
        f"SELECT rowid, id, path, source, start_line, end_line, text, day, day_source FROM chunks WHERE rowid IN "
        f"({marks})"
    )
    return {row[0]: row for row in conn.execute(q, rowids)}


def _candidate(row: tuple, **scores: Any) -> Candidate:
    _rowid, cid, path, source, start, end, text, day, day_source = row
    return Candidate(chunk_id=cid, path=path, source=source, start_line=start, end_line=end, text=text,
                     day=day, day_source=day_source, **scores)


def _matches(conn: apsw.Connection, term: str, cap: int) -> int:
    """Rows matching one quoted term, counted up to `cap` (a common word stops early)."""
    return scalar(conn, "SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)", (term, cap))


def weightless_word_test(conn: apsw.Connection) -> Callable[[str], bool]:
    """Whether a word selects no notes (engine/search/time_only.is_weightless), its files counted
    by the index's own tokenizer, up to the count that decides."""
    notes: list[int] = []

    def weightless(word: str) -> bool:
        if not notes:
            notes.append(int(scalar(conn, "SELECT count(*) FROM files") or 0))
        enough = max(1, math.ceil(notes[0] * COMMON_SHARE))
        try:
            found = scalar(
                conn,
                "SELECT count(*) FROM (SELECT DISTINCT c.path FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid "
                "WHERE chunks_fts MATCH ? LIMIT ?)",
                ('"' + word.replace('"', '""') + '"', enough),
            )
        except apsw.Error:  # a word the tokenizer cannot match (shorter than a trigram): no judgement
            return False
        return is_weightless(found, notes[0])

    return weightless


def _without_weightless_terms(conn: apsw.Connection, plan: FtsPlan, total: int) -> str:
    """The MATCH expression without single words found in half the chunks or more.

    FTS5's BM25 clamps a term's IDF to 1e-6 once it occurs in at least half the rows, so such a
    word adds nothing to any score, but ranking still visits every row it matches: in 100k chunks
    "ask" or "class" made an OR query 3-4 times slower for the same top hits. Below
    COMMON_TERM_MIN_CHUNKS the query is fast anyway and the lookups are not worth it. If every
    word is that common, the query is kept as it is."""
    words = [t for t in plan.match_terms if " " not in t]
    if len(plan.match_terms) < 2 or not words:
        return plan.match
    if total < COMMON_TERM_MIN_CHUNKS:
        return plan.match
    half = (total + 1) // 2  # a count stops there: only "half or more" matters
    weightless = {t for t in words if _matches(conn, t, half) >= half}
    if len(weightless) == len(words):
        return plan.match  # nothing but common words: they are all the query has
    return " OR ".join(t for t in plan.match_terms if t not in weightless)


def _large_index_match(conn: apsw.Connection, plan: FtsPlan) -> tuple[str, int]:
    """The MATCH expression for an index of LARGE_INDEX_CHUNKS or more: only the query's rare
    terms (each matching fewer than COMMON_MATCHES rows; a phrase when all its words are).

    FTS5 ranks every row an OR query matches, about 0.8 µs a row: at 1M chunks a question with
    "class" or a name in it matched 300-600k rows and took 200-600 ms. The best BM25 hits carry
    the rare terms (a common word's IDF is a fraction of theirs), so ranking the rows of the rare
    terms alone keeps the top hits that matter at a fraction of the cost; the common words still
    count in the hybrid merge's lexical boost. A query of common words only keeps its single
    words (phrases of common words are the dearest part), and only the newest
    COMMON_RANK_ROWS_MAX of their matches are ranked. Returns (expression, rows ranked at most)."""
    seen: dict[str, int] = {}

    def rare(word: str) -> bool:
        if word not in seen:
            seen[word] = _matches(conn, word, COMMON_MATCHES)
        return seen[word] < COMMON_MATCHES

    kept = []
    for term in plan.match_terms:
        words = term.strip('"').split()
        if all(rare('"' + w.replace('"', '""') + '"') for w in words):
            kept.append(term)
    if kept:
        return " OR ".join(kept), RANK_ROWS_MAX
    words = [t for t in plan.match_terms if " " not in t.strip('"')]
    return " OR ".join(words or plan.match_terms), COMMON_RANK_ROWS_MAX


def keyword_candidates(
    conn: apsw.Connection, plan: FtsPlan, limit: int, *, also: Sequence[str] = (),
    within: set[int] | None = None, prefer: set[int] | None = None,
) -> tuple[list[Candidate], dict[str, float]]:
    """BM25-ranked chunks for the plan. Returns candidates and raw bm25 ranks by chunk id.

    `also`: chunk ids found by the vector side. Those that match the query but fall outside the
    top `limit` get their BM25 score too (they follow the top ones), so the merge does not count
    real keyword evidence as 0 just because the pool was small. `within`: only these rows (a
    since/until filter). `prefer`: the best `limit` of these rows join the top ones (the rows of
    a time the question names), scored on the same scale."""
    rows: list[Any] = []  # (rowid, bm25 rank)
    expansion_rows: list[Any] = []
    extra: set[int] = set()
    if plan.match:
        # Every match with its rank, then the best `limit` here: no slower than ORDER BY rank
        # LIMIT (measured at 100k chunks), and it has the ranks of the vector side's chunks too
        # (FTS5 answers `rowid IN (…)` one full query per id: 0.3 ms each).
        total = row_estimate(conn)
        found: list[Any]  # (rowid, rank) rows
        if total >= LARGE_INDEX_CHUNKS:
            found = conn.execute(
                "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
                _large_index_match(conn, plan),
            ).fetchall()
        else:
            found = conn.execute("SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?",
                                 (_without_weightless_terms(conn, plan, total),)).fetchall()
        if within is not None:
            found = [row for row in found if row[0] in within]
        rows = heapq.nsmallest(limit, found, key=lambda row: row[1])
        if prefer:
            taken = {r for r, _ in rows}
            rows += heapq.nsmallest(
                limit, (row for row in found if row[0] in prefer and row[0] not in taken), key=lambda row: row[1]
            )
            rows.sort(key=lambda row: row[1])
        if rows and also:
            wanted = set(_rowids(conn, also)) - {r for r, _ in rows}
            more: list[Any] = [row for row in found if row[0] in wanted]
            extra = {r for r, _ in more}
            rows += more
        if plan.expansion_match and total < LARGE_INDEX_CHUNKS:  # past that, only rare terms are ranked
            expansion_rows = _expansion_rows(conn, plan.expansion_match, limit, within)
    top = keyword_scores(rows, expansion_rows, limit=limit, extra=extra)
    loaded = _load_chunks(conn, [r for r, _s, _r in top])
    out, ranks = [], {}
    for rowid, score, rank in top:
        if rowid in loaded:
            c = _candidate(loaded[rowid], text_score=score, keyword_hit=True)
            out.append(c)
            if rank is not None:
                ranks[c.chunk_id] = rank
    return out, ranks


def _expansion_rows(conn: apsw.Connection, match: str, limit: int, within: set[int] | None) -> list[Any]:
    """The best (rowid, rank) matches of the expansion terms on their own (scored in `keyword_scores`)."""
    found: list[Any] = conn.execute("SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?", (match,)).fetchall()
    if within is not None:
        found = [row for row in found if row[0] in within]
    return heapq.nsmallest(limit, found, key=lambda row: row[1])


def _rowids(conn: apsw.Connection, chunk_ids: Sequence[str]) -> list[int]:
    marks = ",".join("?" * len(chunk_ids))
    return [r for (r,) in conn.execute(f"SELECT rowid FROM chunks WHERE id IN ({marks})", list(chunk_ids))]


def complete_vector_scores(
    conn: apsw.Connection, keyword: list[Candidate], vector: list[Candidate], query: np.ndarray
) -> None:
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
    for (cid, _blob), sim in zip(rows, cosines([b for _c, b in rows], q / (np.linalg.norm(q) or 1.0)).tolist()):
        missing[cid].vector_score = sim
        missing[cid].vector_hit = True


def vector_candidates(
    conn: apsw.Connection, vec: VectorState, query: np.ndarray, limit: int, memory: MemoryVectors | None = None,
) -> list[Candidate]:
    """Nearest chunks by cosine: from the vectors in memory when `memory` holds this index (a
    long-running host, or a large index, once loaded), else vec0 KNN when sqlite-vec is loaded,
    else a bounded numpy scan."""
    q = np.asarray(query, dtype="<f4")
    if not np.any(q):
        return []
    hits = memory.search(conn, q, limit) if memory is not None else None
    if hits is None:
        hits = _index_knn(conn, vec, q, limit)
    rows = _load_chunks(conn, [r for r, _ in hits])
    return [_candidate(rows[r], vector_score=s, vector_hit=True) for r, s in hits if r in rows]


def _index_knn(conn: apsw.Connection, vec: VectorState, q: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """(rowid, cosine) of the nearest rows from the index itself: vec0, else a numpy scan."""
    if vec.available and conn.execute("SELECT 1 FROM sqlite_master WHERE name='chunks_vec'").fetchone():
        return [(rowid, 1.0 - dist) for rowid, dist in conn.execute(
            "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?", (q.tobytes(), limit))]
    return _numpy_scan(conn, q, limit)


WINDOW_SCAN_MAX = 50_000  # rows of a question's time window scanned exactly; past that the KNN pool serves


def day_rowids(conn: apsw.Connection, windows: Sequence[TimeWindow], *, undated_by_mtime: bool = False) -> set[int]:
    """Rows whose stated day lies in any window; with `undated_by_mtime` (a since/until filter),
    also undated rows whose file was modified in it."""
    out: set[int] = set()
    for w in windows:
        lo, hi = w.day_range()
        out.update(r for (r,) in conn.execute("SELECT chunk FROM chunk_days WHERE day BETWEEN ? AND ?", (lo, hi)))
        if undated_by_mtime:
            lo_ns, hi_ns = w.mtime_ns_range()
            out.update(
                r
                for (r,) in conn.execute(
                    "SELECT c.rowid FROM chunks c JOIN files f ON f.path = c.path WHERE c.day IS NULL AND f.mtime_ns "
                    "BETWEEN ? AND ?",
                    (lo_ns, hi_ns),
                )
            )
    return out


def window_candidates(
    conn: apsw.Connection, windows: Sequence[TimeWindow], per_day: int, cap: int = 5000
) -> list[Candidate]:
    """A time-only question's notes: the first `per_day` chunks (in file order) of every day of
    its windows, at most `cap` in all (engine/search/time_only.py orders them)."""
    out: list[Candidate] = []
    for w in windows:
        lo, hi = w.day_range()
        # A chunk is listed under each day of the window it speaks of (its first there wins).
        rows = conn.execute(
            "SELECT rowid, id, path, source, start_line, end_line, text, wday, day_source FROM "
            "(SELECT c.rowid AS rowid, c.id AS id, c.path AS path, c.source AS source, c.start_line AS start_line, "
            "c.end_line AS end_line, c.text AS text, d.day AS wday, c.day_source AS day_source, "
            "row_number() OVER (PARTITION BY d.day ORDER BY c.path, c.start_line) AS n "
            "FROM chunk_days d JOIN chunks c ON c.rowid = d.chunk WHERE d.day BETWEEN ? AND ?) "
            "WHERE n <= ? ORDER BY wday, path, start_line LIMIT ?", (lo, hi, per_day, cap))
        seen = {c.chunk_id for c in out}
        for row in rows:
            c = _candidate(row)
            if c.chunk_id not in seen:
                seen.add(c.chunk_id)
                out.append(c)
    return out


def vector_candidates_within(conn: apsw.Connection, query: np.ndarray, rowids: set[int], limit: int) -> list[Candidate]:
    """The nearest of the given rows by an exact cosine scan (a time window or filter)."""
    q = np.asarray(query, dtype="<f4")
    if not rowids or not np.any(q):
        return []
    scored = row_cosines(conn, sorted(rowids), q / (np.linalg.norm(q) or 1.0), SCAN_BATCH)
    best = heapq.nlargest(limit, scored, key=lambda rs: rs[1])
    loaded = _load_chunks(conn, [r for r, _ in best])
    return [_candidate(loaded[r], vector_score=s, vector_hit=True) for r, s in best if r in loaded]


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
        for (rowid, _b), s in zip(usable, cosines([b for _r, b in usable], qn).tolist()):
            if len(best) < limit:
                heapq.heappush(best, (s, rowid))
            elif s > best[0][0]:
                heapq.heapreplace(best, (s, rowid))
    return [(r, s) for s, r in sorted(best, reverse=True)]


def indexed_file_time(conn: apsw.Connection) -> Callable[[str], float | None]:
    """The pipeline's `file_time`: a file's indexed mtime in seconds, or None."""

    def file_time(path: str) -> float | None:
        row = conn.execute("SELECT mtime_ns FROM files WHERE path=?", (path,)).fetchone()
        return row[0] / 1e9 if row else None

    return file_time


@dataclass(frozen=True)
class Days:
    """builtin's `Selection` (engine/search/indexed.py): the rows of some days, and whether they are
    a since/until filter (searched whole) or a time the question names (preferred: its vectors are
    scanned only when there are few)."""

    rows: set[int]
    is_filter: bool


class IndexCandidates:
    """builtin's answers to the store seam (engine/search/indexed.CandidateStore) over one read
    connection of its SQLite index: FTS5 BM25, vec0 KNN (or the vectors in memory, or a numpy
    scan), exact scans of a time's rows."""

    def __init__(self, conn: apsw.Connection, vec: VectorState, memory: Callable[[], MemoryVectors | None]) -> None:
        self.conn, self.vec, self.memory = conn, vec, memory
        self.vectors_searched = False  # the vector side answered (said when sqlite-vec is missing)
        self._weightless = weightless_word_test(conn)
        self._file_time = indexed_file_time(conn)

    def select_days(self, windows: Sequence[TimeWindow], *, undated_by_mtime: bool) -> Days:
        return Days(day_rowids(self.conn, windows, undated_by_mtime=undated_by_mtime), is_filter=undated_by_mtime)

    def keyword(self, plan: FtsPlan, limit: int, *, within: Days | None, prefer: Days | None,
                also: Sequence[str]) -> tuple[list[Candidate], dict[str, float]]:
        return keyword_candidates(self.conn, plan, limit, also=also, within=within.rows if within else None,
                                  prefer=prefer.rows if prefer else None)

    def vector(self, qvec: Any, limit: int, *, within: Days | None) -> list[Candidate]:
        if within is None:
            found = vector_candidates(self.conn, self.vec, qvec, limit, self.memory())
        elif within.is_filter or len(within.rows) <= WINDOW_SCAN_MAX:  # past that, the KNN pool serves a named time
            found = vector_candidates_within(self.conn, qvec, within.rows, limit)
        else:
            found = []
        self.vectors_searched = True
        return found

    def complete_vector_scores(self, keyword: list[Candidate], vector: list[Candidate], qvec: Any) -> None:
        complete_vector_scores(self.conn, keyword, vector, qvec)

    def weightless(self, word: str) -> bool:
        return self._weightless(word)

    def window_rows(self, windows: Sequence[TimeWindow], per_day: int) -> list[Candidate]:
        return window_candidates(self.conn, windows, per_day=per_day)

    def file_times(self, paths: set[str]) -> dict[str, float]:
        times = {p: self._file_time(p) for p in paths}
        return {p: t for p, t in times.items() if t is not None}
