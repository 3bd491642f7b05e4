"""Postgres retrieval: BM25 in plain SQL over the postings table (FTS5's formula: k1 1.2, b 0.75,
IDF clamped to 1e-6 when a term is in half the chunks or more) and exact per-agent cosine with
pgvector. engine/search/pipeline.py ranks what these find, as for the builtin index.

Vectors: an HNSW index on a table shared by agents filters by agent after the graph walk, so
small agents got almost nothing back. So a search scans its own agent's generation: the nearest
few by the half-precision copies an index holds (schema._M5, no row read), put in exact order by
their full vectors: exact (recall 1.0) at any fleet size, at a cost linear in the agent's own
chunks. An agent past `memory.postgres.hnswAbove` vectors gets an HNSW index of its own (a partial index on its agent
id: no other agent's rows in its graph), searched with pgvector's iterative scan so the generation filter never returns
too few.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from memsift.engine.search.expansion import keyword_scores
from memsift.engine.search.ranking import Candidate
from memsift.engine.search.time_only import COMMON_SHARE, is_weightless
from memsift.engine.search.time_query import TimeWindow

from memsift.engine.search.fts_query import FtsPlan
from memsift.engine.search.terms import QueryItems, expansion_items, query_items, word_terms

from .schema import HALF_SCAN_MAX_DIMS, chunk_number

__all__ = [
    "PgCandidates",
    "Days",
    "keyword_candidates",
    "vector_candidates",
    "hnsw_index_name",
    "hnsw_index_names",
    "HnswWalk",
    "complete_vector_scores",
    "day_chunks",
    "window_candidates",
    "file_times",
    "weightless_words",
    "K1",
    "B",
]

K1, B = 1.2, 0.75
COMMON_TERM_MIN_CHUNKS = 5000  # as the builtin: from this many chunks on, weightless words leave the query
# As the builtin (backends/builtin/search._large_index_match): from LARGE_INDEX_CHUNKS chunks on,
# only the query's rare terms (each in fewer than COMMON_MATCHES chunks) are ranked: a common
# word's postings are most of the work and a fraction of the score. A query of common words only
# keeps its single words, each ranked over at most COMMON_RANK_ROWS_MAX of its postings.
LARGE_INDEX_CHUNKS = 200_000
COMMON_MATCHES = 20_000
COMMON_RANK_ROWS_MAX = 10_000
# The exact scan through half vectors (_nearest_by_halves). Rounding each component to a half moves
# it by at most 2^-11 of itself, so each unit vector by at most 2^-11 in length, and their cosine by
# at most 2 x 2^-11 = 9.8e-4 (to first order; the second is 2^-22); pgvector sums in single
# precision, about 6e-5 more at 1,024 dimensions on each of the two distances compared. HALF_ERROR
# bounds it all. HALF_POOL_MARGIN: how many more than asked are read from the index first.
HALF_ERROR = 1.25e-3
HALF_POOL_MARGIN = 30
_COLUMNS = "chunk, id, path, source, start_line, end_line, text, day, day_source"
_NCOLS = 9
_M_COLUMNS = ", ".join(f"m.{c}" for c in _COLUMNS.split(", "))


def _idf(n: int, df: int) -> float:
    idf = math.log((n - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else 1e-6


async def weightless_words(conn: Any, agent: str, gen: int, words: list[str], kind: str = "unicode61") -> set[str]:
    """The words that select no notes (engine/search/time_only.is_weightless), counted by file."""
    cur = await conn.execute("SELECT count(*) FROM memsift_files WHERE agent_id = %s AND generation = %s", (agent, gen))
    notes = (await cur.fetchone())[0]
    enough = max(1, math.ceil(notes * COMMON_SHARE))
    out = set()
    for w in words:
        terms = word_terms(w, kind)
        if not terms:
            continue
        if len(set(terms)) == 1:
            # A word's postings, counted no further than `enough`: fewer, and it is in fewer notes
            # than `enough` (weightless only when in none); only a word that common needs its notes
            # counted (a join per posting: 0.1 s for a word of 10,000 postings at a million chunks).
            postings = (await _bounded_df(conn, agent, gen, terms[:1], enough))[terms[0]]
            if postings < enough:
                if postings == 0:
                    out.add(w)
                continue
        cur = await conn.execute(
            "SELECT count(*) FROM (SELECT c.path FROM memsift_postings p JOIN memsift_chunks c "
            "ON c.agent_id = p.agent_id AND c.generation = p.generation AND c.chunk = p.chunk "
            "WHERE p.agent_id = %s AND p.generation = %s AND p.term = ANY(%s) "
            "GROUP BY c.path HAVING count(DISTINCT p.term) = %s LIMIT %s) AS f",
            (agent, gen, terms, len(set(terms)), enough),
        )
        if is_weightless((await cur.fetchone())[0], notes):
            out.add(w)
    return out


async def _stats(conn: Any, agent: str, gen: int) -> tuple[int, float]:
    """The generation's chunk count and mean length, as the sync keeps them (schema._M4); counted
    when there is no row (rows written by other means, such as a benchmark's COPY)."""
    row = await (await conn.execute(
        "SELECT chunks, total_len FROM memsift_stats WHERE agent_id = %s AND generation = %s", (agent, gen))).fetchone()
    if row is None:
        row = await (
            await conn.execute(
                "SELECT count(*), coalesce(sum(doc_len), 0) FROM memsift_chunks WHERE agent_id = %s AND generation = "
                "%s",
                (agent, gen),
            )
        ).fetchone()
    n, total = row
    return n, (total / n if n else 1.0)


def _tf_part(tf: int, dl: int, avgdl: float) -> float:
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))


