"""Figures for the foundation: index the shipped example, search latency, local embedding throughput.

Run:  python contrib/bench/foundation.py [--json out.json]
Prints a table; not part of the tests (tests never assert timings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "contrib" / "example-workspace"
QUERIES = [
    "which database did we pick for the ledger service?",
    "what is my sister allergic to?",
    "why did the nightly export job fail?",
    "hotel shortlist for Lisbon",
    "a828e60",
    "数据",
    "meeting preferences",
    "certificate rotation",
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _cli(state: Path, ws: Path, *args: str) -> float:
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(state), "XDG_CONFIG_HOME": str(state / "xdg")}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def _chunks_for_throughput(n: int = 256, size: int = 1600) -> list[str]:
    import pydoc_data.topics as topics  # noqa: PLC0415  (Python's own reference text, like the spec's survey)

    text = " ".join(topics.topics.values())
    words = text.split()
    out, cur = [], []
    for w in words:
        cur.append(w)
        if sum(len(x) + 1 for x in cur) >= size:
            out.append(" ".join(cur))
            cur = []
            if len(out) == n:
                break
    return out


async def main_async(tmp: Path) -> dict:
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415
    from memsift.engine.config import MemsiftConfig, resolve_agent  # noqa: PLC0415
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

    ws = tmp / "ws"
    shutil.copytree(EXAMPLE, ws)
    settings = resolve_agent(MemsiftConfig.model_validate({"stateDir": str(tmp / "state")}), workspace=ws, environ={})
    figures: dict = {}

    t0 = time.perf_counter()
    provider = LocalMiniLMProvider()
    manager = BuiltinSearchManager(settings, provider=provider)
    report = await manager.sync(reason="bench")
    figures["index_example_s_in_process_cold"] = time.perf_counter() - t0
    figures["example_files"] = report.files_indexed
    figures["example_chunks"] = report.chunks_written

    await manager.search("warm up")
    lat = []
    for _ in range(5):
        for q in QUERIES:
            t = time.perf_counter()
            await manager.search(q)
            lat.append((time.perf_counter() - t) * 1000)
    figures["search_ms_in_process_p50"] = statistics.median(lat)
    figures["search_ms_in_process_p95"] = _pct(lat, 0.95)
    await manager.aclose()

    chunks = _chunks_for_throughput()
    provider.embed_sync(chunks[:8])
    t = time.perf_counter()
    provider.embed_sync(chunks)
    figures["local_chunks_per_s"] = len(chunks) / (time.perf_counter() - t)
    figures["local_chunk_chars"] = statistics.mean(len(c) for c in chunks)

    state = tmp / "cli-state"
    figures["index_example_s_cli"] = _cli(state, ws, "index")
    cli = [_cli(state, ws, "search", q) for q in QUERIES]
    figures["search_s_cli_median"] = statistics.median(cli)
    figures["search_s_cli_max"] = max(cli)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        figures = anyio.run(main_async, Path(d))
    figures["machine"] = f"{platform.machine()} · {os.cpu_count()} cores · Python {platform.python_version()}"
    width = max(len(k) for k in figures)
    for k, v in figures.items():
        print(f"{k.ljust(width)}  {v:.3f}" if isinstance(v, float) else f"{k.ljust(width)}  {v}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
