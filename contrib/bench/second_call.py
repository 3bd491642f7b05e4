"""The second `memsift search`: whole CLI calls from new processes, cold (MEMSIFT_NO_RESIDENT=1)
and answered by the resident helper the first call started, against `qmd search` on the same
files, in one run.

    python contrib/bench/second_call.py [--files 10000] [--keyword] [--no-qmd] [--memsift PATH]

`--memsift PATH` times another install's `memsift` (a wheel installed in its own virtual
environment, as `pip install memsift` makes it: no editable-install import hook).

`--keyword` indexes without a model (provider none: keyword search, as `qmd search` is BM25);
without it the local model indexes the workspace first (long at 10k files on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from metrics import percentile  # noqa: E402
from qmdcli import QmdHome, qmd_available, run_measured, start_spawner  # noqa: E402
from scale import MEMSIFT  # noqa: E402
from synthetic import build_daily_logs, sample_queries  # noqa: E402

QUERIES = 20


def _timed(argv: list[str], env: dict[str, str], queries: list[str]) -> dict[str, Any]:
    times = []
    for q in queries:
        run = run_measured([*argv, q], env=env)
        if run.rc not in (0, 1):  # 1: no results
            raise RuntimeError(f"{argv[0]} failed ({run.rc}): {run.stderr[-800:]}")
        times.append(run.seconds * 1000)
    return {
        "p50_ms": round(percentile(times, 0.5), 1),
        "p95_ms": round(percentile(times, 0.95), 1),
        "calls": len(times),
    }


def _wait_for_helper(folder: Path, timeout: float = 3600) -> int:
    from memsift.engine.cli.helper import helper_pids  # noqa: PLC0415

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = helper_pids(folder)
        if pids and list(folder.glob("*.sock")):
            return pids[0]
        time.sleep(0.2)
    raise RuntimeError("the resident helper did not start")


def run_second_call(work: Path, files: int = 10000, *, keyword: bool = False, with_qmd: bool = True,
                    say: Callable[[str], None] = print, memsift: list[str] | None = None) -> dict[str, Any]:
    start_spawner()
    queries = sample_queries()[:QUERIES]
    ws = build_daily_logs(work / "workspaces", files)
    state = work / "state" / f"second-call-{files}{'-kw' if keyword else ''}"
    runtime = Path(tempfile.mkdtemp(prefix="msc"))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("MEMSIFT")}
    env.update(MEMSIFT_STATE_DIR=str(state), XDG_CONFIG_HOME=str(work / "xdg-config"), XDG_RUNTIME_DIR=str(runtime))
    if keyword:
        env["MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__PROVIDER"] = "none"
    cold_env = {**env, "MEMSIFT_NO_RESIDENT": "1"}
    command = memsift or MEMSIFT
    search = [*command, "-w", str(ws), "search", "--json"]
    out: dict[str, Any] = {"files": files, "mode": "keyword" if keyword else "hybrid", "memsift": command[0]}
    try:
        run = run_measured([*command, "-w", str(ws), "index"], env=cold_env, timeout=6 * 3600)  # untimed: the index
        if run.rc != 0:
            raise RuntimeError(f"memsift index failed: {run.stderr[-800:]}")
        out["cold"] = _timed(search, cold_env, queries[:8])
        say(f"    memsift search, cold: p50 {out['cold']['p50_ms']:.0f} ms, p95 {out['cold']['p95_ms']:.0f} ms")
        first = run_measured([*search, "warm up"], env=env)  # cold, and starts the helper
        out["first_call_ms"] = round(first.seconds * 1000, 1)
        pid = _wait_for_helper(runtime / "memsift")
        run_measured([*search, "warm up"], env=env)  # the helper loads its query model on first use
        out["second_call"] = _timed(search, env, queries)
        say(f"    memsift search, answered by the helper: p50 {out['second_call']['p50_ms']:.0f} ms, "
            f"p95 {out['second_call']['p95_ms']:.0f} ms")
        os.kill(pid, signal.SIGTERM)
        if with_qmd and qmd_available():
            home = QmdHome(work / "qmd" / f"second-call-{files}")
            home.reset()
            home.run("collection", "add", str(ws), "--name", "mem", "--mask", "**/*.md", timeout=6 * 3600)
            out["qmd_search"] = _timed(
                ["qmd", "--index", home.index, "search", "--json", "-n", "6", "--"], home.env, queries
            )
            say(f"    qmd search: p50 {out['qmd_search']['p50_ms']:.0f} ms, p95 {out['qmd_search']['p95_ms']:.0f} ms")
            out["ratio_vs_qmd_p50"] = round(out["qmd_search"]["p50_ms"] / out["second_call"]["p50_ms"], 2)
            out["cold_vs_qmd_p50"] = round(out["cold"]["p50_ms"] / out["qmd_search"]["p50_ms"], 2)  # target ≤ 2
            say(f"    cold memsift search / qmd search (p50): {out['cold_vs_qmd_p50']}×")
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--keyword", action="store_true")
    ap.add_argument("--no-qmd", action="store_true")
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--memsift", help="the memsift command to time (default: this environment's)")
    args = ap.parse_args()
    print(json.dumps(run_second_call(args.work, args.files, keyword=args.keyword, with_qmd=not args.no_qmd,
                                     memsift=[args.memsift] if args.memsift else None), indent=1))


if __name__ == "__main__":
    main()