async def _weighted_terms(conn: Any, agent: str, gen: int, terms: list[str], n: int,
                          known_df: dict[str, int] | None = None) -> tuple[list[str], list[float]]:
    """The terms a search ranks by and their IDF weights. Document counts are counted here unless
    `known_df` has them all (exact below COMMON_MATCHES, as `_bounded_df` counts them)."""
    if not terms:
        return [], []
    if known_df is not None and all(known_df.get(t, 0) < COMMON_MATCHES for t in terms):
        df = {t: known_df[t] for t in terms if known_df.get(t)}
    else:
        cur = await conn.execute(
            "SELECT term, count(*) FROM memsift_postings WHERE agent_id = %s AND generation = %s AND term = ANY(%s) "
            "GROUP BY term",
            (agent, gen, terms),
        )
        df = dict(await cur.fetchall())
    if n >= COMMON_TERM_MIN_CHUNKS and len(terms) > 1:
        kept = [t for t in terms if t in df and 2 * df[t] < n]
        terms = kept or terms  # nothing but common words: they are all the query has
    terms = [t for t in terms if t in df]
    return terms, [_idf(n, df[t]) for t in terms]


@dataclass(frozen=True)
class TermSums:
    """The statement that sums the query terms' BM25 parts per chunk, as (chunk, score) rows; with
    `cap`, each term over at most `cap` of its postings (the newest chunk numbers first)."""

    agent: str
    gen: int
    terms: list[str]
    weights: list[float]
    avgdl: float
    cap: int | None

    def sql(self, chunks: list[int] | None = None) -> tuple[str, tuple]:
        """The statement and its arguments; `chunks`: only these chunks' sums (the same sums, as a
        capped term counts only its capped postings)."""
        part = "sum(q.w * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.doc_len / %s))) AS score"
        head = (K1 + 1, K1, B, B, self.avgdl, self.terms, self.weights, self.agent, self.gen)
        only, more = ("AND p.chunk = ANY(%s) ", (chunks,)) if chunks is not None else ("", ())
        if self.cap is None:
            return (
                f"SELECT p.chunk, {part} FROM memsift_postings p JOIN unnest(%s::text[], %s::float8[]) AS q(term, w) "
                f"ON q.term = p.term WHERE p.agent_id = %s AND p.generation = %s {only}GROUP BY p.chunk",
                (*head, *more),
            )
        return (
            f"SELECT p.chunk, {part} FROM unnest(%s::text[], %s::float8[]) AS q(term, w) CROSS JOIN LATERAL "
            "(SELECT chunk, tf, doc_len FROM memsift_postings WHERE agent_id = %s AND generation = %s AND term = "
            "q.term "
            f"ORDER BY chunk DESC LIMIT %s) AS p WHERE true {only}GROUP BY p.chunk",
            (*head, self.cap, *more),
        )


