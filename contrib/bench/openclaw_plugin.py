"""A warm `memory_search` through a real OpenClaw Gateway's `POST /tools/invoke`: memsift in the
memory slot (contrib/openclaw-plugin) beside OpenClaw's own memory-core, on the same workspace and
questions, in one run.

    python contrib/bench/openclaw_plugin.py [--calls 30] [--workspace DIR] [--openclaw openclaw]

Needs OpenClaw 2026.9 (`openclaw` on PATH, Node 24) and memsift on PATH. Each side gets a HOME of
its own and a Gateway on loopback; memory-core runs with `memory.search.provider: "none"`
(keyword search: without an embedding key it degrades to that anyway) and its index built first
(`openclaw memory index`). After three untimed calls, the calls alternate between the sides; each
figure is a whole HTTP request, as a client sees it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = ["which database did we pick for the ledger?", "why did the nightly export job fail?", "a828e60",
             "hotel shortlist for Lisbon", "what is my sister allergic to?", "certificate rotation"]
TOKEN = "bench-token"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Side:
    def __init__(self, name: str, root: Path, workspace: Path, openclaw: str, *, memsift: bool) -> None:
        self.name, self.root, self.openclaw, self.port = name, root, openclaw, _port()
        shutil.copytree(workspace, root / "ws")
        (root / ".openclaw").mkdir(parents=True)
        search = {"query": {"maxResults": 6}} | ({} if memsift else {"provider": "none"})
        (root / ".openclaw" / "openclaw.json").write_text(json.dumps({
            "agents": {"defaults": {"workspace": str(root / "ws")}}, "memory": {"search": search},
            "logging": {"file": str(root / "openclaw.log")}}))
        self.env = {**os.environ, "HOME": str(root)}
        self.env.pop("OPENCLAW_CONFIG_PATH", None)
        self.env.pop("OPENCLAW_STATE_DIR", None)
        if memsift:
            self.cli(
                "plugins",
                "install",
                "--link",
                "--force",
                "--accept-capabilities",
                str(REPO / "contrib" / "openclaw-plugin"),
            )
        else:
            self.cli("memory", "index")

    def cli(self, *args: str) -> None:
        subprocess.run(
            [self.openclaw, *args], env=self.env, cwd=self.root, check=True, capture_output=True, timeout=600
        )

    def start(self) -> None:
        self.out = open(self.root / "gateway.out", "w")
        subprocess.Popen([self.openclaw, "gateway", "run", "--allow-unconfigured", "--bind", "loopback", "--port",
                          str(self.port), "--auth", "token", "--token", TOKEN], env=self.env, cwd=self.root,
                         stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)

    def search(self, client: httpx.Client, query: str) -> tuple[float, dict]:
        started = time.perf_counter()
        r = client.post(
            f"http://127.0.0.1:{self.port}/tools/invoke",
            json={"tool": "memory_search", "args": {"query": query}},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=300,
        )
        ms = (time.perf_counter() - started) * 1000
        return ms, r.json().get("result", {}).get("details", {}) if r.status_code == 200 else {"error": r.text[:200]}

    def wait(self, client: httpx.Client) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                self.search(client, "warm up")
                return
            except httpx.HTTPError:
                time.sleep(1)
        raise SystemExit(f"{self.name}: the Gateway did not start ({self.root / 'gateway.out'})")

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for entry in Path("/proc").iterdir():
                try:
                    if entry.name.isdigit() and f"HOME={self.root}\0".encode() in (entry / "environ").read_bytes():
                        os.kill(int(entry.name), sig)
                except OSError:
                    pass
            time.sleep(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="timed calls per side")
    parser.add_argument("--workspace", type=Path, default=REPO / "contrib" / "example-workspace")
    parser.add_argument("--openclaw", default="openclaw")
    args = parser.parse_args()
    version = subprocess.run([args.openclaw, "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="openclaw-bench-") as tmp:
        sides = [Side("memsift (plugin)", Path(tmp) / "memsift", args.workspace, args.openclaw, memsift=True),
                 Side("memory-core", Path(tmp) / "core", args.workspace, args.openclaw, memsift=False)]
        try:
            for side in sides:
                side.start()
            with httpx.Client() as client:
                for side in sides:
                    side.wait(client)
                    for q in QUESTIONS[:3]:
                        side.search(client, q)
                times: dict[str, list[float]] = {s.name: [] for s in sides}
                top: dict[str, str] = {}
                for i in range(args.calls):
                    for side in sides:
                        ms, details = side.search(client, QUESTIONS[i % len(QUESTIONS)])
                        times[side.name].append(ms)
                        if i == 0:
                            hits = details.get("results", [])
                            top[side.name] = (
                                f"{hits[0]['path']}:{hits[0]['startLine']}-{hits[0]['endLine']}" if hits else "none"
                            )
        finally:
            for side in sides:
                side.stop()
    print(f"warm memory_search through POST /tools/invoke, {version}, {os.cpu_count()} cores, "
          f"{args.calls} calls a side over {len(QUESTIONS)} questions:")
    for name, values in times.items():
        values.sort()
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        print(f"  {name:18} p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms   "
              f"top hit of {QUESTIONS[0]!r}: {top[name]}")


if __name__ == "__main__":
    main()
