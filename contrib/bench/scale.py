"""Speed and scale: memsift and the real QMD CLI on the same synthetic daily-log workspaces.

Per size (files ≈ chunks): full index (memsift keyword-only and with the local model; QMD
`collection add`, which indexes), no-change re-sync (`qmd update`), one-file-changed re-sync,
in-process search latency (keyword, vector, hybrid; query embedding included), whole CLI call
latency (`memsift search` with its defaults, cold and while `memsift watch` runs, against
`qmd search --json`), peak RSS of every
measured process, index size on disk. Every memsift operation runs in a process of its own
(scale_worker.py) so its peak memory is its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from metrics import percentile
from qmdcli import QmdHome, qmd_available, run_measured
from synthetic import build_daily_logs, sample_queries

__all__ = ["run_scale"]

HERE = Path(__file__).resolve().parent
WORKER = HERE / "scale_worker.py"
CLI_QUERIES = 15
# The console script, as a user runs it (`python -m …cli.main` would import more before asking a
# resident memsift).
MEMSIFT = (
    [str(Path(sys.executable).with_name("memsift"))]
    if Path(sys.executable).with_name("memsift").exists()
    else [sys.executable, "-m", "memsift.engine.cli.main"]
)


def _clean_env(state: Path, config_home: Path) -> dict[str, str]:
    """No user config, no API keys: the embedded default (builtin backend, local model)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("MEMSIFT")}
    # Cold calls stay cold: no resident helper answers them (second_call.py measures the helper).
    env.update(MEMSIFT_STATE_DIR=str(state), XDG_CONFIG_HOME=str(config_home), MEMSIFT_NO_RESIDENT="1")
    return env


def _worker(*args: str) -> tuple[dict[str, Any], float]:
    run = run_measured([sys.executable, str(WORKER), *args], timeout=6 * 3600)
    if run.rc != 0:
        raise RuntimeError(f"scale_worker {args[0]} failed ({run.rc}): {run.stderr.strip()[-1500:]}")
    return json.loads(run.stdout.strip().splitlines()[-1]), run.peak_rss_mb


def _changed_file(ws: Path) -> Path:
    return ws / "memory" / "log-000" / "2026-10-15.md"