async def _bounded_df(
    conn: Any, agent: str, gen: int, tokens: list[str], bound: int = COMMON_MATCHES
) -> dict[str, int]:
    """How many chunks hold each token, counted no further than `bound`; one statement for all
    of them (a round trip per token cost 2 ms each at a million chunks)."""
    if not tokens:
        return {}
    cur = await conn.execute(
        "SELECT t.term, (SELECT count(*) FROM (SELECT 1 FROM memsift_postings WHERE agent_id = %s AND generation = %s "
        "AND term = t.term LIMIT %s) AS m) FROM unnest(%s::text[]) AS t(term)", (agent, gen, bound, list(tokens)))
    return dict(await cur.fetchall())


def large_index_items(items: QueryItems, df: dict[str, int]) -> tuple[QueryItems, int | None]:
    """The rare terms and the phrases of rare words only; else the single words, each capped
    at COMMON_RANK_ROWS_MAX postings. Returns the items and the cap (None: uncapped)."""
    rare = [t for t in items.terms if df.get(t, 0) < COMMON_MATCHES]
    phrases = [p for p in items.phrases if all(df.get(t, 0) < COMMON_MATCHES for t in p)]
    if rare or phrases:
        return QueryItems(rare, phrases), None
    return QueryItems(items.terms, []), COMMON_RANK_ROWS_MAX


def _phrase_tf(tokens: tuple[str, ...], positions: dict[str, list[int]]) -> int:
    starts = set(positions[tokens[0]])
    for offset, tok in enumerate(tokens[1:], 1):
        starts &= {p - offset for p in positions[tok]}
    return len(starts)


async def _phrase_scores(
    conn: Any, agent: str, gen: int, phrases: list[tuple[str, ...]], n: int, avgdl: float
) -> dict[int, float]:
    """FTS5 phrase matching from the stored positions: the chunks holding every token, then the
    places where the tokens stand in order."""
    scores: dict[int, float] = defaultdict(float)
    for phrase in phrases:
        distinct = list(dict.fromkeys(phrase))
        cur = await conn.execute(
            "SELECT chunk, term, positions, doc_len FROM memsift_postings WHERE agent_id = %s AND generation = %s "
            "AND term = ANY(%s) AND chunk IN (SELECT chunk FROM memsift_postings WHERE agent_id = %s AND generation = "
            "%s "
            "AND term = ANY(%s) GROUP BY chunk HAVING count(*) = %s)",
            (agent, gen, distinct, agent, gen, distinct, len(distinct)),
        )
        by_chunk: dict[int, dict[str, list[int]]] = defaultdict(dict)
        lengths: dict[int, int] = {}
        for chunk, term, pos, dl in await cur.fetchall():
            by_chunk[chunk][term] = pos
            lengths[chunk] = dl
        tfs = {c: tf for c, pos in by_chunk.items() if (tf := _phrase_tf(phrase, pos))}
        if not tfs:
            continue
        idf = _idf(n, len(tfs))
        for chunk, tf in tfs.items():
            scores[chunk] += idf * _tf_part(tf, lengths[chunk], avgdl)
    return scores


async def _load(conn: Any, agent: str, gen: int, chunks: Sequence[int]) -> dict[int, tuple]:
    if not chunks:
        return {}
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM memsift_chunks WHERE agent_id = %s AND generation = %s AND chunk = ANY(%s)",
        (agent, gen, list(chunks)),
    )
    return {row[0]: row for row in await cur.fetchall()}


def _candidate(row: tuple, **scores: Any) -> Candidate:
    _chunk, cid, path, source, start, end, text, day, day_source = row
    return Candidate(chunk_id=cid, path=path, source=source, start_line=start, end_line=end, text=text,
                     day=day, day_source=day_source, **scores)


def _by_rank(row: tuple[int, float]) -> tuple[float, int]:
    return row[1], row[0]


