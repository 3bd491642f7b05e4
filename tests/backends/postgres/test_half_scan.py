"""The exact vector scan reads each agent's vectors from an index of half-precision copies
(schema._M5), then puts the nearest in exact order by the full vectors: the answer must be the
exact scan's, row for row, with and without a day filter; vectors too long for the index keep the
scan of the rows; an existing database gets the copies when it upgrades."""

from __future__ import annotations

import random

import anyio
import numpy as np
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings, write_word_notes

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.backends.postgres.connect import connect_once  # noqa: E402
from memsift.backends.postgres.schema import MIGRATIONS, SCHEMA_VERSION, migrate  # noqa: E402
from memsift.backends.postgres.search import vector_candidates  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402

WORDS = [f"w{i}" for i in range(200)]


def _workspace(root, files: int):
    rng = random.Random(3)
    return write_word_notes(root, files, lambda: rng.choice(WORDS), 10)


def _settings(tmp_path, ws, dsn):
    return make_settings(tmp_path, ws, {"sync": {"onSearch": False}},
                         memory={"backend": "postgres", "postgres": {"dsn": dsn, "hnswAbove": 0}})


async def _exact(conn, gen: int, q: np.ndarray, limit: int, within: list[int] | None = None) -> list[tuple[str, float]]:
    """The scan of the rows by full vectors, as the search read them before the copies."""
    only = "AND chunk = ANY(%s) " if within is not None else ""
    cur = await conn.execute(
        f"SELECT id, 1 - (embedding <=> %s) AS s FROM memsift_chunks WHERE agent_id = 'main' AND generation = %s {only}"
        "AND embedding IS NOT NULL ORDER BY embedding <=> %s, chunk LIMIT %s",
        (q, gen, *([within] if within is not None else []), q, limit))
    return [(cid, float(s)) for cid, s in await cur.fetchall()]


@pytest.mark.parametrize("dims", [64, 1536])
def test_the_scan_by_half_vectors_answers_as_the_exact_scan(tmp_path, pg_dsn, dims):
    provider = FakeEmbeddingProvider(dims=dims)
    settings = _settings(tmp_path, _workspace(tmp_path / "ws", 300), pg_dsn)

    async def run() -> None:
        async with PostgresSearchManager(settings, provider=provider) as m:
            await m.sync()
            conn = await connect_once(m.dsns.write, m.cfg)
            try:
                gen, halves, vectors = await (
                    await conn.execute(
                        "SELECT a.generation, count(c.embedding_half), count(c.embedding) FROM memsift_agents a JOIN "
                        "memsift_chunks c "
                        "ON c.agent_id = a.agent_id AND c.generation = a.generation WHERE a.agent_id = 'main' GROUP "
                        "BY a.generation"
                    )
                ).fetchone()
                assert vectors == 300
                assert halves == (300 if dims <= 1024 else 0)  # too long for an index entry: the rows are scanned
                chunks = [
                    r[0]
                    for r in await (
                        await conn.execute(
                            "SELECT chunk FROM memsift_chunks WHERE agent_id = 'main' AND generation = %s ORDER BY "
                            "chunk",
                            (gen,),
                        )
                    ).fetchall()
                ]
                rng = random.Random(11)
                for k in range(12):
                    q = (await provider.embed_query(" ".join(rng.choice(WORDS) for _ in range(3)))).astype(np.float32)
                    within = sorted(rng.sample(chunks, 80)) if k % 3 == 0 else None
                    async with conn.transaction():
                        found = await vector_candidates(conn, "main", gen, q, 10, set(within) if within else None)
                        exact = await _exact(conn, gen, q, 10, within)
                    assert [c.chunk_id for c in found] == [cid for cid, _ in exact]
                    assert [c.vector_score for c in found] == pytest.approx([s for _, s in exact], abs=1e-9)
            finally:
                await conn.close()
            answer = await m.search("w1 w2", mode="vector", max_results=5, min_score=0)
            assert len(answer.results) == 5 and answer.mode == "vector-only"

    anyio.run(run)


def test_an_existing_database_gets_the_half_vectors_when_it_upgrades(tmp_path, pg_dsn):
    async def run() -> None:
        conn = await connect_once(pg_dsn, _settings(tmp_path, tmp_path, pg_dsn).memory.postgres, vectors=False)
        try:
            async with conn.transaction():  # the schema as the release before wrote it, and a chunk in it
                for step in MIGRATIONS[:4]:
                    await conn.execute(step)
                await conn.execute(
                    "CREATE TABLE memsift_schema(id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL, "
                    "updated_at timestamptz NOT NULL DEFAULT now())"
                )
                await conn.execute("INSERT INTO memsift_schema(id, version) VALUES (1, 4)")
                await conn.execute(
                    "INSERT INTO memsift_chunks(agent_id, generation, chunk, id, path, start_line, end_line, hash, "
                    "model, text, "
                    "doc_len, embedding, updated_at) VALUES ('main', 1, 7, 'c7', 'MEMORY.md', 1, 1, 'h', 'm', 'x', 1, "
                    "'[3,4]', 0)"
                )
            assert await migrate(conn) == SCHEMA_VERSION
            row = await (
                await conn.execute("SELECT embedding_half::text FROM memsift_chunks WHERE chunk = 7")
            ).fetchone()
            # normalized (cosine ignores the length, and a half cannot overflow), to a half's precision
            assert [float(x) for x in row[0].strip("[]").split(",")] == pytest.approx([0.6, 0.8], abs=1e-3)
        finally:
            await conn.close()

    anyio.run(run)


def test_chunks_the_halves_cannot_tell_apart_are_still_put_in_exact_order(tmp_path, pg_dsn):
    """A hundred vectors whose halves are one and the same (they differ below a half's precision),
    numbered against their exact order: the first `limit + margin` by halves are the wrong ones, so
    the band must be widened until it holds them all."""
    async def run() -> None:
        conn = await connect_once(pg_dsn, _settings(tmp_path, tmp_path, pg_dsn).memory.postgres, vectors=False)
        try:
            await migrate(conn)
            from pgvector.psycopg import register_vector_async  # noqa: PLC0415

            await register_vector_async(conn)
            q = np.array([1.0, 0, 0, 0], dtype=np.float32)
            async with conn.transaction():
                for i in range(100):  # farther from q as i grows; numbered the other way round
                    v = np.array([1.0, 0.5 + i * 2e-6, 0, 0], dtype=np.float32)
                    await conn.execute(
                        "INSERT INTO memsift_chunks(agent_id, generation, chunk, id, path, start_line, end_line, "
                        "hash, model, "
                        "text, doc_len, embedding, updated_at) VALUES ('main', 1, %s, %s, 'MEMORY.md', 1, 1, 'h', "
                        "'m', 'x', 1, %s, 0)",
                        (1000 - i, f"c{i:03d}", v),
                    )
            halves = (
                await (
                    await conn.execute(
                        "SELECT count(DISTINCT embedding_half::text) FROM memsift_chunks WHERE agent_id = 'main'"
                    )
                ).fetchone()
            )[0]
            assert halves <= 3  # the precondition: the halves do not tell these apart
            async with conn.transaction():
                found = await vector_candidates(conn, "main", 1, q, 10)
                exact = await _exact(conn, 1, q, 10)
            assert [c.chunk_id for c in found] == [cid for cid, _ in exact] == [f"c{i:03d}" for i in range(10)]
        finally:
            await conn.close()

    anyio.run(run)