def _memsift(ws: Path, state: Path, queries: list[str], with_model: bool, say: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kinds = ["fts", "local"] if with_model else ["fts"]
    for kind in kinds:
        shutil.rmtree(state / kind, ignore_errors=True)
        figures, peak = _worker("index", str(ws), str(state), kind)
        out[f"index_{kind}"] = {**figures, "peak_rss_mb": peak}
        say(
            f"    memsift index ({kind}): {figures['seconds']:.1f} s, {figures['chunks_per_s']:.0f} chunks/s, "
            f"{peak:.0f} MB peak"
        )
        figures, peak = _worker("resync", str(ws), str(state), kind, str(_changed_file(ws)))
        out[f"resync_{kind}"] = {**figures, "peak_rss_mb": peak}
        say(
            f"    memsift re-sync ({kind}): no change {figures['nochange_s']:.2f} s, one file "
            f"{figures['one_changed_s']:.2f} s"
        )
    if not with_model:
        return out
    qfile = state / "queries.json"
    qfile.write_text(json.dumps(queries))
    figures, peak = _worker("search", str(ws), str(state), str(qfile))
    out["search_in_process"] = {**figures, "peak_rss_mb": peak}
    say(
        "    memsift search in process: "
        + ", ".join(f"{m} p50 {f['p50_ms']:.1f} / p95 {f['p95_ms']:.1f} ms" for m, f in figures.items())
    )
    env = _clean_env(state / "local", state / "xdg-config")
    times, peaks = [], []
    for q in queries[:CLI_QUERIES]:
        run = run_measured([*MEMSIFT, "-w", str(ws), "search", q, "--json"], env=env)
        if run.rc != 0:
            raise RuntimeError(f"memsift search failed ({run.rc}): {run.stderr[-800:]}")
        answer = json.loads(run.stdout)
        assert answer["mode"] == "hybrid" and not answer.get("fallback"), answer.get("degraded")
        times.append(run.seconds * 1000)
        peaks.append(run.peak_rss_mb)
    out["cli_search"] = {
        "p50_ms": percentile(times, 0.5),
        "p95_ms": percentile(times, 0.95),
        "peak_rss_mb": max(peaks),
        "mode": "hybrid",
    }
    say(f"    memsift search CLI: p50 {out['cli_search']['p50_ms']:.0f} ms, p95 {out['cli_search']['p95_ms']:.0f} ms")
    out["cli_search_resident"] = _resident_cli(ws, env, queries[:CLI_QUERIES])
    say(f"    memsift search CLI with `memsift watch` running: p50 {out['cli_search_resident']['p50_ms']:.0f} ms, "
        f"p95 {out['cli_search_resident']['p95_ms']:.0f} ms")
    return out


def _resident_cli(ws: Path, env: dict[str, str], queries: list[str]) -> dict[str, Any]:
    """The same CLI searches while `memsift watch` runs for the workspace (it answers them)."""
    runtime = Path(tempfile.mkdtemp(prefix="msb"))  # a short private folder for the socket
    env = {k: v for k, v in env.items() if k != "MEMSIFT_NO_RESIDENT"}  # ask the watch, start no helper
    env.update(XDG_RUNTIME_DIR=str(runtime), MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED="false")
    watch = subprocess.Popen([*MEMSIFT, "-w", str(ws), "watch", "--json"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in watch.stdout:  # the first sync, then the socket
            if json.loads(line)["event"] == "resident":
                break
        # One untimed search first, as in process: the watch loads its query model on first use.
        run_measured([*MEMSIFT, "-w", str(ws), "search", "warm up", "--json"], env=env)
        times, peaks, answered = [], [], -1
        for q in queries:
            run = run_measured([*MEMSIFT, "-w", str(ws), "search", q, "--json"], env=env)
            if run.rc != 0:
                raise RuntimeError(f"memsift search failed ({run.rc}): {run.stderr[-800:]}")
            json.loads(run.stdout)
            times.append(run.seconds * 1000)
            peaks.append(run.peak_rss_mb)
        watch.send_signal(signal.SIGINT)
        for line in watch.stdout:
            answered += json.loads(line)["event"] == "answered"
        if answered != len(queries):
            raise RuntimeError(f"the watch answered {answered} of {len(queries)} searches")
    finally:
        watch.kill()
        watch.wait()
        shutil.rmtree(runtime, ignore_errors=True)
    return {
        "p50_ms": percentile(times, 0.5),
        "p95_ms": percentile(times, 0.95),
        "peak_rss_mb": max(peaks),
        "mode": "hybrid",
    }


def _qmd(ws: Path, home_dir: Path, queries: list[str], say: Callable[[str], None]) -> dict[str, Any]:
    home = QmdHome(home_dir)
    home.reset()
    out: dict[str, Any] = {}
    run = home.run("collection", "add", str(ws), "--name", "mem", "--mask", "**/*.md", timeout=6 * 3600)
    out["index"] = {"seconds": run.seconds, "peak_rss_mb": run.peak_rss_mb}
    say(f"    qmd collection add: {run.seconds:.1f} s, {run.peak_rss_mb:.0f} MB peak")
    run = home.run("update")
    out["resync"] = {"nochange_s": run.seconds}
    changed = _changed_file(ws)
    original = changed.read_text(encoding="utf-8")
    try:
        changed.write_text(original + "- 23:59 Bench: one more line so this file has changed.\n", encoding="utf-8")
        run = home.run("update")
        out["resync"]["one_changed_s"] = run.seconds
        out["resync"]["peak_rss_mb"] = run.peak_rss_mb
    finally:
        changed.write_text(original, encoding="utf-8")
        home.run("update")
    say(
        f"    qmd update: no change {out['resync']['nochange_s']:.2f} s, one file "
        f"{out['resync']['one_changed_s']:.2f} s"
    )
    times, peaks = [], []
    for q in queries[:CLI_QUERIES]:
        run = home.run("search", "--json", "-n", "6", "--", q)
        json.loads(run.stdout)  # QMD answered with JSON (an empty list is an answer too)
        times.append(run.seconds * 1000)
        peaks.append(run.peak_rss_mb)
    out["cli_search"] = {
        "p50_ms": percentile(times, 0.5),
        "p95_ms": percentile(times, 0.95),
        "peak_rss_mb": max(peaks),
        "mode": "search (BM25)",
    }
    out["index_mb"] = home.size_mb()
    say(f"    qmd search CLI: p50 {out['cli_search']['p50_ms']:.0f} ms, p95 {out['cli_search']['p95_ms']:.0f} ms")
    return out


def _ratios(m: dict[str, Any], q: dict[str, Any]) -> dict[str, float]:
    """How many times faster memsift is than QMD (above 1: memsift is faster)."""
    r = {
        "index_fts_vs_qmd_add": q["index"]["seconds"] / m["index_fts"]["seconds"],
        "nochange_resync": q["resync"]["nochange_s"] / m["resync_fts"]["nochange_s"],
        "one_changed_resync_fts": q["resync"]["one_changed_s"] / m["resync_fts"]["one_changed_s"],
    }
    if "cli_search" in m:
        r["cli_search_p50"] = q["cli_search"]["p50_ms"] / m["cli_search"]["p50_ms"]
        r["cli_search_resident_p50"] = q["cli_search"]["p50_ms"] / m["cli_search_resident"]["p50_ms"]
        r["index_local_vs_qmd_add"] = q["index"]["seconds"] / m["index_local"]["seconds"]
    return r


def run_scale(
    work: Path, sizes: list[int], *, model_sizes: set[int], with_qmd: bool, say: Callable[[str], None] = print
) -> dict[str, Any]:
    queries = sample_queries()
    results: dict[str, Any] = {"queries": len(queries), "cli_queries": CLI_QUERIES}
    if with_qmd and not qmd_available():
        raise SystemExit("qmd is not on PATH (see docs/operators/qmd.md); or run with --no-qmd")
    for n in sizes:
        say(f"  {n:,} daily-log files")
        ws = build_daily_logs(work / "workspaces", n)
        state = work / "state" / f"daily-{n}"
        row: dict[str, Any] = {"files": n, "workspace_mb": _tree_mb(ws)}
        row["memsift"] = _memsift(ws, state, queries, n in model_sizes, say)
        row["chunks"] = row["memsift"]["index_fts"]["chunks"]
        if with_qmd:
            row["qmd"] = _qmd(ws, work / "qmd" / f"daily-{n}", queries, say)
            row["ratios"] = _ratios(row["memsift"], row["qmd"])
        results[str(n)] = row
    return results


def _tree_mb(root: Path) -> float:
    return sum(p.stat().st_size for p in root.rglob("*.md")) / 2**20


if __name__ == "__main__":  # a quick look: python scale.py 1000
    with tempfile.TemporaryDirectory() as d:
        sizes = [int(a) for a in sys.argv[1:]] or [1000]
        print(json.dumps(run_scale(Path(d), sizes, model_sizes=set(sizes), with_qmd=bool(qmd_available())), indent=1))
