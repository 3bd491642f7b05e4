"""The rerank stage's cost and, with a real cross-encoder, its effect on retrieval quality.

    python contrib/bench/rerank.py                     # latency table (a few minutes on 2 cores)
    MEMSIFT_RERANK_MODEL=~/models/ms-marco-MiniLM-L-6-v2-onnx python contrib/bench/rerank.py --quality

Latency: the local reranker scoring 10 and 30 candidates at 128 and 256 tokens, on a cross-encoder
graph generated here with random weights at the size of ms-marco-MiniLM-L-6-v2 (6 layers, 384
hidden, 12 heads, 1,536 intermediate, BERT vocabulary), float32 and dynamic int8. Random weights
cost what trained ones cost; they rank nothing. Each figure is the median of `--repeat` runs,
candidates filled to the token cap.

Quality (`--quality`, only with `MEMSIFT_RERANK_MODEL`: a folder with model.onnx and
tokenizer.json): SciFact and LongMemEval with and without the stage, through the public search.
No cross-encoder weights exist on this machine and no PyPI package ships any, so without that
variable the quality gain is reported as not measured.

The same run times in-process keyword searches on 1,000 synthetic files without and with the stage
(int8, 128 and 256 tokens, 30 candidates), interleaved query by query, so the stage's added
latency is read as a difference measured side by side. Writes results/rerank.json and prints
Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tests"))  # the graph builder the tests use

from cross_encoder_graph import bert_cross_encoder, model_folder, quantize_int8  # noqa: E402

MINILM_L6 = {"hidden": 384, "layers": 6, "heads": 12, "intermediate": 1536}
TOKENS = (128, 256)
CANDIDATES = (10, 30)
QUERY = "what did we decide about the ledger database and its write path"


def say(text: str) -> None:
    print(text, flush=True)


def _chunk(words: int, seed: int) -> str:
    vocab = ("ledger postgres shard merchant benchmark write path replica index migration foreign key lisbon hotel "
             "trip export job failure certificate rotation gateway sister allergy standup design doc").split()
    return " ".join(vocab[(seed * 7 + i * 3) % len(vocab)] for i in range(words))


def latency(repeat: int, work: Path, stage_queries: int) -> dict[str, Any]:
    from memsift.engine.rerank.local import LocalCrossEncoder  # noqa: PLC0415

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = model_folder(Path(tmp) / "fp32", lambda p: bert_cross_encoder(p, **MINILM_L6))
        int8 = model_folder(Path(tmp) / "int8", lambda p: quantize_int8(fp32 / "model.onnx", p))
        for name, folder in (("int8", int8), ("fp32", fp32)):
            out[name] = {"model_mb": round((folder / "model.onnx").stat().st_size / 2**20, 1)}
            for tokens in TOKENS:
                enc = LocalCrossEncoder(folder, max_tokens=tokens, batch_size=16)
                t0 = time.perf_counter()
                enc.load()
                out[name]["load_s"] = round(time.perf_counter() - t0, 2)
                for n in CANDIDATES:
                    docs = [_chunk(400, i) for i in range(n)]  # cut to `tokens` by the reranker
                    enc.score_sync(QUERY, docs[:2])  # warm-up
                    runs = []
                    for _ in range(repeat):
                        t0 = time.perf_counter()
                        enc.score_sync(QUERY, docs)
                        runs.append((time.perf_counter() - t0) * 1000)
                    ms = statistics.median(runs)
                    out[name][f"{tokens}x{n}"] = {"median_ms": round(ms, 1), "min_ms": round(min(runs), 1)}
                    say(f"  {name} {tokens} tokens × {n} candidates: median {ms:.0f} ms (min {min(runs):.0f})")
        if stage_queries:
            say("Search without and with the stage (int8, 1,000 synthetic files, keyword only)")
            out["stage"] = stage_side_by_side(work, int8, stage_queries)
    return out


def stage_side_by_side(work: Path, folder: Path, queries: int) -> dict[str, Any]:
    """In-process keyword searches on 1,000 synthetic daily logs (minScore 0, so 30 candidates),
    without and with the stage (int8 graph at 128 and 256 tokens), interleaved query by query so
    the machine's load falls on all three alike."""
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415
    from memsift.engine.embeddings import ProviderSelection  # noqa: PLC0415
    from memsift.engine.compose.factory import reranked  # noqa: PLC0415
    from quality import settings_for  # noqa: PLC0415
    from synthetic import build_daily_logs, sample_queries  # noqa: PLC0415

    ws = build_daily_logs(work / "synthetic", 1000)
    qs = sample_queries(queries)
    variants: dict[str, dict[str, Any]] = {"off": {}}
    for tokens in TOKENS:
        variants[f"on, {tokens} tokens"] = {
            "query": {
                "rerank": {
                    "enabled": True,
                    "provider": "local",
                    "modelPath": str(folder),
                    "candidates": 30,
                    "maxTokens": tokens,
                    "timeoutMs": 120_000,
                }
            }
        }
    times: dict[str, list[float]] = {k: [] for k in variants}
    candidates: list[int] = []

    async def go() -> None:
        managers = {}
        for name, extra in variants.items():
            settings = settings_for(ws, work / "state" / "rerank-synthetic", extra)
            base = BuiltinSearchManager(settings, selection=ProviderSelection(None, "none", unavailable_reason="bench"))
            managers[name] = reranked(base, settings, "builtin")
        await managers["off"].sync(reason="bench")
        for m in managers.values():
            await m.search("warm up", max_results=6, min_score=0.0)
        for q in qs:
            for name, m in managers.items():
                t0 = time.perf_counter()
                answer = await m.search(q, max_results=6, min_score=0.0)
                times[name].append((time.perf_counter() - t0) * 1000)
                if answer.rerank:
                    candidates.append(answer.rerank.candidates)
                    if not answer.rerank.applied:
                        raise RuntimeError(f"rerank skipped: {answer.degraded.rerank}")
        for m in managers.values():
            await m.aclose()

    anyio.run(go)
    out = {name: {"p50_ms": round(statistics.median(t), 1), "p95_ms": round(sorted(t)[int(0.95 * (len(t) - 1))], 1)}
           for name, t in times.items()}
    out["queries"] = len(qs)
    out["mean_candidates"] = round(statistics.mean(candidates), 1) if candidates else 0
    for name, t in out.items():
        if isinstance(t, dict):
            say(f"  keyword search, rerank {name}: p50 {t['p50_ms']:.0f} ms, p95 {t['p95_ms']:.0f} ms")
    return out


