"""A provider that never answers costs a search its short query-embedding budget, not minutes: the
search answers by keyword and says so. After repeated failures a circuit stops asking the
provider for a while (also across CLI processes), then tries again and closes when it answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.config.models import MemorySearchConfig
from memsift.engine.embeddings import create_provider
from provider_server import ProviderServer

KEY = "test-key-123456789"


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- the user drinks dark roast coffee with oat milk\n")
    (ws / "memory" / "2026-11-02.md").write_text("- 09:40 gannets nest on the cliffs near the lighthouse\n")
    return ws


def test_a_hung_provider_costs_a_search_seconds_then_opens_a_circuit(tmp_path):
    ws = _ws(tmp_path)
    with ProviderServer("openai", key=KEY) as server:
        remote = {"baseUrl": server.base_url, "apiKey": KEY}
        settings = make_settings(tmp_path, ws, {"provider": "openai", "remote": remote, "sync": {"onSearch": False}})
        ms = MemorySearchConfig.model_validate({"provider": "openai", "remote": remote})
        m = BuiltinSearchManager(settings, provider=create_provider("openai", ms, environ={}))

        async def go():
            await m.sync()
            server.delay = 300  # accepts the request, never answers in time (the per-request timeout is 60 s)
            asked = len(server.embedding_requests())
            started = time.monotonic()
            first = await m.search("gannets", min_score=0)
            took = time.monotonic() - started
            assert took < 30, took  # was 240 s (the 60 s request timeout, retried)
            assert first.results and first.results[0].path == "memory/2026-11-02.md" and first.mode == "fts-only"
            assert "timed out" in first.degraded.vector and "keyword" in first.degraded.vector
            for _ in range(2):
                await m.search("gannets", min_score=0)
            tried = len(server.embedding_requests()) - asked
            # The circuit is open: the next searches do not ask the provider at all.
            for _ in range(5):
                answer = await m.search("gannets", min_score=0)
                assert answer.results and "paused" in answer.degraded.vector, answer.degraded
            assert len(server.embedding_requests()) - asked == tried
            # A while later the provider is tried again, and the circuit closes when it answers.
            server.delay = 0
            m._circuit.cooldown_s = 0.0
            back = await m.search("gannets", min_score=0)
            assert back.mode == "hybrid" and back.degraded.vector is None
            assert (await m.search("coffee", min_score=0)).mode == "hybrid"

        try:
            anyio.run(go)
        finally:
            server.delay = 0
            anyio.run(m.aclose)


def test_an_open_circuit_spares_cold_cli_searches_too(tmp_path):
    ws = _ws(tmp_path)
    with ProviderServer("openai", key=KEY) as server:
        cfg = tmp_path / "cfg.json"
        cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {
            "provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": KEY}}}}}))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1"}
        base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws)]
        assert subprocess.run([*base, "index"], env=env, capture_output=True, timeout=120).returncode == 0
        server.delay = 300
        answers = []
        for _ in range(4):
            r = subprocess.run([*base, "search", "gannets", "--json"], env=env, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr[-2000:]
            answers.append((json.loads(r.stdout), len(server.embedding_requests())))
        server.delay = 0
    reasons = [a["degraded"]["vector"] for a, _ in answers]
    assert all(a["results"] for a, _ in answers)
    assert "timed out" in reasons[0] and "paused" in reasons[3], reasons
    assert answers[3][1] == answers[2][1]  # the fourth process did not ask the provider