async def _ranked_matches(conn: Any, agent: str, gen: int, sums: TermSums | None, phrases: dict[int, float],
                          limit: int, *, within: set[int] | None, prefer: set[int] | None, also: Sequence[str]
                          ) -> tuple[list[tuple[int, float]], list[tuple[int, float]], list[tuple[int, float]]]:
    """The query's matches (terms' sums plus phrases' scores, within `within`) ranked in the
    database, and only what the ranking takes sent back, as (chunk, FTS5 rank = -bm25): the best
    `limit`; the best 2 x `limit` of `prefer` (so the best `limit` not among the first are in
    them); and the matches among `also` (the vector side's chunk ids), scored on their own.
    Sending every match cost more than summing them at a million chunks, where a rare term is
    in up to 20,000 chunks; the sums are kept for a second pass only when `prefer` needs one."""
    if sums is None and not phrases:
        return [], [], []
    term_rows, term_args = (
        sums.sql() if sums is not None else ("SELECT NULL::bigint AS chunk, NULL::float8 AS score WHERE false", ())
    )
    args: list[Any] = [list(phrases), list(phrases.values()), *term_args]  # in the order the statement names them
    only = ""
    if within is not None:
        only = "WHERE chunk = ANY(%s)"
        args.append(sorted(within))
    # Chunks of phrases only: 0 + s, as the sums' rows + s: the same floats as adding them in Python.
    scored = (
        (
            f"SELECT coalesce(t.chunk, ph.chunk) AS chunk, coalesce(t.score, 0) + coalesce(ph.s, 0) AS s "
            f"FROM ({term_rows}) AS t FULL JOIN ph ON ph.chunk = t.chunk"
        )
        if phrases
        else f"SELECT chunk, score AS s FROM ({term_rows}) AS t"
    )
    sql = (f"WITH ph AS (SELECT * FROM unnest(%s::bigint[], %s::float8[]) AS ph(chunk, s)), "
           f"f AS {'MATERIALIZED' if prefer else 'NOT MATERIALIZED'} (SELECT * FROM ({scored}) AS m {only}) "
           "(SELECT 0, chunk, s FROM f ORDER BY s DESC, chunk LIMIT %s)")
    args.append(limit)
    if prefer:
        sql += " UNION ALL (SELECT 1, chunk, s FROM f WHERE chunk = ANY(%s) ORDER BY s DESC, chunk LIMIT %s)"
        args += [sorted(prefer), 2 * limit]
    found: tuple[list[tuple[int, float]], ...] = ([], [], [])
    for kind, chunk, score in await (await conn.execute(sql, args)).fetchall():
        found[kind].append((chunk, -float(score)))  # FTS5's rank: -bm25
    if also:
        chunks = [chunk_number(i) for i in also]
        cur = await conn.execute(
            "SELECT chunk FROM memsift_chunks WHERE agent_id = %s AND generation = %s AND chunk = ANY(%s) AND id = "
            "ANY(%s)",
            (agent, gen, chunks, list(also)),
        )
        mine = [c for (c,) in await cur.fetchall() if within is None or c in within]
        if mine and sums is not None:  # the same sums, over these chunks' postings only
            cur = await conn.execute(*sums.sql(mine))
            mine_scores = {chunk: float(score) for chunk, score in await cur.fetchall()}
        else:
            mine_scores = {}
        for chunk in mine:
            if chunk in mine_scores or chunk in phrases:
                found[2].append((chunk, -(mine_scores.get(chunk, 0.0) + phrases.get(chunk, 0.0))))
    for rows in found:
        rows.sort(key=_by_rank)
    return found[0], found[1], found[2]


