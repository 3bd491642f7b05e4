"""A question answered in the middle of a long pasted line (issue 30): on a real index with the
local model, the top hit shows the piece of the line that answers, in hybrid, keyword and vector
mode, through the API and the CLI, on builtin and Postgres (the reference showed the first 700
characters of the line's chunk)."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from helpers import backend_memory, make_settings
from memsift.engine.compose.factory import open_manager
from memsift.engine.text import utf16_len

BEFORE = ("Pasted from the incident channel: at 02:10 the pager fired for elevated 5xx on the checkout API, "
          "the on-call engineer acknowledged within four minutes and opened a bridge; dashboards showed p99 "
          "latency climbing from 180 ms to 2.4 s across all three availability zones while CPU stayed flat, "
          "which ruled out a capacity problem early; a rollback of the 01:45 deploy was started as a precaution "
          "and finished at 02:31 without any change in the error rate, so the deploy was cleared as well; "
          "the database team checked replication lag, connection pool saturation and lock waits on the orders "
          "primary and found all three normal, and the CDN vendor confirmed no incident on their side either; "
          "meanwhile support reported that roughly one checkout in six was failing for customers in Europe; ")
ANSWER = ("after an hour of digging the root cause turned out to be a stale DNS cache on the internal load "
          "balancer, which kept sending traffic to a decommissioned payments node; ")
AFTER = ("the fix was to flush the cache and lower its TTL to 30 seconds; a follow-up ticket tracks alerting "
         "on resolver age, and the postmortem is scheduled for Thursday with the networking team, who will "
         "also review why the decommissioning runbook did not include the load balancer's resolver cache, and "
         "whether the health checks should have caught a node that answered TCP but refused TLS handshakes; "
         "customer support will send an apology with a discount code to everyone whose order failed.")
LINE = BEFORE + ANSWER + AFTER
QUESTION = "what was the root cause of the checkout outage?"


def _workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-03.md").write_text(f"# 2026-11-03\n\n- {LINE}\n- 11:00 Coffee with Lena.\n")
    (ws / "memory" / "2026-11-04.md").write_text("# 2026-11-04\n\n- Sprint review; the export job is green again.\n")
    return ws


def test_the_line_is_long_enough_to_matter():
    assert utf16_len(LINE) > 1400 and LINE.index(ANSWER) > 700


@pytest.mark.parametrize("backend", ["builtin", "postgres"])
@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_the_top_hit_shows_the_piece_that_answers(tmp_path, backend, mode):
    ws = _workspace(tmp_path)
    settings = make_settings(tmp_path, ws, {"provider": "local"}, memory=backend_memory(backend))

    async def search():
        manager = open_manager(settings)
        try:
            return await manager.search(QUESTION, mode=mode, min_score=0.0)
        finally:
            await manager.aclose()

    top = anyio.run(search).results[0]
    assert "stale DNS cache" in top.snippet and utf16_len(top.snippet) <= 700, top.snippet[:120]


def test_the_cli_shows_it_too(tmp_path):
    ws = _workspace(tmp_path)
    cfg = tmp_path / "memsift.json5"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "memsift.engine.cli.main",
            "--config",
            str(cfg),
            "--workspace",
            str(ws),
            "search",
            QUESTION,
            "--json",
            "-n",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    hit = json.loads(out.stdout)["results"][0]
    assert "stale DNS cache" in hit["snippet"] and hit["path"] == "memory/2026-11-03.md"
