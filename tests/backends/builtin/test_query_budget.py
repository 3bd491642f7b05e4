"""A provider that never answers costs a search its short query-embedding budget, not minutes: the
search answers by keyword and says so. After repeated failures a circuit stops asking the
provider for a while (also across CLI processes), then tries again and closes when it answers."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import apsw

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.indexer import GROUP_CHUNKS
from memsift.engine.embeddings.remote import MAX_BATCH_BYTES
from memsift.engine.http_client import MAX_RETRIES
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
            r = subprocess.run(
                [*base, "search", "gannets", "--json"], env=env, capture_output=True, text=True, timeout=120
            )
            assert r.returncode == 0, r.stderr[-2000:]
            answers.append((json.loads(r.stdout), len(server.embedding_requests())))
        server.delay = 0
    reasons = [a["degraded"]["vector"] for a, _ in answers]
    assert all(a["results"] for a, _ in answers)
    assert "timed out" in reasons[0] and "paused" in reasons[3], reasons
    assert answers[3][1] == answers[2][1]  # the fourth process did not ask the provider


def test_a_first_search_never_waits_on_a_provider_that_never_answers(tmp_path):
    """No index yet and an endpoint that accepts and never answers: the first search builds the
    keyword index, answers by keyword saying the vectors are pending, and `status --deep` probes
    within a search's query budget (both would run for minutes before)."""
    ws = _ws(tmp_path)
    with ProviderServer("openai", key=KEY) as server:
        server.delay = 300
        cfg = tmp_path / "cfg.json"
        cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {
            "provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": KEY}}}}}))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1"}
        base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws)]
        try:
            # A hang here fails the test (TimeoutExpired): the search has a budget.
            r = subprocess.run(
                [*base, "search", "gannets", "--json"], env=env, capture_output=True, text=True, timeout=90
            )
            assert r.returncode == 0, r.stderr[-2000:]
            answer = json.loads(r.stdout)
            assert answer["results"][0]["path"] == "memory/2026-11-02.md"
            assert "vectors pending" in answer["degraded"]["vector"], answer["degraded"]
            assert re.search(r"\(0 of \d+ chunks have vectors\)", answer["degraded"]["vector"]), answer["degraded"]
            r = subprocess.run(
                [*base, "status", "--deep", "--json"], env=env, capture_output=True, text=True, timeout=60
            )
            assert r.returncode == 0, r.stderr[-2000:]
            probe = json.loads(r.stdout)["deep"]["embedding"]
            assert probe["ok"] is False and "did not answer" in probe["error"]
            assert json.loads(r.stdout)["index"]["meta"]["vectorsPending"] is True
            pending = json.loads(r.stdout)["vector"]["pending"]
            assert pending["done"] == 0 and pending["total"] > 0
        finally:
            server.delay = 0
        # Once the provider answers, one sync makes the vectors and searches are hybrid again.
        assert subprocess.run([*base, "index"], env=env, capture_output=True, timeout=120).returncode == 0
        r = subprocess.run([*base, "search", "gannets", "--json"], env=env, capture_output=True, text=True, timeout=90)
        answer = json.loads(r.stdout)
        assert answer["mode"] == "hybrid" and not (answer.get("degraded") or {}).get("vector"), answer.get("degraded")


def test_a_failing_provider_costs_one_request_per_sync_not_one_per_group(tmp_path):
    """Hundreds of chunks in several groups: after the first failed embedding call the sync stores
    the rest without vectors instead of asking again for every group."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(700):
        (ws / "memory" / f"note-{i:04d}.md").write_text(f"- note {i} about puffin colony {i % 17}\n")
    with ProviderServer("openai", key=KEY) as server:
        remote = {"baseUrl": server.base_url, "apiKey": KEY}
        settings = make_settings(tmp_path, ws, {"provider": "openai", "remote": remote})
        provider = create_provider(
            "openai", MemorySearchConfig.model_validate({"provider": "openai", "remote": remote}), environ={}
        )
        provider.batch_timeout = 0.3
        provider._sleep = lambda _s: anyio.sleep(0)  # no back-off waits in the test
        m = BuiltinSearchManager(settings, provider=provider)

        async def go():
            server.delay = 5
            answer = await m.search("puffin colony", min_score=0)  # the first search: keyword index, vectors pending
            assert answer.results and "vectors pending" in (answer.degraded.vector or "")
            for i in range(700):  # every file changes: three groups of new chunks
                (ws / "memory" / f"note-{i:04d}.md").write_text(f"- note {i} about gannet colony {i % 13}\n")
            before = len(server.embedding_requests())
            report = await m.sync()
            asked = len(server.embedding_requests()) - before
            # One group's call (its requests, each tried 1 + 3 times), not one per group (three groups).
            one_call = (MAX_RETRIES + 1) * math.ceil(GROUP_CHUNKS * 32 / MAX_BATCH_BYTES)  # a chunk is < 32 bytes
            assert report.files_indexed == 700 and 0 < asked <= one_call, (asked, one_call)
            server.delay = 0
            await m.sync()
            answer = await m.search("gannet colony", min_score=0)
            assert answer.mode == "hybrid" and answer.degraded.vector is None

        try:
            anyio.run(go)
        finally:
            server.delay = 0
            anyio.run(m.aclose)


def test_vectors_being_made_say_how_many_are_done_and_the_time_left(tmp_path, example_workspace):
    """While a keyword-first index's vectors are made (in this process or another), searches and
    `status` say how far it is and, once a rate can be told, about how long it still takes."""
    from memsift.backends.builtin.store import note_backfill_start, vector_progress
    from memsift.engine.durations import vector_progress_words
    from memsift.engine.embeddings.fake import FakeEmbeddingProvider

    m = BuiltinSearchManager(make_settings(tmp_path, example_workspace), provider=FakeEmbeddingProvider())
    anyio.run(m.sync)
    anyio.run(m.aclose)
    conn = apsw.Connection(str(m.db_path))
    total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert vector_progress(conn) == {"done": total, "total": total, "etaSeconds": None}
    with conn:  # as a backfill that began 60 s ago with none done and has made 3 since
        conn.execute(
            "UPDATE chunks SET embedding = NULL WHERE rowid NOT IN (SELECT rowid FROM chunks ORDER BY rowid LIMIT 3)"
        )
    note_backfill_start(conn, 0, total)
    with conn:
        conn.execute("UPDATE meta SET value = json_set(value, '$.startedAt', json_extract(value, '$.startedAt') - 60) "
                     "WHERE key = 'vectorBackfill'")
    got = vector_progress(conn)
    assert got["done"] == 3 and got["total"] == total and got["etaSeconds"] == round((total - 3) * 60 / 3)
    words = vector_progress_words(got)
    assert words.startswith(f"3 of {total} chunks have vectors, about ") and words.endswith(("min left", "s left"))
    assert vector_progress_words({"done": 1200, "total": 18809, "etaSeconds": 400}) == \
        "1,200 of 18,809 chunks have vectors, about 6 min left"