async def keyword_candidates(
    conn: Any, agent: str, gen: int, items: QueryItems, limit: int, *, also: Sequence[str] = (),
    within: set[int] | None = None, prefer: set[int] | None = None, expansions: QueryItems | None = None,
) -> tuple[list[Candidate], dict[str, float]]:
    """BM25-ranked chunks; `also` (the vector side's chunk ids) get their BM25 score too when they
    match, as in backends/builtin/search.keyword_candidates; `within` (since/until) and `prefer`
    (the days a question names) as there. Returns candidates and raw ranks."""
    n, avgdl = await _stats(conn, agent, gen)
    if not n:
        return [], {}
    cap, known_df = None, None
    if n >= LARGE_INDEX_CHUNKS:  # only the rare terms are ranked (LARGE_INDEX_CHUNKS), no expansions, as on builtin
        tokens = list(dict.fromkeys([*items.terms, *(t for p in items.phrases for t in p)]))
        known_df = await _bounded_df(conn, agent, gen, tokens)
        items, cap = large_index_items(items, known_df)
        expansions = None
    terms, weights = await _weighted_terms(conn, agent, gen, items.terms, n, known_df)
    sums = TermSums(agent, gen, terms, weights, avgdl, cap) if terms else None
    phrases = await _phrase_scores(conn, agent, gen, items.phrases, n, avgdl)
    best, preferred, also_found = await _ranked_matches(conn, agent, gen, sums, phrases, limit, within=within,
                                                        prefer=prefer, also=also)
    rows = best
    if prefer:
        taken = {r for r, _ in rows}
        rows += [r for r in preferred if r[0] not in taken][:limit]
        rows.sort(key=_by_rank)
    extra: list[int] = []
    if rows and also_found:
        have = {r for r, _ in rows}
        more = [r for r in also_found if r[0] not in have]
        extra = [r for r, _ in more]
        rows += more
    expansion_rows: list[tuple[int, float]] = []
    # The expansions matched on their own, weighed below the question's words (keyword_scores).
    if expansions and (expansions.terms or expansions.phrases):
        terms, weights = await _weighted_terms(conn, agent, gen, expansions.terms, n)
        sums = TermSums(agent, gen, terms, weights, avgdl, None) if terms else None
        phrases = await _phrase_scores(conn, agent, gen, expansions.phrases, n, avgdl)
        expansion_rows = (
            await _ranked_matches(conn, agent, gen, sums, phrases, limit, within=within, prefer=None, also=())
        )[0]
    top = keyword_scores(rows, expansion_rows, limit=limit, extra=extra)
    loaded = await _load(conn, agent, gen, [c for c, _s, _r in top])
    out, ranks = [], {}
    for chunk, score, rank in top:
        if chunk in loaded:
            cand = _candidate(loaded[chunk], text_score=score, keyword_hit=True)
            out.append(cand)
            if rank is not None:
                ranks[cand.chunk_id] = rank
    return out, ranks


def hnsw_index_name(agent: str, dims: int, *, halves: bool | None = None) -> str:
    """The name of an agent's own HNSW index over its vectors of `dims` dimensions: a graph of the
    half copies (suffix `h`, what `indexer.ensure_hnsw` builds when they exist) or of the full
    vectors (`halves=False`: longer vectors, and the index schema 4 built)."""
    digest = hashlib.sha256(agent.encode()).hexdigest()[:12]
    halves = dims <= HALF_SCAN_MAX_DIMS if halves is None else halves
    return f"memsift_hnsw_{digest}_{dims}{'h' if halves else ''}"


def hnsw_index_names(agent: str, dims: int) -> tuple[str, ...]:
    """The agent's HNSW indexes a search may walk, the one `ensure_hnsw` builds first (a database
    that still has only the older graph of full vectors is searched through it until then)."""
    if dims <= HALF_SCAN_MAX_DIMS:
        return hnsw_index_name(agent, dims), hnsw_index_name(agent, dims, halves=False)
    return (hnsw_index_name(agent, dims),)


@dataclass(frozen=True)
class HnswWalk:
    """How a search walks an agent's HNSW index: its breadth (hnsw.ef_search) and which graph."""

    ef_search: int
    halves: bool


