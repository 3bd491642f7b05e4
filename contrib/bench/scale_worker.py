"""One measured memsift operation in a process of its own (so its peak RSS is its own).

    python scale_worker.py index  WS STATE {fts|local}          full index from nothing
    python scale_worker.py resync WS STATE {fts|local} FILE     no-change sync, then one file changed
    python scale_worker.py search WS STATE QUERIES_JSON         in-process latency: fts, vector, hybrid

Prints one JSON object on stdout. `fts` indexes with no embedding provider (keyword only);
`local` with the default local model. Called by scale.py.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics import percentile  # noqa: E402
from quality import local_provider, settings_for  # noqa: E402

SEARCH_ROUNDS = 3  # every query this many times per mode, after one warm-up query


def manager(ws: Path, state: Path, kind: str, memory_search: dict | None = None):
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415
    from memsift.engine.embeddings import ProviderSelection  # noqa: PLC0415

    from memsift.engine.compose.factory import ranked  # noqa: PLC0415  (the evidence ranker, as shipped)

    settings = settings_for(ws, state / kind, memory_search or {}, frozen=False)
    if kind == "fts":
        return ranked(
            BuiltinSearchManager(
                settings, selection=ProviderSelection(None, "none", unavailable_reason="benchmark: keyword only")
            ),
            settings,
            "builtin",
        )
    return ranked(BuiltinSearchManager(settings, provider=local_provider()), settings, "builtin")


def index_size_mb(state: Path, kind: str) -> float:
    folder = state / kind / "memory"
    return sum(p.stat().st_size for p in folder.glob("main-*.sqlite*")) / 2**20


async def do_index(ws: Path, state: Path, kind: str) -> dict:
    m = manager(ws, state, kind)
    try:
        t0 = time.perf_counter()
        report = await m.sync(reason="bench")
        seconds = time.perf_counter() - t0
        status = await m.status()
    finally:
        await m.aclose()
    return {
        "seconds": seconds,
        "files": report.files_indexed,
        "chunks": status.chunks,
        "chunks_per_s": status.chunks / seconds if seconds else None,
        "embedded": report.chunks_embedded,
        "index_mb": index_size_mb(state, kind),
    }


async def do_resync(ws: Path, state: Path, kind: str, changed: Path) -> dict:
    original = changed.read_text(encoding="utf-8")
    out = {}
    m = manager(ws, state, kind)
    try:
        t0 = time.perf_counter()
        report = await m.sync(reason="bench")  # a fresh process: compares every file with the index
        out["nochange_s"] = time.perf_counter() - t0
        assert report.files_indexed == 0, report
        changed.write_text(original + "- 23:59 Bench: one more line so this file has changed.\n", encoding="utf-8")
        t0 = time.perf_counter()
        report = await m.sync(reason="bench")
        out["one_changed_s"] = time.perf_counter() - t0
        assert report.files_indexed == 1, report
    finally:
        changed.write_text(original, encoding="utf-8")
        await m.sync(reason="bench")  # the index matches the workspace again
        await m.aclose()
    return out


async def do_search(ws: Path, state: Path, queries: list[str]) -> dict:
    modes = {
        "fts": ("fts", {}),
        "vector": ("local", {"query": {"hybrid": {"enabled": False}}}),
        "hybrid": ("local", {}),
    }
    out = {}
    for mode, (kind, ms) in modes.items():
        m = manager(ws, state, kind, ms)
        try:
            await m.sync(reason="bench")  # a long-running host: synced once, then kept fresh by its watcher
            await m.search("warm up")
            took = []
            for _ in range(SEARCH_ROUNDS):
                for q in queries:
                    t0 = time.perf_counter()
                    answer = await m.search(q)  # query embedding included
                    took.append((time.perf_counter() - t0) * 1000)
                    assert answer.mode in ("fts-only", "vector-only", "hybrid"), answer.mode
        finally:
            await m.aclose()
        out[mode] = {"p50_ms": percentile(took, 0.5), "p95_ms": percentile(took, 0.95), "n": len(took)}
    return out


def main() -> None:
    op, ws, state = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if op == "index":
        result = anyio.run(do_index, ws, state, sys.argv[4])
    elif op == "resync":
        result = anyio.run(do_resync, ws, state, sys.argv[4], Path(sys.argv[5]))
    elif op == "search":
        result = anyio.run(do_search, ws, state, json.loads(Path(sys.argv[4]).read_text()))
    else:
        sys.exit(f"unknown operation {op!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
