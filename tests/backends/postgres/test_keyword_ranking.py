"""The keyword side ranks its matches in the database and sends back only what the ranking
takes (the best, the best of the days a question names, the vector side's chunks): its answer
must be the one that ranking every match in Python gives, chunk for chunk and score for score,
with phrases, a since/until filter, named days and the vector side's chunks. And a topic word's
"weightless" check, which counts a word's notes only when its postings could be that many, must
decide as counting them always does."""

from __future__ import annotations

import contextlib
import heapq
import random

import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings, write_word_notes

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.postgres import PostgresSearchManager, search  # noqa: E402
from memsift.backends.postgres.connect import connect_once  # noqa: E402
from memsift.engine.search.ranking import bm25_relative_scores  # noqa: E402
from memsift.engine.search.terms import QueryItems  # noqa: E402
from memsift.engine.search.time_only import is_weightless  # noqa: E402

# A skewed vocabulary: a few words in most notes, most words in few.
WORDS = [f"w{i}" for i in range(150)]


def _workspace(root, files: int):
    rng = random.Random(5)
    return write_word_notes(root, files, lambda: WORDS[int(rng.random() ** 2 * len(WORDS))], 14)


async def _every_match(conn, gen: int, items: QueryItems, n: int, avgdl: float) -> dict[int, float]:
    """Every matching chunk's BM25, summed by the database, phrases added in Python (as the search did)."""
    terms, weights = await search._weighted_terms(conn, "main", gen, items.terms, n)
    scores: dict[int, float] = {}
    if terms:
        cur = await conn.execute(*search.TermSums("main", gen, terms, weights, avgdl, None).sql())
        scores = {chunk: float(s) for chunk, s in await cur.fetchall()}
    for chunk, s in (await search._phrase_scores(conn, "main", gen, items.phrases, n, avgdl)).items():
        scores[chunk] = scores.get(chunk, 0.0) + s
    return scores


def _by_rank(row):
    return row[1], row[0]


async def _reference(conn, gen: int, items: QueryItems, limit: int, *, within, prefer, also_chunks) -> dict[int, float]:
    """The keyword side's (chunk -> score) as ranking every match in Python gives it."""
    n, avgdl = await search._stats(conn, "main", gen)
    found = [
        (c, -s) for c, s in (await _every_match(conn, gen, items, n, avgdl)).items() if within is None or c in within
    ]
    rows = heapq.nsmallest(limit, found, key=_by_rank)
    if prefer:
        taken = {r for r, _ in rows}
        rows += heapq.nsmallest(limit, (r for r in found if r[0] in prefer and r[0] not in taken), key=_by_rank)
        rows.sort(key=_by_rank)
    extra = set()
    if rows and also_chunks:
        more = sorted((r for r in found if r[0] in set(also_chunks) - {c for c, _ in rows}), key=_by_rank)
        extra = {c for c, _ in more}
        rows += more
    scored = {c: s for (c, _), s in zip(rows, bm25_relative_scores([r for _, r in rows]))}
    top = heapq.nlargest(limit, ((c, s) for c, s in scored.items() if c not in extra), key=lambda kv: kv[1])
    return {c: s for c, s in top} | {c: scored[c] for c in extra}


@contextlib.asynccontextmanager
async def _synced(tmp_path, pg_dsn, files: int):
    """A workspace of `files` notes synced into the server: a connection and the live generation."""
    settings = make_settings(
        tmp_path,
        _workspace(tmp_path / "ws", files),
        {"provider": "none", "sync": {"onSearch": False}},
        memory={"backend": "postgres", "postgres": {"dsn": pg_dsn}},
    )
    async with PostgresSearchManager(settings) as m:
        await m.sync()
        conn = await connect_once(m.dsns.write, m.cfg)
        try:
            gen = (
                await (await conn.execute("SELECT generation FROM memsift_agents WHERE agent_id = 'main'")).fetchone()
            )[0]
            yield conn, gen
        finally:
            await conn.close()


def test_ranking_in_the_database_answers_as_ranking_every_match(tmp_path, pg_dsn):
    async def run() -> None:
        async with _synced(tmp_path, pg_dsn, 400) as (conn, gen):
            rows = await (
                await conn.execute(
                    "SELECT chunk, id FROM memsift_chunks WHERE agent_id = 'main' AND generation = %s", (gen,)
                )
            ).fetchall()
            ids = {chunk: cid for chunk, cid in rows}
            chunks = sorted(ids)
            rng = random.Random(9)
            compared = 0
            for case in range(40):
                terms = [rng.choice(WORDS[:60]) for _ in range(rng.randint(1, 4))]
                phrases = [tuple(rng.choice(WORDS[:20]) for _ in range(2))] if case % 3 == 0 else []
                items = QueryItems(list(dict.fromkeys(terms)), phrases)
                within = set(rng.sample(chunks, 150)) if case % 4 == 1 else None
                prefer = set(rng.sample(chunks, 60)) if case % 4 == 2 else None
                also = [ids[c] for c in rng.sample(chunks, 12)] if case % 2 == 0 else []
                limit = rng.choice([5, 20])
                async with conn.transaction():
                    out, _ranks = await search.keyword_candidates(conn, "main", gen, items, limit, also=also,
                                                                  within=within, prefer=prefer)
                    want = await _reference(conn, gen, items, limit, within=within, prefer=prefer,
                                            also_chunks=[search.chunk_number(i) for i in also])
                got = {search.chunk_number(c.chunk_id): c.text_score for c in out}
                assert got == want, (case, items)
                compared += len(got)
            assert compared > 200  # the cases found something to compare

    anyio.run(run)


def test_the_weightless_check_decides_as_counting_every_note(tmp_path, pg_dsn):
    async def run() -> None:
        async with _synced(tmp_path, pg_dsn, 200) as (conn, gen):
            notes = (
                await (await conn.execute("SELECT count(*) FROM memsift_files WHERE agent_id = 'main'")).fetchone()
            )[0]
            words = [*WORDS[:40], "absent"]
            fast = await search.weightless_words(conn, "main", gen, words)
            counted = set()
            for w in words:
                found = (
                    await (
                        await conn.execute(
                            "SELECT count(DISTINCT c.path) FROM memsift_postings p JOIN memsift_chunks c ON "
                            "c.agent_id = p.agent_id "
                            "AND c.generation = p.generation AND c.chunk = p.chunk WHERE p.agent_id = 'main' AND "
                            "p.generation = %s "
                            "AND p.term = %s",
                            (gen, w),
                        )
                    ).fetchone()
                )[0]
                if is_weightless(found, notes):
                    counted.add(w)
            assert fast == counted
            assert "absent" in fast and WORDS[0] in fast  # in no note; in most of them
            assert any(w not in fast for w in words)  # and topic words are told apart

    anyio.run(run)