async def _nearest_by_halves(conn: Any, agent: str, gen: int, q: np.ndarray, limit: int, only: str,
                             chosen: list[list[int]]) -> list[Candidate]:
    """The exact nearest `limit`, found through the index of normalized half vectors (schema._M5):
    a half's distance is within HALF_ERROR of the exact one, so every chunk of the exact top
    `limit` lies within 2 x HALF_ERROR of the `limit`-th distance by halves. Those (the band, a few
    more than `limit`) are read with their full vectors and put in exact order. When the first
    `pool` by halves all lie in the band, the band may go on past them: asked again, four times wider."""
    from pgvector import HalfVector  # noqa: PLC0415 (the driver's extra: imported with it)

    pool = limit + HALF_POOL_MARGIN
    while True:
        cur = await conn.execute(
            "WITH s AS MATERIALIZED (SELECT chunk, embedding_half <=> %s AS hd FROM memsift_chunks "
            f"WHERE agent_id = %s AND generation = %s AND embedding_half IS NOT NULL AND vector_dims(embedding_half) "
            f"= %s {only}"
            "ORDER BY hd, chunk LIMIT %s), "
            "cut AS (SELECT coalesce((SELECT hd FROM s ORDER BY hd, chunk OFFSET %s LIMIT 1), 'Infinity') + %s AS hd) "
            f"SELECT {_COLUMNS}, 1 - d, n, widest, edge FROM (SELECT {_M_COLUMNS}, m.embedding <=> %s AS d, "
            "(SELECT count(*) FROM s) AS n, (SELECT max(hd) FROM s) AS widest, cut.hd AS edge "
            "FROM s JOIN cut ON s.hd <= cut.hd OR s.hd = 'NaN' JOIN memsift_chunks AS m "
            "ON m.agent_id = %s AND m.generation = %s AND m.chunk = s.chunk) AS r ORDER BY d, chunk LIMIT %s",
            (HalfVector(q), agent, gen, len(q), *chosen, pool, limit - 1, 2 * HALF_ERROR, q, agent, gen, limit),
        )
        rows = await cur.fetchall()
        if rows and rows[0][_NCOLS + 1] == pool and rows[0][_NCOLS + 2] <= rows[0][_NCOLS + 3]:
            pool *= 4
            continue
        return [_candidate(row[:_NCOLS], vector_score=float(row[_NCOLS]), vector_hit=True) for row in rows]


async def vector_candidates(conn: Any, agent: str, gen: int, query: np.ndarray, limit: int,
                            within: set[int] | None = None, *, hnsw: HnswWalk | None = None) -> list[Candidate]:
    """The agent's nearest chunks by cosine; `within`: only these. Exact (see the module docstring),
    except for an agent with its own HNSW index (`hnsw` given: see `indexer.ensure_hnsw`), walked
    with pgvector's iterative scan (the generation filter cannot starve it) and put back in exact
    order by the full vectors."""
    q = np.asarray(query, dtype=np.float32)
    if not np.any(q) or (within is not None and not within):
        return []
    if hnsw is not None and within is None:
        return await _nearest_by_hnsw(conn, agent, gen, q, limit, hnsw)
    only = "AND chunk = ANY(%s) " if within is not None else ""
    chosen = [sorted(within)] if within is not None else []
    if len(q) <= HALF_SCAN_MAX_DIMS:
        return await _nearest_by_halves(conn, agent, gen, q, limit, only, chosen)
    # Longer vectors: the scan sorts (chunk, distance) pairs only; the nearest rows' columns are read
    # after. Carrying every column through the sort cost a third more at 10,000 chunks.
    cur = await conn.execute(
        f"SELECT {_M_COLUMNS}, 1 - s.d FROM (SELECT chunk, embedding <=> %s AS d FROM memsift_chunks "
        f"WHERE agent_id = %s AND generation = %s AND embedding IS NOT NULL AND vector_dims(embedding) = %s {only}"
        "ORDER BY d, chunk LIMIT %s) AS s JOIN memsift_chunks AS m ON m.agent_id = %s AND m.generation = %s AND "
        "m.chunk = s.chunk "
        "ORDER BY s.d, s.chunk",
        (q, agent, gen, len(q), *chosen, limit, agent, gen),
    )
    return [_candidate(row[:_NCOLS], vector_score=float(row[_NCOLS]), vector_hit=True) for row in await cur.fetchall()]


