"""How fast a fresh `memsift mcp` answers `initialize` and ends on SIGTERM, on a busy machine.

Each try starts `memsift mcp` over stdio with a new HOME (no index, no model cache), sends an
`initialize`, reads the answer, waits `--after` seconds (a phase: 0 is right after the handshake,
while the SDK, the config and the model load), sends SIGTERM and times the exit. `--loops` busy
loops run beside it (the Gateway's own work on a small machine). Prints each try and the worst.

    python contrib/bench/mcp_stop.py --loops 6 --tries 5 --after 0,0.5,1.5,4
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def _busy() -> None:
    while True:
        pass


def one_try(
    after: float, workspace: Path, memsift: list[str], signum: int = signal.SIGTERM
) -> tuple[float, float, int, bool]:
    """(seconds to the initialize answer, seconds from the signal to exit, exit status, whether
    stderr showed a traceback)."""
    home = Path(tempfile.mkdtemp(prefix="mcp-stop-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSIFT", "XDG_"))}
    env.update(HOME=str(home), MEMSIFT_NO_RESIDENT="1")
    try:
        started = time.monotonic()
        err = open(home / "stderr", "w+b")
        proc = subprocess.Popen([*memsift, "-w", str(workspace), "mcp"], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err)
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        proc.stdin.flush()
        buf = b""
        while b"\n" not in buf:
            if not select.select([proc.stdout], [], [], 30)[0]:
                raise SystemExit("no initialize answer in 30 s")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise SystemExit("the server ended before answering initialize")
            buf += chunk
        answered = time.monotonic() - started
        time.sleep(after)
        sent = time.monotonic()
        proc.send_signal(signum)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        ended = time.monotonic() - sent
        err.seek(0)
        return answered, ended, code, b"Traceback" in err.read()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", type=int, default=6, help="busy loops beside the server")
    ap.add_argument("--tries", type=int, default=5, help="tries per phase")
    ap.add_argument("--after", default="0,0.5,1.5,4", help="seconds after the answer before SIGTERM, comma-separated")
    ap.add_argument("--workspace", default=str(REPO / "contrib" / "example-workspace"))
    ap.add_argument("--signal", default="TERM", choices=["TERM", "INT"], help="the signal sent")
    args = ap.parse_args()
    memsift = [shutil.which("memsift") or sys.executable + " -m memsift.engine.cli.main"]
    memsift = memsift[0].split() if " " in memsift[0] else memsift
    loops = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.loops)]
    for p in loops:
        p.start()
    worst_answer = worst_exit = 0.0
    tracebacks = 0
    try:
        for after in (float(a) for a in args.after.split(",")):
            for n in range(args.tries):
                answered, ended, code, traceback = one_try(after, Path(args.workspace), memsift,
                                                           getattr(signal, f"SIG{args.signal}"))
                worst_answer, worst_exit = max(worst_answer, answered), max(worst_exit, ended)
                tracebacks += traceback
                print(
                    f"SIG{args.signal} {after:>4} s after the answer, try {n + 1}: initialize answered in "
                    f"{answered:.2f} s, "
                    f"exit {ended:.2f} s after the signal (status {code}){', a traceback' if traceback else ''}",
                    flush=True,
                )
    finally:
        for p in loops:
            p.terminate()
    print(f"worst: initialize {worst_answer:.2f} s, exit after SIG{args.signal} {worst_exit:.2f} s, {tracebacks} "
          f"traceback(s) ({args.loops} busy loops on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
