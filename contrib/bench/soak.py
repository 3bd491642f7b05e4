"""Soak: concurrent searches and reads over loopback MCP/HTTP while notes are being written.

Run:  python contrib/bench/soak.py [--minutes 5] [--clients 8] [--writes-per-s 2] [--json out.json]

Starts `memsift mcp --http` on a copy of the example workspace (plus 200 synthetic daily logs),
then for the given time: `--clients` MCP sessions call memory_search and memory_get in a loop,
and a writer appends a note with a unique token to today's daily log every 1/writes-per-s
seconds (as `memsift note` does). The server's file watcher keeps the index fresh meanwhile.
Afterwards every token must be findable (a missing one is a lost update). Prints throughput,
latency p50/p95/p99, errors (must be 0), lost updates (must be 0) and the server's memory growth.
Not a test: tests never assert timings.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "contrib" / "example-workspace"
QUERIES = [
    "which database did we pick for the ledger service?", "what is my sister allergic to?",
    "why did the nightly export job fail?", "hotel shortlist for Lisbon", "a828e60", "meeting preferences",
    "certificate rotation", "deploy canary rollback", "who reviews the payments code", "数据",
]
TOPICS = ["deploy", "ledger", "webhooks", "grafana", "oncall", "retro", "kafka", "billing", "search", "mobile"]


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _tree_rss_kb(pid: int) -> int:
    """RSS of the server and its children (QMD, if any)."""
    total = _rss_kb(pid)
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        for c in child.read_text().split():
            try:
                total += _tree_rss_kb(int(c))
            except OSError:
                pass
    return total


def _workspace(root: Path, files: int) -> Path:
    ws = root / "ws"
    shutil.copytree(EXAMPLE, ws)
    rng = random.Random(7)
    for i in range(files):
        day = f"2025-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}"
        lines = [f"# {day}", ""] + [
            f"- {9 + j}:{rng.randrange(60):02d} {rng.choice(TOPICS)}: {' '.join(rng.choice(TOPICS) for _ in range(12))}"
            for j in range(8)
        ]
        (ws / "memory" / f"{day}-{i}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ws


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


async def _soak(url: str, seconds: float, clients: int, writes_per_s: float, ws: Path, pid: int) -> dict:
    from mcp import Client  # noqa: PLC0415

    latencies: dict[str, list[float]] = {"memory_search": [], "memory_get": []}
    errors: list[str] = []
    tokens: list[str] = []
    rss: list[int] = []
    deadline = time.monotonic() + seconds

    async def client_loop(n: int) -> None:
        rng = random.Random(n)
        async with Client(url, read_timeout_seconds=60) as client:
            while time.monotonic() < deadline:
                if rng.random() < 0.75:
                    name, args = "memory_search", {"query": rng.choice(QUERIES)}
                else:
                    name, args = "memory_get", {"path": "MEMORY.md", "from": rng.randint(1, 30), "lines": 5}
                started = time.perf_counter()
                try:
                    result = await client.call_tool(name, args)
                    body = result.structured_content or {}
                    if result.is_error or body.get("disabled") or body.get("error"):
                        errors.append(f"{name}: {body.get('error') or result.content}")
                except Exception as exc:  # counted, never hidden
                    errors.append(f"{name}: {type(exc).__name__}: {exc}")
                latencies[name].append((time.perf_counter() - started) * 1000)

    async def writer() -> None:
        log = ws / "memory" / f"{datetime.now():%Y-%m-%d}.md"
        n = 0
        while time.monotonic() < deadline:
            token = f"soaktoken{n:05d}x{random.randrange(10**6):06d}"
            with log.open("a", encoding="utf-8") as fh:
                fh.write(f"- {datetime.now():%H:%M} remember {token} for the soak run\n")
            tokens.append(token)
            n += 1
            await anyio.sleep(1 / writes_per_s)

    async def sample_rss() -> None:
        while time.monotonic() < deadline:
            rss.append(_tree_rss_kb(pid))
            await anyio.sleep(1)

    async with anyio.create_task_group() as tg:
        for n in range(clients):
            tg.start_soon(client_loop, n)
        tg.start_soon(writer)
        tg.start_soon(sample_rss)

    # Lost updates: after the watcher catches up, every token must be found.
    await anyio.sleep(5)
    lost = []
    async with Client(url, read_timeout_seconds=60) as client:
        for token in tokens:
            result = await client.call_tool("memory_search", {"query": token, "maxResults": 3, "minScore": 0.0})
            hits = (result.structured_content or {}).get("results", [])
            if not any(token in h["snippet"] for h in hits):
                lost.append(token)
    calls = sum(len(v) for v in latencies.values())
    every = [x for v in latencies.values() for x in v]
    return {
        "seconds": seconds,
        "clients": clients,
        "calls": calls,
        "throughputPerS": round(calls / seconds, 1),
        "latencyMs": {
            "p50": round(_pct(every, 0.5), 1),
            "p95": round(_pct(every, 0.95), 1),
            "p99": round(_pct(every, 0.99), 1),
        },
        "byTool": {
            k: {"calls": len(v), "p50": round(_pct(v, 0.5), 1), "p99": round(_pct(v, 0.99), 1)}
            for k, v in latencies.items()
        },
        "errors": len(errors),
        "errorSamples": errors[:5],
        "writes": len(tokens),
        "lostUpdates": len(lost),
        "lostSamples": lost[:5],
        "rssMb": {
            "first": round(rss[0] / 1024, 1) if rss else None,
            "last": round(rss[-1] / 1024, 1) if rss else None,
            "max": round(max(rss) / 1024, 1) if rss else None,
            "growthAfterWarmupMb": round((rss[-1] - statistics.median(rss[: max(1, len(rss) // 10)])) / 1024, 1)
            if rss
            else None,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--writes-per-s", type=float, default=2)
    ap.add_argument("--files", type=int, default=200, help="synthetic daily logs added to the example workspace")
    ap.add_argument("--backend", choices=["builtin", "qmd"], default="builtin")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="memsift-soak-") as tmp:
        root = Path(tmp)
        ws = _workspace(root, args.files)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "MEMSIFT_STATE_DIR": str(root / "state"), "XDG_CONFIG_HOME": str(root / "xdg")}
        subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "-b", args.backend, "index"],
                       env=env, check=True, capture_output=True)
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memsift.engine.cli.main",
                "-w",
                str(ws),
                "-b",
                args.backend,
                "mcp",
                "--http",
                "--port",
                str(port),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(root / "server.log", "wb"),
        )
        try:
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    time.sleep(0.2)
            result = anyio.run(lambda: _soak(f"http://127.0.0.1:{port}/mcp", args.minutes * 60, args.clients,
                                             args.writes_per_s, ws, server.pid))
        finally:
            server.terminate()
            server.wait(timeout=30)
        result.update(backend=args.backend, files=args.files + 6, cpus=os.cpu_count())

    print(f"soak over MCP/HTTP, {args.backend} backend, {result['files']} files, {args.clients} clients, "
          f"{args.minutes:g} min, {args.writes_per_s:g} writes/s")
    print(f"  calls            {result['calls']} ({result['throughputPerS']}/s)")
    print(
        f"  latency p50/p95/p99  {result['latencyMs']['p50']} / {result['latencyMs']['p95']} / "
        f"{result['latencyMs']['p99']} ms"
    )
    for tool, fig in result["byTool"].items():
        print(f"    {tool:14} {fig['calls']} calls, p50 {fig['p50']} ms, p99 {fig['p99']} ms")
    print(f"  errors           {result['errors']}")
    print(f"  writes / lost    {result['writes']} / {result['lostUpdates']}")
    r = result["rssMb"]
    print(
        f"  server RSS       first {r['first']} MB, max {r['max']} MB, last {r['last']} MB, growth after warm-up "
        f"{r['growthAfterWarmupMb']} MB"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