async def _nearest_by_hnsw(
    conn: Any, agent: str, gen: int, q: np.ndarray, limit: int, walk: HnswWalk
) -> list[Candidate]:
    """The nearest by the agent's own HNSW graph. A graph of the half copies (normalized: their
    inner product is the cosine) is asked for HALF_POOL_MARGIN more than `limit`, so that the
    halves' rounding cannot push one of the nearest out; all are put in exact order by the full
    vectors, read from the rows the walk fetches anyway (for the generation)."""
    dims = len(q)  # an int: part of the SQL, so the planner matches the partial index's predicate
    await conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        (str(max(walk.ef_search, limit + HALF_POOL_MARGIN)),),
    )
    if walk.halves:
        from pgvector import HalfVector  # noqa: PLC0415 (the driver's extra: imported with it)

        cur = await conn.execute(
            f"SELECT {_COLUMNS}, 1 - (embedding <=> %s) FROM memsift_chunks "
            f"WHERE agent_id = %s AND vector_dims(embedding_half) = {dims} AND generation = %s "
            f"ORDER BY embedding_half::halfvec({dims}) <#> %s LIMIT %s",
            (q, agent, gen, HalfVector(q), limit + HALF_POOL_MARGIN),
        )
    else:
        cur = await conn.execute(
            f"SELECT {_COLUMNS}, 1 - (embedding::vector({dims}) <=> %s) FROM memsift_chunks "
            f"WHERE agent_id = %s AND vector_dims(embedding) = {dims} AND generation = %s "
            f"ORDER BY embedding::vector({dims}) <=> %s LIMIT %s",
            (q, agent, gen, q, limit),
        )
    found = [_candidate(row[:_NCOLS], vector_score=float(row[_NCOLS]), vector_hit=True) for row in await cur.fetchall()]
    return sorted(found, key=lambda c: (-(c.vector_score or 0.0), c.chunk_id))[:limit]  # relaxed order: exact again


# A chunk is in a window by its day, or by any other day its lines speak of (`days`, multi-day chunks only).
_IN_WINDOW = ("(day BETWEEN %s AND %s OR (days IS NOT NULL AND EXISTS "
              "(SELECT 1 FROM unnest(days) AS d WHERE d BETWEEN %s AND %s)))")


async def window_candidates(conn: Any, agent: str, gen: int, windows: Sequence[TimeWindow], per_day: int,
                            cap: int = 5000) -> list[Candidate]:
    """A time-only question's notes: the first `per_day` chunks of each day of its windows (as
    backends/builtin/search.window_candidates; engine/search/time_only.py orders them)."""
    out: list[Candidate] = []
    seen: set[str] = set()
    for w in windows:
        lo, hi = w.day_range()
        cur = await conn.execute(
            f"SELECT {_COLUMNS} FROM (SELECT *, row_number() OVER (PARTITION BY day ORDER BY path, start_line) AS n "
            f"FROM memsift_chunks WHERE agent_id = %s AND generation = %s AND {_IN_WINDOW}) AS w WHERE n <= %s "
            "ORDER BY day, path, start_line LIMIT %s", (agent, gen, lo, hi, lo, hi, per_day, cap))
        for row in await cur.fetchall():
            c = _candidate(row)
            if c.chunk_id not in seen:
                seen.add(c.chunk_id)
                out.append(c)
    return out


async def day_chunks(
    conn: Any, agent: str, gen: int, windows: Sequence[TimeWindow], *, undated_by_mtime: bool = False
) -> set[int]:
    """Chunks whose stated day lies in any window; with `undated_by_mtime` (since/until), also
    undated chunks whose file was modified in it (as backends/builtin/search.day_rowids)."""
    out: set[int] = set()
    for w in windows:
        lo, hi = w.day_range()
        cur = await conn.execute(
            f"SELECT chunk FROM memsift_chunks WHERE agent_id = %s AND generation = %s AND {_IN_WINDOW}",
            (agent, gen, lo, hi, lo, hi),
        )
        out.update(r for (r,) in await cur.fetchall())
        if undated_by_mtime:
            lo_ns, hi_ns = w.mtime_ns_range()
            cur = await conn.execute(
                "SELECT c.chunk FROM memsift_chunks c JOIN memsift_files f ON f.agent_id = c.agent_id AND "
                "f.generation = c.generation "
                "AND f.path = c.path WHERE c.agent_id = %s AND c.generation = %s AND c.day IS NULL AND f.mtime_ns "
                "BETWEEN %s AND %s",
                (agent, gen, lo_ns, hi_ns),
            )
            out.update(r for (r,) in await cur.fetchall())
    return out


