"""Freshness figures: time from a file write to searchable (the watcher), and searches per second
sustained by 4 searcher processes while a writer rebuilds the index. Real local model throughout.

Run:  python contrib/bench/freshness.py [--seconds 20] [--files 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]


def build(root: Path, n: int) -> Path:
    ws = root / "ws"
    shutil.copytree(REPO / "contrib" / "example-workspace", ws)
    for i in range(n):
        lines = [f"- {h:02d}:00 standup notes {i}.{h}: deploy, ledger review, incident follow-up" for h in range(8, 20)]
        (ws / "memory" / f"2025-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}-{i}.md").write_text("\n".join(lines) + "\n")
    return ws


async def write_to_searchable(ws: Path, state: Path, debounce_ms: int, rounds: int = 5) -> list[float]:
    os.environ["MEMSIFT_STATE_DIR"] = str(state)
    from memsift.engine import open_manager, resolve_config  # noqa: PLC0415
    from memsift.engine.compose.host import serve_freshness  # noqa: PLC0415

    os.environ["MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SYNC__WATCHDEBOUNCEMS"] = str(debounce_ms)
    settings = resolve_config(None, workspace=ws)
    manager = open_manager(settings)
    latencies = []
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: serve_freshness(manager, settings, task_status=task_status))
        for r in range(rounds):
            word = f"zanzibar{debounce_ms}x{r}quokka"
            started = time.perf_counter()
            (ws / "memory" / f"fresh-{debounce_ms}-{r}.md").write_text(f"- a brand new note about {word}\n")
            while True:
                # Search without the search-time sync, so only the watcher can make it visible.
                manager.freshness.settled()
                hits = (await manager.search(word, min_score=0)).results
                if any(word in h.snippet for h in hits):
                    break
                await anyio.sleep(0.02)
            latencies.append(time.perf_counter() - started)
            await anyio.sleep(0.3)
        tg.cancel_scope.cancel()
    await manager.aclose()
    return latencies


SEARCHER = """
import json, os, sys, time, anyio
from memsift.engine import open_manager
async def main():
    m = open_manager(workspace=sys.argv[1])
    await m.search("warm up")
    n, errors, lat = 0, 0, []
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        t = time.perf_counter()
        try:
            a = await m.search("dark roast coffee oat milk")
            ok = bool(a.results)
        except Exception:
            ok = False
        lat.append(time.perf_counter() - t)
        n += 1
        errors += 0 if ok else 1
    print(json.dumps({"searches": n, "errors": errors, "p95": sorted(lat)[int(0.95 * (len(lat) - 1))]}))
anyio.run(main)
"""


def concurrent(ws: Path, state: Path, seconds: float) -> dict:
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(state)}
    env.pop("MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SYNC__WATCHDEBOUNCEMS", None)
    subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "index"],
        env=env,
        check=True,
        capture_output=True,
    )
    searchers = [
        subprocess.Popen(
            [sys.executable, "-c", SEARCHER, str(ws), str(seconds)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    rebuilds = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "index", "--force"],
            env=env,
            check=True,
            capture_output=True,
        )
        rebuilds += 1
    results = [json.loads(p.communicate()[0]) for p in searchers]
    total = sum(r["searches"] for r in results)
    return {"searches_per_s": total / seconds, "errors": sum(r["errors"] for r in results), "rebuilds": rebuilds,
            "p95_ms": max(r["p95"] for r in results) * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--files", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        ws = build(Path(d), args.files)
        for debounce in (1500, 200):
            lat = anyio.run(write_to_searchable, ws, Path(d) / f"state-{debounce}", debounce)
            print(
                f"write → searchable (watchDebounceMs {debounce}): median {statistics.median(lat):.2f} s, max "
                f"{max(lat):.2f} s over {len(lat)} writes"
            )
        c = concurrent(ws, Path(d) / "state-conc", args.seconds)
        print(f"4 searcher processes during {c['rebuilds']} forced rebuilds in {args.seconds:.0f} s: "
              f"{c['searches_per_s']:.0f} searches/s in all, p95 {c['p95_ms']:.1f} ms, {c['errors']} errors")


if __name__ == "__main__":
    main()
