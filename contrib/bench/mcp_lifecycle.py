"""`memsift mcp` over stdio as a client meets it: how long until `initialize` is answered, until
`tools/list` and a first `memory_search` are, and how long after SIGTERM (or SIGINT) the process
is gone; optionally with both cores kept busy, as on a machine that is starting a Gateway.

    python contrib/bench/mcp_lifecycle.py [--runs 10] [--load] [--workspace DIR] [--memsift CMD]

Each run is a new process on a warm index (the first run builds it and is left out). Prints the
median and the worst of each figure.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import selectors
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def _burn(stop: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def _read(proc: subprocess.Popen, timeout: float = 120) -> dict:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        raise TimeoutError("no answer")
    return json.loads(proc.stdout.readline())


def one_run(command: list[str], workspace: Path, env: dict[str, str], signum: int) -> dict[str, float]:
    started = time.perf_counter()
    proc = subprocess.Popen([*command, "-w", str(workspace), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)

    def send(message: dict) -> None:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    try:
        send(INIT)
        _read(proc)
        out = {"initialize_s": time.perf_counter() - started}
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        _read(proc)
        out["tools_list_s"] = time.perf_counter() - started
        send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "memory_search",
                    "arguments": {"query": "which database did we pick for the ledger?"},
                },
            }
        )
        _read(proc)
        out["first_search_s"] = time.perf_counter() - started
        signalled = time.perf_counter()
        proc.send_signal(signum)
        proc.wait(30)
        out["exit_after_signal_s"] = time.perf_counter() - signalled
        return out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--load", action="store_true", help="keep every core busy with another process meanwhile")
    parser.add_argument("--workspace", type=Path, default=REPO / "contrib" / "example-workspace")
    parser.add_argument("--memsift", default=f"{shlex.quote(sys.executable)} -m memsift.engine.cli.main",
                        help="the command to run (default: this interpreter's memsift)")
    args = parser.parse_args()
    command = shlex.split(args.memsift)
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as tmp:
        env = {**os.environ, "MEMSIFT_STATE_DIR": str(Path(tmp) / "state"), "MEMSIFT_NO_RESIDENT": "1"}
        stop = multiprocessing.Event()
        burners = (
            [multiprocessing.Process(target=_burn, args=(stop,)) for _ in range(os.cpu_count() or 2)]
            if args.load
            else []
        )
        for b in burners:
            b.start()
        try:
            one_run(command, args.workspace, env, signal.SIGTERM)  # builds the index: not counted
            runs = [one_run(command, args.workspace, env, signal.SIGTERM if i % 2 == 0 else signal.SIGINT)
                    for i in range(args.runs)]
        finally:
            stop.set()
            for b in burners:
                b.join()
    print(f"memsift mcp over stdio, {args.runs} runs, {os.cpu_count()} cores{' kept busy' if args.load else ''}:")
    for key in ("initialize_s", "tools_list_s", "first_search_s", "exit_after_signal_s"):
        values = [r[key] for r in runs]
        print(f"  {key:22} median {statistics.median(values):6.3f} s   worst {max(values):6.3f} s")


if __name__ == "__main__":
    main()
