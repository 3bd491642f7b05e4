"""One million chunks on the builtin backend: the keyword-only index, and hybrid search over
synthetic vectors.

    python contrib/bench/million.py [--files 530000] [--skip-build]

1. The workspace: `synthetic.build_daily_logs`, 530,000 daily logs (about 1.9 chunks each: 1M chunks).
2. Keyword-only build (no embedding provider), timed in a process of its own (scale_worker.py):
   seconds, index size on disk, peak memory.
3. Vectors: embedding 1M chunks with the local model would take hours here, so the chunks get
   synthetic vectors instead: each is a mix of two real embeddings (the local model's vectors of
   4,000 of the workspace's own chunks) plus a little noise, normalised, so they keep the shape of
   the model's space (all in one cone, clustered) rather than random directions. They are
   written into a copy of the keyword index, which then carries the local model's fingerprint.
4. Search in process, as a long-running host does (one manager, kept open): keyword, vector and
   hybrid p50/p95 over 40 queries × 3 rounds, the query embedded by the real local model each
   time; the first vector search's load of the codes; sqlite-vec's full scan (the path before
   this change) on the same index; and recall@10 of the vector side against an exact scan of
   all the vectors.

Prints one JSON document; run.py stores it under "million".
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from metrics import percentile  # noqa: E402
from quality import local_provider, settings_for  # noqa: E402
from qmdcli import run_measured  # noqa: E402
from synthetic import build_daily_logs, sample_queries  # noqa: E402

REAL_SAMPLE = 4000
ROUNDS = 3


def _index_keyword(ws: Path, state: Path, say: Callable[[str], None]) -> dict[str, Any]:
    shutil.rmtree(state / "fts", ignore_errors=True)
    run = run_measured(
        [sys.executable, str(HERE / "scale_worker.py"), "index", str(ws), str(state), "fts"], timeout=6 * 3600
    )
    if run.rc != 0:
        raise RuntimeError(f"keyword-only index failed: {run.stderr[-1500:]}")
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    figures["peak_rss_mb"] = run.peak_rss_mb
    say(f"  keyword-only index: {figures['chunks']:,} chunks in {figures['seconds']:.0f} s "
        f"({figures['chunks_per_s']:.0f} chunks/s), {figures['index_mb']:.0f} MB, {run.peak_rss_mb:.0f} MB peak")
    return figures


def _real_vectors(conn: Any, n: int) -> np.ndarray:
    provider = local_provider()
    texts = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY rowid LIMIT ?", (n,))]
    vecs = anyio.run(provider.embed_documents, texts)
    return np.asarray(vecs, dtype=np.float32)


def _synthetic_vectors(real: np.ndarray, rowids: np.ndarray) -> np.ndarray:
    """A vector per row, the same on every run (seeded by the rows' ids)."""
    rng = np.random.default_rng(rowids)
    i = rng.integers(0, len(real), len(rowids))
    j = rng.integers(0, len(real), len(rowids))
    a = rng.uniform(0.5, 1.0, (len(rowids), 1)).astype(np.float32)
    v = a * real[i] + (1 - a) * real[j] + rng.normal(0, 0.02, real[i].shape).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _with_vectors(ws: Path, state: Path, say: Callable[[str], None], *, reuse: bool = False) -> tuple[Any, np.ndarray]:
    """A copy of the keyword index with synthetic vectors and the local model's fingerprint
    (`reuse`: the copy an earlier run kept)."""
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415
    from memsift.backends.builtin.indexer import wanted_meta  # noqa: PLC0415
    from memsift.backends.builtin.store import ensure_vec_table, open_db, read_meta, write_meta  # noqa: PLC0415

    settings = settings_for(ws, state / "vectors", {}, frozen=True)
    m = BuiltinSearchManager(settings, provider=local_provider())
    if reuse and m.db_path.exists():
        conn, _vec = open_db(m.db_path, readonly=True)
        rowids = np.array([r for (r,) in conn.execute("SELECT rowid FROM chunks ORDER BY rowid")], dtype=np.int64)
        conn.close()
        return m, rowids
    src = next((state / "fts" / "memory").glob("main-*.sqlite"))
    m.db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    t0 = time.perf_counter()
    shutil.copyfile(src, m.db_path)
    conn, vec = open_db(m.db_path)  # migrates the copy to this version's schema
    rowids = np.array([r for (r,) in conn.execute("SELECT rowid FROM chunks ORDER BY rowid")], dtype=np.int64)
    real = _real_vectors(conn, REAL_SAMPLE)
    say(f"  embedded {len(real):,} real chunks for the synthetic vectors")
    with conn:
        for s in range(0, len(rowids), 50_000):
            part = rowids[s : s + 50_000]
            vecs = _synthetic_vectors(real, part)
            conn.executemany(
                "UPDATE chunks SET embedding=? WHERE rowid=?", ((v.tobytes(), int(r)) for v, r in zip(vecs, part))
            )
        conn.execute("DELETE FROM vector_log")  # a fresh file: its readers load everything anyway
    if vec.available:
        ensure_vec_table(conn, vec, real.shape[1])
        with conn:
            conn.execute("INSERT INTO chunks_vec(rowid, embedding) SELECT rowid, embedding FROM chunks")
    meta = {**(read_meta(conn) or {}), **wanted_meta(settings, m.identity), "dims": real.shape[1]}
    with conn:
        write_meta(conn, meta)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    say(f"  wrote {len(rowids):,} synthetic vectors (and sqlite-vec's table) in {time.perf_counter() - t0:.0f} s")
    return m, rowids


def _exact_top(db_path: Path, queries: np.ndarray, k: int) -> list[list[int]]:
    """The exact top-k rows of each query over every stored vector (blockwise, bounded memory)."""
    import apsw  # noqa: PLC0415

    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    best: list[list[tuple[float, int]]] = [[] for _ in queries]
    cursor = conn.execute("SELECT rowid, embedding FROM chunks WHERE embedding IS NOT NULL")
    while True:
        rows = [row for _, row in zip(range(100_000), cursor)]
        if not rows:
            break
        ids = np.array([r for r, _ in rows])
        mat = np.frombuffer(b"".join(b for _, b in rows), dtype="<f4").reshape(len(rows), -1)
        sims = queries @ mat.T
        for qi in range(len(queries)):
            top = np.argpartition(-sims[qi], k)[:k]
            best[qi] = sorted(best[qi] + [(float(sims[qi, t]), int(ids[t])) for t in top], reverse=True)[:k]
    conn.close()
    return [[r for _, r in b] for b in best]


async def _search(m: Any, queries: list[str], say: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    provider = local_provider()
    t0 = time.perf_counter()
    first = await m.search(queries[0], mode="vector")  # sqlite-vec answers; the codes load behind it
    out["first_vector_search_s"] = round(time.perf_counter() - t0, 2)
    mem = m._memory_vectors
    mem.wait_loaded()
    out["codes_loaded_s"] = round(time.perf_counter() - t0, 1)
    out["memory_mode"] = mem.mode
    say(f"  first vector search {out['first_vector_search_s']} s (sqlite-vec); codes loaded in the background after "
        f"{out['codes_loaded_s']} s, mode {out['memory_mode']}")
    assert first.results and mem.mode is not None
    for mode in ("keyword", "vector", "hybrid"):
        took = []
        for _ in range(ROUNDS):
            for q in queries:
                t = time.perf_counter()
                answer = await m.search(q, mode=mode)
                took.append((time.perf_counter() - t) * 1000)
                assert answer.mode in ("fts-only", "vector-only", "hybrid"), answer.mode
        out[mode] = {
            "p50_ms": round(percentile(took, 0.5), 1),
            "p95_ms": round(percentile(took, 0.95), 1),
            "n": len(took),
        }
        say(f"  {mode}: p50 {out[mode]['p50_ms']} ms, p95 {out[mode]['p95_ms']} ms")
    # The vector side alone: the first pass + rescoring, against sqlite-vec's full scan and the exact top 10.
    qv = np.stack([provider.embed_query_sync(q) for q in queries]).astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    conn = m._reader()
    got, memory_ms, vec0_ms = [], [], []
    for q in qv:
        t = time.perf_counter()
        got.append([int(r) for r, _ in mem.search(conn, q, 10)])
        memory_ms.append((time.perf_counter() - t) * 1000)
    for q in qv[:10]:
        t = time.perf_counter()
        conn.execute("SELECT rowid FROM chunks_vec WHERE embedding MATCH ? AND k = 10", (q.tobytes(),)).fetchall()
        vec0_ms.append((time.perf_counter() - t) * 1000)
    exact = _exact_top(m.db_path, qv, 10)
    recall = [len(set(g) & set(e)) / 10 for g, e in zip(got, exact)]
    out["vector_side"] = {
        "first_pass_and_rescore_p50_ms": round(percentile(memory_ms, 0.5), 1),
        "first_pass_and_rescore_p95_ms": round(percentile(memory_ms, 0.95), 1),
        "sqlite_vec_full_scan_p50_ms": round(percentile(vec0_ms, 0.5), 1),
        "recall_at_10_vs_exact": round(float(np.mean(recall)), 4),
        "recall_at_10_min": round(float(np.min(recall)), 2),
        "pool": m.ms.store.vector.rescore_pool,
    }
    say(f"  vector side: {out['vector_side']}")
    return out


FILES = 530_000  # about 1M chunks


def run_million(work: Path, files: int = FILES, *, skip_build: bool = False, keep: bool = False,
                say: Callable[[str], None] = print) -> dict[str, Any]:
    ws = build_daily_logs(work / "workspaces", files)
    state = work / "state" / f"million-{files}"
    out: dict[str, Any] = {"files": files}
    if not skip_build or not (state / "fts").exists():
        out["index_fts"] = _index_keyword(ws, state, say)
    m, rowids = _with_vectors(ws, state, say, reuse=keep)
    out["chunks"] = int(len(rowids))
    out["index_with_vectors_mb"] = round(sum(p.stat().st_size for p in m.db_path.parent.glob("main-*.sqlite*")) / 2**20)

    async def go() -> dict[str, Any]:
        try:
            return await _search(m, sample_queries(), say)
        finally:
            await m.aclose()

    out["search_in_process"] = anyio.run(go)
    if not keep:
        shutil.rmtree(state / "vectors", ignore_errors=True)  # 6 GB: rebuilt by the next run
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=FILES)
    ap.add_argument("--skip-build", action="store_true", help="reuse the keyword-only index of an earlier run")
    ap.add_argument("--keep", action="store_true", help="keep the index with vectors (6 GB) and reuse it next time")
    ap.add_argument("--work", type=Path, default=HERE / "out")
    args = ap.parse_args()
    print(json.dumps(run_million(args.work, args.files, skip_build=args.skip_build, keep=args.keep), indent=1))


if __name__ == "__main__":
    main()
