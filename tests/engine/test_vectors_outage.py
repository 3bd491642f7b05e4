"""A provider that fails while notes are indexed, through the doors that sync: `memsift index` (cold,
text and --json) and `memsift watch --json`. The notes stay searchable by keyword; each door says
the vectors were not made and why (before: `index` printed "0 embedded" and exited 0, and a sync
with nothing changed said nothing at all), `status` in a later process says it too, and the first
sync after the provider is back makes them. The API and every backend: the backend contract."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from provider_server import Fault, ProviderServer

DOWN = Fault(400, {"error": {"message": "the embeddings model is overloaded"}})


def _setup(tmp_path: Path, server: ProviderServer) -> tuple[Path, dict[str, str]]:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- the user drinks dark roast coffee\n")
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {
        "provider": "openai", "fallback": "none", "remote": {"baseUrl": server.base_url, "apiKey": server.key},
        "sync": {"watchDebounceMs": 200}}}}}))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
           "MEMSIFT_NO_RESIDENT": "1", "MEMSIFT_CONFIG": str(cfg), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    return ws, env


def _cli(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), *args],
                          capture_output=True, text=True, env=env, timeout=180)


def test_index_says_the_vectors_were_not_made_exits_5_and_the_next_index_makes_them(tmp_path):
    with ProviderServer("openai") as server:
        ws, env = _setup(tmp_path, server)
        assert _cli(ws, env, "index").returncode == 0
        (ws / "memory" / "2026-11-30.md").write_text("- adopted a greyhound named Pixel\n")
        server.faults = [DOWN] * 100
        failed = _cli(ws, env, "index")
        assert failed.returncode == 5, failed.stderr
        assert "1 file(s) indexed" in failed.stdout and "Traceback" not in failed.stderr
        assert "vectors could not be made" in failed.stderr and "overloaded" in failed.stderr
        assert "memorySearch.fallback" in failed.stderr  # what to do
        # Nothing changed since: before, this sync tried the provider again and said nothing.
        again = _cli(ws, env, "index", "--json")
        assert again.returncode == 5 and "overloaded" in json.loads(again.stdout)["vectorsError"]
        status = json.loads(_cli(ws, env, "status", "--json").stdout)  # a later process knows why too
        assert "overloaded" in status["index"]["lastEmbedError"]
        assert status["vector"]["pending"]["done"] < status["vector"]["pending"]["total"]
        text = _cli(ws, env, "status").stdout
        assert "Last embed error" in text and "being made" in text
        found = json.loads(_cli(ws, env, "search", "--json", "greyhound Pixel").stdout)
        assert found["results"][0]["path"] == "memory/2026-11-30.md"  # by keyword meanwhile
        server.faults = []
        healed = _cli(ws, env, "index", "--json")
        assert healed.returncode == 0, healed.stderr
        report = json.loads(healed.stdout)
        assert report["chunksEmbedded"] >= 1 and report["filesIndexed"] == 0 and report["vectorsError"] is None
        status = json.loads(_cli(ws, env, "status", "--json").stdout)
        assert status["index"]["lastEmbedError"] is None and status["vector"]["pending"] is None


def test_watch_reports_each_sync_whose_vectors_were_not_made(tmp_path):
    with ProviderServer("openai") as server:
        ws, env = _setup(tmp_path, server)
        proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "watch", "--json"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        events: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=lambda: [events.put(json.loads(line)) for line in proc.stdout], daemon=True).start()

        seen: list[dict] = []

        def next_event(kind: str, reason: str | None = None) -> dict:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    seen.append(events.get(timeout=1))
                except queue.Empty:
                    continue
                if seen[-1]["event"] == kind and seen[-1].get("reason", reason) == reason:
                    return seen[-1]
            proc.kill()
            raise AssertionError(f"no {kind} {reason} in {seen}; stderr: {proc.stderr.read()[-2000:]}")

        def next_sync(reason: str) -> dict:
            return next_event("synced", reason)["report"]

        try:
            next_event("ready")
            server.faults = [DOWN] * 100
            (ws / "memory" / "2026-11-30.md").write_text("- adopted a greyhound named Pixel\n")
            report = next_sync("watch")
            assert report["filesIndexed"] == 1 and "overloaded" in report["vectorsError"]
            server.faults = []
            (ws / "memory" / "2026-12-01.md").write_text("- walked Pixel along the canal\n")
            report = next_sync("watch")
            assert report["vectorsError"] is None and report["chunksEmbedded"] >= 2  # the new note's and the left one
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
