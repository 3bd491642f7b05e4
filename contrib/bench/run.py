"""memsift benchmarks: retrieval quality and speed, side by side with QMD. One command:

    pip install -e ".[bench]"      # matplotlib; QMD 2.8.3 on PATH for the side-by-side runs
    python contrib/bench/run.py    # about 2 h on 2 cores; --quick: 1k and 10k only, about 25 min

Writes contrib/bench/results/{figures.json, tables.md, *.png} and prints the tables. Work files
(data-set workspaces, indexes, QMD homes) go to contrib/bench/out/ (not committed); data-set
indexes are kept between runs (their build time is not a figure), every speed figure is measured
from nothing. Not part of the tests: tests never assert timings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cjk import CJK_MODES, CJK_SETS, eval_cjk  # noqa: E402
from bench_data import load_longmemeval, load_scifact  # noqa: E402
from evidence import EVIDENCE_SETS, eval_evidence, load_set, warm  # noqa: E402
from qmdcli import qmd_available, start_spawner  # noqa: E402
from quality import eval_longmemeval, eval_scifact, warm_index  # noqa: E402
from report import check_targets, plot_all, tables  # noqa: E402
from embed_speed import run_embed_speed  # noqa: E402
from scale import run_scale  # noqa: E402
from timebench import time_aware  # noqa: E402
from second_call import run_second_call  # noqa: E402
from million import run_million  # noqa: E402
from int8_quality import run_int8_quality  # noqa: E402

SCIFACT_MODES = ["bm25", "vector", "hybrid", "hybrid+mmr", "qmd"]
LME_MODES = ["bm25", "vector", "hybrid", "hybrid+mmr", "hybrid+decay", "qmd"]
EVIDENCE_MODES = ["bm25", "vector", "hybrid", "qmd"]


def say(text: str) -> None:
    print(text, flush=True)


def machine() -> dict[str, Any]:
    import apsw  # noqa: PLC0415
    import onnxruntime  # noqa: PLC0415

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kb = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    qmd = (
        subprocess.run(["qmd", "--version"], capture_output=True, text=True).stdout.strip() if qmd_available() else None
    )
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(mem_kb / 2**20, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "onnxruntime": onnxruntime.__version__,
        "qmd": qmd,
        "memsift_commit": rev,
        "date": time.strftime("%Y-%m-%d"),
    }


async def _warm_once(mode: str, workspace: Path, state: Path, warmed: set[str]) -> None:
    """Build the index a mode searches, once per kind (keyword-only, local model, QMD)."""
    kind = {"bm25": "bm25", "qmd": "qmd"}.get(mode, "hybrid")
    if kind not in warmed:
        warmed.add(kind)
        await warm_index(kind, workspace, state, say)


async def quality(work: Path, with_qmd: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    data_root, state = work / "data", work / "state"
    say("SciFact (BEIR): 5,183 abstracts, 300 test queries")
    scifact = load_scifact(data_root)
    out["scifact"] = {}
    warmed: set[str] = set()
    for mode in [m for m in SCIFACT_MODES if with_qmd or m != "qmd"]:
        await _warm_once(mode, scifact.workspace, state / "scifact", warmed)
        out["scifact"][mode] = await eval_scifact(scifact, mode, state / "scifact")
        say(
            f"  {mode:13} nDCG@10 {out['scifact'][mode]['ndcg@10']:.3f}  recall@10 "
            f"{out['scifact'][mode]['recall@10']:.3f}"
        )
    # The train split, where anything was tuned (the hybrid's BM25 scaling was chosen here).
    out["scifact_train"] = {
        m: await eval_scifact(scifact, m, state / "scifact", "train") for m in ("bm25", "vector", "hybrid")
    }
    say("LongMemEval (oracle): 940 sessions in one workspace, 470 questions")
    lme = load_longmemeval(data_root)
    out["longmemeval"] = {}
    warmed = set()
    for mode in [m for m in LME_MODES if with_qmd or m != "qmd"]:
        await _warm_once(mode, lme.workspace, state / "lme", warmed)
        out["longmemeval"][mode] = await eval_longmemeval(lme, mode, state / "lme")
        r = out["longmemeval"][mode]
        say(
            f"  {mode:13} recall_any@5 {r['recall_any@5']:.3f}  @10 {r['recall_any@10']:.3f}  nDCG@10 "
            f"{r['ndcg@10']:.3f}"
        )
    return out


async def conversation(work: Path, with_qmd: bool, with_cjk: bool = True) -> dict[str, Any]:
    """Evidence shown on the two conversational dev sets; CJK questions per mode and tokenizer."""
    out: dict[str, Any] = {"evidence": {}, "cjk": {}}
    for name in EVIDENCE_SETS:
        say(f"Evidence shown ({name})")
        questions = load_set(name, work / "data")
        state = work / "state" / f"evidence-{name}"
        out["evidence"][name] = {}
        for mode in [m for m in EVIDENCE_MODES if with_qmd or m != "qmd"]:
            await warm(questions, mode, state)
            r = out["evidence"][name][mode] = await eval_evidence(questions, mode, state)
            say(f"  {mode:13} turn_recall@10 {r['turn_recall@10']:.3f}  hit@10 {r['hit@10']:.3f}  "
                f"MRR@10 {r['mrr@10']:.3f}  chars@10 {r['chars@10']:.0f}")
    for name in CJK_SETS if with_cjk else ():
        say(f"CJK questions ({name})")
        out["cjk"][name] = {}
        for mode in CJK_MODES:
            r = out["cjk"][name][mode] = await eval_cjk(name, mode, work / "data", work / "state" / f"cjk-{name}")
            say(
                f"  {mode:15} hit@1 {r['hit@1']:.3f}  hit@10 {r['hit@10']:.3f}  vector set aside "
                f"{r['vector_set_aside']}/{r['queries']}"
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="scale runs at 1k and 10k only")
    ap.add_argument("--sizes", help="comma-separated workspace sizes (files ≈ chunks), default 1000,10000,100000")
    ap.add_argument("--no-qmd", action="store_true", help="skip the QMD side (no qmd on PATH)")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-conversation", action="store_true", help="skip evidence shown and the CJK sets")
    ap.add_argument("--skip-cjk", action="store_true", help="skip the CJK sets (cjk.py runs them alone)")
    ap.add_argument("--skip-time", action="store_true", help="skip time-aware search (timebench.py runs it alone)")
    ap.add_argument("--work", type=Path, default=HERE / "out", help="work files (default contrib/bench/out)")
    ap.add_argument(
        "--results", type=Path, default=HERE / "results", help="figures, tables, plots (default contrib/bench/results)"
    )
    ap.add_argument(
        "--skip-embed-speed", action="store_true", help="skip local-model chars/s against the baseline revision"
    )
    ap.add_argument(
        "--skip-second-call", action="store_true", help="skip the cold / resident-helper / qmd CLI calls at 10k files"
    )
    ap.add_argument(
        "--skip-million", action="store_true", help="skip 1M chunks (keyword build, synthetic vectors, search)"
    )
    ap.add_argument(
        "--skip-int8-quality", action="store_true", help="skip LongMemEval with the int8 and the fp32 graph"
    )
    ap.add_argument(
        "--only-speed", action="store_true", help="only embedding speed, the second CLI call and 1M chunks (issue 20)"
    )
    ap.add_argument("--report-only", action="store_true", help="redraw tables and plots from results/figures.json")
    args = ap.parse_args()
    if args.report_only:
        figures = json.loads((args.results / "figures.json").read_text())
        figures["targets"] = check_targets(figures)
        (args.results / "tables.md").write_text(tables(figures))
        plot_all(figures, args.results)
        say(tables(figures))
        return
    start_spawner()  # measured commands start from a small process (see qmdcli.run_measured)
    with_qmd = not args.no_qmd
    if with_qmd and not qmd_available():
        sys.exit("qmd is not on PATH: install QMD 2.8.3 (docs/operators/qmd.md) or pass --no-qmd")
    sizes = (
        [int(x) for x in args.sizes.split(",")]
        if args.sizes
        else ([1000, 10000] if args.quick else [1000, 10000, 100000])
    )
    args.work.mkdir(parents=True, exist_ok=True)
    args.results.mkdir(parents=True, exist_ok=True)
    started = time.time()
    figures: dict[str, Any] = {"machine": machine()}
    say(
        f"memsift benchmarks on {figures['machine']['cpu']} ({figures['machine']['cores']} cores), QMD: "
        f"{figures['machine']['qmd']}"
    )
    if args.only_speed:
        args.skip_quality = args.skip_conversation = args.skip_scale = args.skip_time = True
    if not args.skip_embed_speed:
        say("Local-model indexing speed (characters/s), baseline revision and today's code interleaved")
        figures["embed_speed"] = run_embed_speed(args.work, say=say)
    if not args.skip_second_call:
        say("The second CLI search at 10,000 files: keyword index (as qmd search), then hybrid (the default)")
        figures["second_call"] = run_second_call(args.work, 10000, keyword=True, with_qmd=with_qmd, say=say)
        figures["second_call_hybrid"] = run_second_call(args.work, 10000, keyword=False, with_qmd=False, say=say)
    if not args.skip_million:
        say("One million chunks (keyword-only build; synthetic vectors for the vector side)")
        figures["million"] = run_million(args.work, say=say)
    if not args.skip_int8_quality:
        say("LongMemEval with the int8 graph and the fp32 graph (same code, same run)")
        figures["int8_quality"] = run_int8_quality(args.work, say=say)
    if not args.skip_quality:
        figures["quality"] = anyio.run(quality, args.work, with_qmd)
    if not args.skip_conversation:
        figures["conversation"] = anyio.run(conversation, args.work, with_qmd, not args.skip_cjk)
    if not args.skip_time:
        figures["time"] = anyio.run(time_aware, args.work)
    if not args.skip_scale:
        say("Speed and scale (synthetic daily logs)")
        figures["scale"] = run_scale(args.work, sizes, model_sizes=set(sizes), with_qmd=with_qmd, say=say)
    figures["targets"] = check_targets(figures)
    figures["seconds"] = round(time.time() - started)
    previous = args.results / "figures.json"
    if previous.exists() and (args.skip_quality or args.skip_scale or args.skip_conversation or args.skip_time
                              or args.skip_embed_speed or args.skip_second_call or args.skip_million
                              or args.skip_int8_quality):  # a partial run keeps the rest
        old = json.loads(previous.read_text())
        for part in (
            "quality",
            "scale",
            "conversation",
            "time",
            "embed_speed",
            "second_call",
            "second_call_hybrid",
            "million",
            "int8_quality",
        ):
            figures.setdefault(part, old.get(part))
        figures["targets"] = check_targets(figures)
    previous.write_text(json.dumps(figures, indent=1, default=float))
    text = tables(figures)
    (args.results / "tables.md").write_text(text)
    plot_all(figures, args.results)
    say("")
    say(text)
    say(f"figures, tables and plots in {args.results} ({figures['seconds'] / 60:.0f} min)")


if __name__ == "__main__":
    main()