def quality(work: Path, model: Path, modes: list[str], timeout_ms: float) -> dict[str, Any]:
    from bench_data import load_longmemeval, load_scifact  # noqa: PLC0415
    from quality import eval_longmemeval, eval_scifact, warm_index  # noqa: PLC0415

    rerank = {"query": {"rerank": {"enabled": True, "provider": "local", "modelPath": str(model), "candidates": 30,
                                   "timeoutMs": timeout_ms}}}
    out: dict[str, Any] = {"model": str(model), "scifact": {}, "longmemeval": {}}

    async def go() -> None:
        scifact = load_scifact(work / "data")
        for mode in modes:
            await warm_index(mode, scifact.workspace, work / "state" / "scifact", say)
            for label, extra in ((mode, None), (f"{mode}+rerank", rerank)):
                r = out["scifact"][label] = await eval_scifact(scifact, mode, work / "state" / "scifact", extra=extra)
                say(
                    f"  SciFact {label:15} nDCG@10 {r['ndcg@10']:.3f}  recall@10 {r['recall@10']:.3f}  p50 "
                    f"{r['latency_ms']['p50']:.0f} ms"
                )
        lme = load_longmemeval(work / "data")
        for mode in modes:
            await warm_index(mode, lme.workspace, work / "state" / "lme", say)
            for label, extra in ((mode, None), (f"{mode}+rerank", rerank)):
                r = out["longmemeval"][label] = await eval_longmemeval(lme, mode, work / "state" / "lme", extra=extra)
                say(f"  LongMemEval {label:15} recall_any@5 {r['recall_any@5']:.3f}  @10 {r['recall_any@10']:.3f}  "
                    f"p50 {r['latency_ms']['p50']:.0f} ms")

    anyio.run(go)
    return out


