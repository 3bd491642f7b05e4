"""What the evidence ranker and the lexical expansion cost a search (issue 30): in-process hybrid
latency (query embedding included) on synthetic daily logs, with both on (the default), each
off, and both off, the four interleaved query by query (each query starting at another of them)
in one process on one index, so the machine's drift and the caches favour none.

    python contrib/bench/stage_speed.py                 # 10,000 files (indexes once, about 2 min)
    python contrib/bench/stage_speed.py --files 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from metrics import percentile  # noqa: E402
from scale_worker import manager  # noqa: E402
from synthetic import build_daily_logs, sample_queries  # noqa: E402

CONFIGS = {
    "default (ranker + expansion)": {},
    "ranker off": {"query": {"ranker": {"enabled": False}}},
    "expansion off": {"query": {"expansion": "off"}},
    "both off (before issue 30)": {"query": {"ranker": {"enabled": False}, "expansion": "off"}},
}


async def _main(args: argparse.Namespace) -> None:
    ws = build_daily_logs(args.work / f"stage-speed-{args.files}", args.files)
    state = args.work / "state" / f"stage-speed-{args.files}"
    managers = {label: manager(ws, state, "local", ms) for label, ms in CONFIGS.items()}
    try:
        first = next(iter(managers.values()))
        t0 = time.perf_counter()
        await first.sync(reason="bench")
        print(f"{args.files} files indexed in {time.perf_counter() - t0:.0f} s", flush=True)
        for m in managers.values():
            await m.search("warm up")
        took: dict[str, list[float]] = {label: [] for label in managers}
        queries = sample_queries()
        labels = list(managers)
        for _ in range(args.rounds):
            for i, q in enumerate(queries):
                # Each query starts at another config: whichever runs first pays for what the
                # others then find cached (the query's embedding, pages of the index).
                for label in labels[i % len(labels):] + labels[: i % len(labels)]:
                    m = managers[label]
                    t0 = time.perf_counter()
                    await m.search(q)
                    took[label].append((time.perf_counter() - t0) * 1000)
    finally:
        for m in managers.values():
            await m.aclose()
    base = percentile(took["both off (before issue 30)"], 0.95)
    print(f"in-process hybrid search, {args.files} files, {len(queries) * args.rounds} searches each")
    for label, t in took.items():
        p95 = percentile(t, 0.95)
        print(f"  {label:30} p50 {percentile(t, 0.5):6.1f} ms   p95 {p95:6.1f} ms   ({p95 / base:.2f}× before)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    anyio.run(_main, ap.parse_args())


if __name__ == "__main__":
    main()