async def complete_vector_scores(
    conn: Any, agent: str, gen: int, keyword: list[Candidate], vector: list[Candidate], query: np.ndarray
) -> None:
    """Keyword hits the vector side did not return get their real cosine instead of 0 (as builtin)."""
    seen = {c.chunk_id for c in vector}
    missing = {c.chunk_id: c for c in keyword if c.chunk_id not in seen}
    if not missing:
        return
    q = np.asarray(query, dtype=np.float32)
    cur = await conn.execute(
        "SELECT id, 1 - (embedding <=> %s) FROM memsift_chunks WHERE agent_id = %s AND generation = %s AND chunk = "
        "ANY(%s) "
        "AND id = ANY(%s) AND embedding IS NOT NULL AND vector_dims(embedding) = %s",
        (q, agent, gen, [chunk_number(i) for i in missing], list(missing), len(q)),
    )
    for cid, sim in await cur.fetchall():
        if sim is not None and math.isfinite(sim):
            missing[cid].vector_score = float(sim)
            missing[cid].vector_hit = True


async def file_times(conn: Any, agent: str, gen: int, paths: set[str]) -> dict[str, float]:
    """Indexed mtimes (seconds) of these files, for the pipeline's decay and since/until."""
    if not paths:
        return {}
    cur = await conn.execute(
        "SELECT path, mtime_ns FROM memsift_files WHERE agent_id = %s AND generation = %s AND path = ANY(%s)",
        (agent, gen, list(paths)),
    )
    return {p: m / 1e9 for p, m in await cur.fetchall()}


@dataclass(frozen=True)
class Days:
    """Postgres's `Selection` (engine/search/indexed.py): the chunks of some days, and whether they
    are a since/until filter (searched through the agent's HNSW index when it has one) or a time
    the question names (its chunks scanned exactly)."""

    rows: set[int]
    is_filter: bool


class PgCandidates:
    """Postgres's answers to the store seam (engine/search/indexed.CandidateStore), as coroutines
    over one read-only snapshot (one generation): `search_indexed(..., run=awaited)`."""

    def __init__(self, conn: Any, agent: str, gen: int, tokenizer: str,
                 hnsw: Callable[[int], Awaitable[HnswWalk | None]]) -> None:
        self.conn, self.agent, self.gen, self.tokenizer, self.hnsw = conn, agent, gen, tokenizer, hnsw

    async def select_days(self, windows: Sequence[TimeWindow], *, undated_by_mtime: bool) -> Days:
        rows = await day_chunks(self.conn, self.agent, self.gen, windows, undated_by_mtime=undated_by_mtime)
        return Days(rows, is_filter=undated_by_mtime)

    async def keyword(self, plan: FtsPlan, limit: int, *, within: Days | None, prefer: Days | None,
                      also: Sequence[str]) -> tuple[list[Candidate], dict[str, float]]:
        return await keyword_candidates(self.conn, self.agent, self.gen, query_items(plan, self.tokenizer), limit,
                                        also=also, within=within.rows if within else None,
                                        prefer=prefer.rows if prefer else None,
                                        expansions=expansion_items(plan, self.tokenizer))

    async def vector(self, qvec: np.ndarray, limit: int, *, within: Days | None) -> list[Candidate]:
        if within is not None and not within.is_filter:  # a time the question names: its chunks, exactly
            return (
                await vector_candidates(self.conn, self.agent, self.gen, qvec, limit, within.rows)
                if within.rows
                else []
            )
        walk = await self.hnsw(len(qvec))
        return await vector_candidates(
            self.conn, self.agent, self.gen, qvec, limit, within.rows if within else None, hnsw=walk
        )

    async def complete_vector_scores(self, keyword: list[Candidate], vector: list[Candidate], qvec: np.ndarray) -> None:
        await complete_vector_scores(self.conn, self.agent, self.gen, keyword, vector, qvec)

    async def weightless(self, word: str) -> bool:
        return word in await weightless_words(self.conn, self.agent, self.gen, [word], self.tokenizer)

    async def window_rows(self, windows: Sequence[TimeWindow], per_day: int) -> list[Candidate]:
        return await window_candidates(self.conn, self.agent, self.gen, windows, per_day)

    async def file_times(self, paths: set[str]) -> dict[str, float]:
        return await file_times(self.conn, self.agent, self.gen, paths)
