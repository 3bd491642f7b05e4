"""Large agents get an HNSW index of their own: built by the sync once an agent passes
`memory.postgres.hnswAbove` vectors, used by its searches with pgvector's iterative scan, near the
exact scan (recall measured against it, never assumed); smaller agents keep the exact scan."""

from __future__ import annotations

import random

import anyio
import numpy as np
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from pgvector import HalfVector  # noqa: E402

from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.backends.postgres.connect import cached_hnsw_names, connect_once, forget_hnsw_names  # noqa: E402
from memsift.backends.postgres.search import HnswWalk, hnsw_index_name, vector_candidates  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402

WORDS = [f"w{i}" for i in range(300)]


def _workspace(root, files: int, seed: int):
    rng = random.Random(seed)
    (root / "memory").mkdir(parents=True)
    for i in range(files):
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        (root / "memory" / f"2026-01-{i:04d}.md").write_text(f"- {text}\n")
    return root


def _settings(tmp_path, ws, dsn, agent, above):
    raw_pg = {"dsn": dsn, "hnswAbove": above, "hnswEfSearch": 80}
    return make_settings(
        tmp_path,
        ws,
        {"sync": {"onSearch": False}},
        memory={"backend": "postgres", "postgres": raw_pg},
        agents={"list": [{"id": agent, "default": True}]},
    )


def _big_and_small(tmp_path, pg_dsn, small_files: int):
    """An agent past hnswAbove (400 notes over 300) and one below it, in one database."""
    big = _settings(tmp_path / "big", _workspace(tmp_path / "ws-big", 400, 1), pg_dsn, "big", above=300)
    small = _settings(tmp_path / "small", _workspace(tmp_path / "ws-small", small_files, 2), pg_dsn, "small", above=300)
    return big, small


def test_a_large_agent_is_searched_through_its_own_hnsw_index_near_exactly(tmp_path, pg_dsn):
    provider = FakeEmbeddingProvider(dims=64)
    big, small = _big_and_small(tmp_path, pg_dsn, 100)

    async def run() -> None:
        async with (
            PostgresSearchManager(big, provider=provider) as b,
            PostgresSearchManager(small, provider=provider) as s,
        ):
            await b.sync()
            await s.sync()
            conn = await connect_once(b.dsns.write, b.cfg)
            try:
                names = {
                    r[0]
                    for r in await (
                        await conn.execute(
                            "SELECT indexname FROM pg_indexes WHERE tablename = 'memsift_chunks' AND indexname LIKE "
                            "'memsift_hnsw_%%'"
                        )
                    ).fetchall()
                }
                assert names == {hnsw_index_name("big", 64)}  # the small agent has none
                gen = (
                    await (
                        await conn.execute("SELECT generation FROM memsift_agents WHERE agent_id = 'big'")
                    ).fetchone()
                )[0]
                rng = random.Random(7)
                recalls = []
                for _ in range(20):
                    q = (await provider.embed_query(" ".join(rng.choice(WORDS) for _ in range(4)))).astype(np.float32)
                    async with conn.transaction():
                        exact = await vector_candidates(conn, "big", gen, q, 10)
                        approx = await vector_candidates(conn, "big", gen, q, 10, hnsw=HnswWalk(80, halves=True))
                        plan = "\n".join(
                            r[0]
                            for r in await (
                                await conn.execute(
                                    "EXPLAIN SELECT chunk FROM memsift_chunks WHERE agent_id = 'big' AND "
                                    "vector_dims(embedding_half) = 64 "
                                    "AND generation = %s ORDER BY embedding_half::halfvec(64) <#> %s LIMIT 10",
                                    (gen, HalfVector(q)),
                                )
                            ).fetchall()
                        )
                    assert hnsw_index_name("big", 64) in plan
                    assert len(approx) == 10
                    # Recall against the exact scan, ties at its cut counted as found (bag-of-words vectors tie often).
                    cut = exact[-1].vector_score - 1e-6
                    recalls.append(sum(1 for c in approx if c.vector_score >= cut) / 10)
                    scores = [c.vector_score for c in approx]
                    assert scores == sorted(scores, reverse=True)  # put back in exact order
                assert sum(recalls) / len(recalls) >= 0.95, recalls
            finally:
                await conn.close()
            # Through the manager: the large agent's searches take the index, the answers stay whole.
            answer = await b.search("w1 w2 w3", mode="vector", max_results=5, min_score=0)
            assert len(answer.results) == 5 and b._hnsw[64][0] == hnsw_index_name("big", 64)
            assert len((await s.search("w1 w2 w3", mode="vector", max_results=5, min_score=0)).results) == 5
            assert s._hnsw[64][0] is None
            # A rebuild writes a new generation into the same index; searches see only the live one.
            report = await b.sync(force=True)
            assert report.full_reindex
            again = await b.search("w1 w2 w3", mode="vector", max_results=5, min_score=0)
            assert [h.path for h in again.results] == [h.path for h in answer.results]

    anyio.run(run)