def table(figures: dict[str, Any]) -> str:
    lat = figures["latency"]
    rows = ["| graph | " + " | ".join(f"{t} tokens × {n}" for t in TOKENS for n in CANDIDATES) + " | load |",
            "| --- |" + " --- |" * (len(TOKENS) * len(CANDIDATES) + 1)]
    for name, r in lat.items():
        if name == "stage":
            continue
        cells = [f"{r[f'{t}x{n}']['median_ms']:.0f} ms" for t in TOKENS for n in CANDIDATES]
        rows.append(
            f"| MiniLM-L6 size, random weights, {name} ({r['model_mb']} MB) | "
            + " | ".join(cells)
            + f" | {r['load_s']} s |"
        )
    text = "**Rerank stage, local cross-encoder** (scoring time per search, median; batch 16)\n\n" + "\n".join(rows)
    st = lat.get("stage")
    if st:
        text += (
            f"\n\nKeyword search on 1,000 synthetic files, minScore 0 ({st['mean_candidates']:g} candidates on "
            f"average), "
            f"{st['queries']} queries interleaved, int8 graph:\n\n| rerank | p50 | p95 |\n| --- | --- | --- |"
        )
        for name, t in st.items():
            if isinstance(t, dict):
                text += f"\n| {name} | {t['p50_ms']:.0f} ms | {t['p95_ms']:.0f} ms |"
    q = figures.get("quality")
    if not q:
        text += ("\n\nQuality gain: **not measured** — no cross-encoder weights on this machine (none on PyPI); set "
                 "`MEMSIFT_RERANK_MODEL` to a folder with model.onnx + tokenizer.json and pass `--quality`.")
    else:
        text += (
            f"\n\nQuality with `{q['model']}`\n\n| set | mode | nDCG@10 | recall@10 / recall_any@10 | p50 |\n| --- | "
            f"--- | --- | --- | --- |"
        )
        for label, r in q["scifact"].items():
            text += (
                f"\n| SciFact | {label} | {r['ndcg@10']:.3f} | {r['recall@10']:.3f} | {r['latency_ms']['p50']:.0f} ms |"
            )
        for label, r in q["longmemeval"].items():
            text += (
                f"\n| LongMemEval | {label} | {r['ndcg@10']:.3f} | {r['recall_any@10']:.3f} | "
                f"{r['latency_ms']['p50']:.0f} ms |"
            )
    return text + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument(
        "--quality",
        action="store_true",
        help="SciFact and LongMemEval with and without rerank (needs MEMSIFT_RERANK_MODEL)",
    )
    ap.add_argument("--modes", default="hybrid", help="search modes to rerank, comma-separated (bm25, hybrid)")
    ap.add_argument("--timeout-ms", type=float, default=60_000, help="the stage's budget in the quality runs")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument(
        "--stage-queries", type=int, default=20, help="queries for the side-by-side search run (0: skip it)"
    )
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    args = ap.parse_args()
    import onnxruntime  # noqa: PLC0415

    figures: dict[str, Any] = {"machine": {"cores": os.cpu_count(), "onnxruntime": onnxruntime.__version__,
                                           "date": time.strftime("%Y-%m-%d")}}
    previous = args.results / "rerank.json"
    if args.skip_latency and previous.exists():
        figures["latency"] = json.loads(previous.read_text())["latency"]
    else:
        say("Rerank latency (generated MiniLM-L6-size cross-encoder)")
        figures["latency"] = latency(args.repeat, args.work, args.stage_queries)
    model = os.environ.get("MEMSIFT_RERANK_MODEL")
    if args.quality and model:
        figures["quality"] = quality(args.work, Path(model).expanduser(), args.modes.split(","), args.timeout_ms)
    elif args.quality:
        say("MEMSIFT_RERANK_MODEL is not set: quality with and without rerank not measured")
    args.results.mkdir(parents=True, exist_ok=True)
    previous.write_text(json.dumps(figures, indent=1))
    say("")
    say(table(figures))


if __name__ == "__main__":
    main()
