"""Search latency of the builtin backend and the QMD sidecar on the same workspace.

Run:  python contrib/bench/qmd_vs_builtin.py [--files 200]   (needs `qmd` 2.8.3 and Node 22 on PATH)
Builds a workspace from the shipped example plus synthetic daily logs, warms both backends, then
times the same queries in process (a long-running host) and as whole CLI calls.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
QUERIES = ["Lisbon hotels", "ledger PostgreSQL decision", "ECONNRESET export job", "certificate rotation", "数据", "sprint planning", "peanut allergy", "Renovate"]
WORDS = "ledger deploy incident review budget hotel coffee migration schema backlog standup retro kafka ramen passport invoice".split()


def build_workspace(root: Path, n_files: int) -> Path:
    ws = root / "ws"
    shutil.copytree(REPO / "contrib" / "example-workspace", ws)
    rng = random.Random(5)
    for i in range(n_files):
        day = f"2025-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}"
        lines = [f"# {day}", ""] + [f"- {rng.randint(8, 18):02d}:{rng.randint(0, 59):02d} " + " ".join(rng.choices(WORDS, k=12)) for _ in range(20)]
        (ws / "memory" / f"{day}-{i}.md").write_text("\n".join(lines) + "\n")
    return ws


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def in_process(ws: Path, state: Path) -> dict[str, dict[str, float]]:
    from memsift.engine import open_manager, resolve_config  # noqa: PLC0415

    os.environ["MEMSIFT_STATE_DIR"] = str(state)
    out = {}
    for backend in ("builtin", "qmd"):
        settings = resolve_config(None, workspace=ws)
        manager = open_manager(settings, backend=backend)
        await manager.sync()
        await manager.search("warm up")
        times = []
        for _ in range(5):
            for q in QUERIES:
                t = time.perf_counter()
                answer = await manager.search(q)
                times.append((time.perf_counter() - t) * 1000)
                assert answer.backend == backend, answer.fallback
        await manager.aclose()
        out[backend] = {"p50_ms": statistics.median(times), "p95_ms": pct(times, 0.95)}
    return out


def cli(ws: Path, state: Path) -> dict[str, float]:
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(state), "XDG_CONFIG_HOME": str(state / "xdg")}
    out = {}
    for backend in ("builtin", "qmd"):
        times = []
        for q in QUERIES:
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "-b", backend, "search", q, "--json"],
                               env=env, capture_output=True, text=True, check=True)
            times.append(time.perf_counter() - t)
            assert json.loads(r.stdout)["backend"] == backend
        out[backend] = statistics.median(times)
    # qmd itself, as a user would call it on the same index (memsift's isolated home)
    home = state / "agents" / "main" / "qmd"
    qenv = {**os.environ, "XDG_CONFIG_HOME": str(home / "xdg-config"), "XDG_CACHE_HOME": str(home / "xdg-cache")}
    qenv.pop("CI", None)
    times = []
    for q in QUERIES:
        t = time.perf_counter()
        subprocess.run(["qmd", "--index", "memsift", "search", q, "--json"], env=qenv, capture_output=True, check=True, cwd=home)
        times.append(time.perf_counter() - t)
    out["bare qmd search"] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=200)
    args = ap.parse_args()
    if not shutil.which("qmd"):
        sys.exit("qmd is not on PATH (see spec/qmd.md section 2, or .ci/run)")
    with tempfile.TemporaryDirectory() as d:
        ws = build_workspace(Path(d), args.files)
        state = Path(d) / "state"
        inproc = anyio.run(in_process, ws, state)
        calls = cli(ws, state)
    print(f"workspace: {args.files + 6} files, {len(QUERIES)} queries × 5")
    for b, f in inproc.items():
        print(f"in process  {b:8}  p50 {f['p50_ms']:7.1f} ms   p95 {f['p95_ms']:7.1f} ms")
    for b, s in calls.items():
        print(f"CLI call    {b:16}  median {s * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