def test_the_index_listing_is_shared_by_every_agent_of_the_process(tmp_path, pg_dsn):
    """A gateway's new manager (another agent, or the same one again) finds whether its agent has
    an HNSW index in the listing the process already read: no catalog query per agent, and none
    again after a sync. An index this process's sync builds is added to the listing at once."""
    provider = FakeEmbeddingProvider(dims=64)
    big, small = _big_and_small(tmp_path, pg_dsn, 50)

    async def run() -> None:
        async with (
            PostgresSearchManager(big, provider=provider) as b,
            PostgresSearchManager(small, provider=provider) as s,
        ):
            await s.sync()
            await s.search("w1 w2", mode="vector", max_results=3, min_score=0)  # listed: no index yet
            assert cached_hnsw_names(s.dsns.write, 60) == frozenset() and s._hnsw[64][0] is None
            await b.sync()  # builds big's index: added to the listing
            listed = cached_hnsw_names(b.dsns.write, 60)
            assert listed == {hnsw_index_name("big", 64)}
            await b.search("w1 w2", mode="vector", max_results=3, min_score=0)
            assert b._hnsw[64][0] == hnsw_index_name("big", 64)
            await s.search("w1 w2", mode="vector", max_results=3, min_score=0)
            async with PostgresSearchManager(big, provider=provider) as b2:  # a second manager of the same agent
                assert len((await b2.search("w1 w2", mode="vector", max_results=3, min_score=0)).results) == 3
                assert b2._hnsw[64][0] == hnsw_index_name("big", 64)
            assert s._hnsw[64][0] is None
            assert cached_hnsw_names(b.dsns.write, 60) is listed  # the same listing: not read again per agent

    anyio.run(run)


def test_an_older_graph_of_full_vectors_is_walked_until_the_sync_replaces_it(tmp_path, pg_dsn):
    """A database whose large agent has only the graph an earlier version built (of full vectors)
    is searched through it, right (a search's own sync leaves it); the next other sync builds the
    graph of halves and drops the older one, and searches walk the new graph from then on."""
    provider = FakeEmbeddingProvider(dims=64)
    big, _small = _big_and_small(tmp_path, pg_dsn, 10)
    older = hnsw_index_name("big", 64, halves=False)

    async def indexes(conn) -> set[str]:
        return {
            r[0]
            for r in await (
                await conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'memsift_chunks' AND indexname LIKE "
                    "'memsift_hnsw_%%'"
                )
            ).fetchall()
        }

    async def run() -> None:
        async with PostgresSearchManager(big, provider=provider) as b:
            await b.sync()
            conn = await connect_once(b.dsns.write, b.cfg)
            try:  # as an earlier version left it: the graph of full vectors only
                await conn.execute(f"DROP INDEX {hnsw_index_name('big', 64)}")
                await conn.execute(
                    f"CREATE INDEX {older} ON memsift_chunks USING hnsw ((embedding::vector(64)) vector_cosine_ops) "
                    "WHERE agent_id = 'big' AND vector_dims(embedding) = 64"
                )
                await conn.commit()
                forget_hnsw_names(b.dsns.write)  # the listing this process read before is stale now
                assert await indexes(conn) == {older}
                async with PostgresSearchManager(big, provider=provider) as first:
                    exact = await first.search("w1 w2 w3", mode="vector", max_results=5, min_score=0)
                    assert await indexes(conn) == {older}  # the search's own sync does not wait for a new graph
                    assert first._hnsw[64][0] == older and len(exact.results) == 5
                    await first.sync(force=True)  # builds the halves' graph, drops the older
                    assert await indexes(conn) == {hnsw_index_name("big", 64)}
                    again = await first.search("w1 w2 w3", mode="vector", max_results=5, min_score=0)
                    assert first._hnsw[64][0] == hnsw_index_name("big", 64)
                    assert [h.path for h in again.results] == [h.path for h in exact.results]
            finally:
                await conn.close()

    anyio.run(run)
