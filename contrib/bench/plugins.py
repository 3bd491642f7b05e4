"""A backend beside builtin: retrieval quality (SciFact nDCG@10, LongMemEval recall) and in-process
search speed at 10k files, for memsift's own backends or a plugin's (`--backend lancedb`, after
`pip install -e contrib/plugins/memsift-lancedb`).

    python contrib/bench/plugins.py --backend lancedb          # about 25 min on 2 cores
    python contrib/bench/plugins.py --backend lancedb --skip-lme --sizes 10000

Both sides go through `open_manager` as a user's search does (for builtin, the benchmark's
quality runs open it the same way), with `minScore` 0 and the data sets' indexes kept between
runs under contrib/bench/out (their build time is printed, not compared). Speed: one process, a
warmed index, the 40 synthetic queries of the scale runs, each searched 3 times; p50/p95 of the
search call. Writes contrib/bench/results/plugins-<backend>.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import load_longmemeval, load_scifact  # noqa: E402
from metrics import percentile  # noqa: E402
from quality import eval_longmemeval, eval_scifact, open_mode, settings_for  # noqa: E402
from synthetic import build_daily_logs, sample_queries  # noqa: E402


def say(text: str) -> None:
    print(text, flush=True)


async def _warm(mode: str, workspace: Path, state: Path) -> float:
    manager = open_mode(mode, workspace, state)
    try:
        t0 = time.perf_counter()
        report = await manager.sync(reason="bench")
        took = time.perf_counter() - t0
        say(f"  index for {mode}: {report.files_indexed} files indexed, {report.chunks_written} chunks, {took:.1f} s")
        return took
    finally:
        await manager.aclose()


async def quality(backend: str, work: Path, with_lme: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"scifact": {}, "longmemeval": {}}
    data_root, state = work / "data", work / "state"
    scifact = load_scifact(data_root)
    say("SciFact (BEIR): 5,183 abstracts, 300 test queries")
    for kind in ("bm25", "hybrid"):
        for mode in (kind, f"{backend}:{kind}"):  # builtin: the quality runs' own indexes and stages
            await _warm(mode, scifact.workspace, state / "scifact")
            r = out["scifact"][mode] = await eval_scifact(scifact, mode, state / "scifact")
            say(
                f"  {mode:18} nDCG@10 {r['ndcg@10']:.4f}  recall@10 {r['recall@10']:.4f}  p95 "
                f"{r['latency_ms']['p95']:.1f} ms"
            )
    if with_lme:
        lme = load_longmemeval(data_root)
        say("LongMemEval (oracle): 940 sessions, 470 questions")
        for mode in ("hybrid", f"{backend}:hybrid"):
            await _warm(mode, lme.workspace, state / "lme")
            r = out["longmemeval"][mode] = await eval_longmemeval(lme, mode, state / "lme")
            say(f"  {mode:18} recall_any@10 {r['recall_any@10']:.4f}  nDCG@10 {r['ndcg@10']:.4f}")
    return out


async def speed(backend: str, work: Path, sizes: list[int]) -> dict[str, Any]:
    from memsift.engine.compose.factory import open_manager  # noqa: PLC0415

    out: dict[str, Any] = {}
    queries = sample_queries()
    for n in sizes:
        ws = build_daily_logs(work / "workspaces", n)
        for name in ("builtin", backend):
            for kind, ms in (("keyword", {"provider": "none"}), ("hybrid", {"provider": "local"})):
                state = work / "state" / f"plugins-speed-{n}-{name}-{kind}"
                shutil.rmtree(state, ignore_errors=True)  # the index is built from nothing, and timed
                manager = open_manager(settings_for(ws, state, ms, {"backend": name}))
                try:
                    t0 = time.perf_counter()
                    await manager.sync(reason="bench")
                    built = time.perf_counter() - t0
                    await manager.search(queries[0], min_score=0)  # the model loaded, the tables opened
                    took = []
                    for _ in range(3):
                        for q in queries:
                            t = time.perf_counter()
                            answer = await manager.search(q, min_score=0)
                            took.append((time.perf_counter() - t) * 1000)
                            assert answer.backend == name and not answer.unavailable, answer.unavailable
                finally:
                    await manager.aclose()
                r = out.setdefault(str(n), {}).setdefault(name, {})[kind] = {
                    "p50_ms": round(percentile(took, 0.5), 2), "p95_ms": round(percentile(took, 0.95), 2),
                    "index_s": round(built, 1), "searches": len(took)}
                say(f"  {n:>6} files  {name:8} {kind:7} p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms  "
                    f"(index {r['index_s']} s)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="lancedb", help="the backend compared with builtin (default lancedb)")
    ap.add_argument("--sizes", default="10000", help="workspace sizes for the speed part (default 10000)")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-lme", action="store_true", help="SciFact only")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    args = ap.parse_args()
    out: dict[str, Any] = {"backend": args.backend, "date": time.strftime("%Y-%m-%d")}
    if not args.skip_quality:
        out["quality"] = anyio.run(quality, args.backend, args.work, not args.skip_lme)
    if not args.skip_speed:
        say("In-process search speed (one process, warmed index)")
        out["speed"] = anyio.run(speed, args.backend, args.work, [int(s) for s in args.sizes.split(",")])
    path = args.results / f"plugins-{args.backend}.json"
    if path.exists():  # a partial run keeps the other parts' figures
        out = {**json.loads(path.read_text()), **out}
    path.write_text(json.dumps(out, indent=2) + "\n")
    table = path.with_suffix(".md")
    table.write_text(markdown(out))
    say(f"wrote {path} and {table}")
    say(markdown(out))


def markdown(out: dict[str, Any]) -> str:
    """The figures as the performance page shows them (docs/performance.md includes the file)."""
    b = out["backend"]
    lines = [
        f"| {b} beside builtin ({out.get('date', '?')}) | builtin | {b} | difference |",
        "| --- | --- | --- | --- |",
    ]
    q = out.get("quality", {})
    for kind in ("bm25", "hybrid"):
        mine, theirs = q.get("scifact", {}).get(kind), q.get("scifact", {}).get(f"{b}:{kind}")
        if mine and theirs:
            label = "keyword (no embeddings)" if kind == "bm25" else "hybrid (local model)"
            for metric in ("ndcg@10", "recall@10"):
                lines.append(f"| SciFact {metric}, {label} | {mine[metric]:.4f} | {theirs[metric]:.4f} | "
                             f"{theirs[metric] - mine[metric]:+.4f} |")
    mine, theirs = q.get("longmemeval", {}).get("hybrid"), q.get("longmemeval", {}).get(f"{b}:hybrid")
    if mine and theirs:
        for metric in ("recall_any@10", "ndcg@10"):
            lines.append(f"| LongMemEval {metric}, hybrid | {mine[metric]:.4f} | {theirs[metric]:.4f} | "
                         f"{theirs[metric] - mine[metric]:+.4f} |")
    for n, sides in out.get("speed", {}).items():
        for kind in ("keyword", "hybrid"):
            if kind in sides.get("builtin", {}) and kind in sides.get(b, {}):
                m, t = sides["builtin"][kind], sides[b][kind]
                lines.append(
                    f"| {int(n):,} files, in-process {kind} search p50 / p95 | {m['p50_ms']:.1f} / {m['p95_ms']:.1f} "
                    f"ms | "
                    f"{t['p50_ms']:.1f} / {t['p95_ms']:.1f} ms | {t['p95_ms'] / m['p95_ms']:.2f}× (p95) |"
                )
                lines.append(
                    f"| {int(n):,} files, {kind} index built from nothing | {m['index_s']:.1f} s | {t['index_s']:.1f} "
                    f"s | |"
                )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
