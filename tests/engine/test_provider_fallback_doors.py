"""`memorySearch.fallback` through the doors, on every backend that embeds with memsift's provider:
the configured provider (OpenAI-compatible, on loopback) is down, so `memsift index` builds with the
fallback (the bundled local model), and the cold CLI (JSON and text), `status`, the resident helper,
MCP over stdio and over HTTP all answer with its vectors and say so. Once the provider is back,
`memsift index` returns to it. (Before: only builtin took the fallback; LanceDB, Qdrant and Postgres
left every chunk without a vector and said "set memorySearch.fallback", which was set, and
Postgres's first index failed outright.) The API: the backend contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import backend_memory, memory_search_over_mcp
from memsift.engine.testing.doors import run_cli, write_notes
from memsift.engine.testing.embedder import LoopbackEmbedder

QUESTION = "when does the drip irrigation run?"
ANSWER = "memory/projects/garden.md"  # of the contract's notes (`write_notes`), which the wheel has too


def _config(tmp_path: Path, backend: str, ws: Path, base_url: str) -> Path:
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {
        "workspace": str(ws), "memorySearch": {"provider": "openai", "fallback": "local",
                                               "remote": {"baseUrl": base_url, "apiKey": "sk-doors"}}}}}))
    return cfg


def _answer(done) -> dict:
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _fell_back(answer: dict) -> None:
    assert answer["provider"] == "local", answer["provider"]
    assert answer["fallback"]["from"] == "openai" and "embedder is down" in answer["fallback"]["reason"]
    assert answer["fallback"]["kind"] == "provider"  # not a backend that failed (the OpenClaw plugin words it so)
    assert not answer.get("degraded", {}).get("vector"), answer.get("degraded")
    assert answer["results"][0]["path"] == ANSWER, [h["path"] for h in answer["results"]]


@pytest.mark.parametrize("backend", ["builtin", "lancedb", "qdrant", "postgres"])
def test_the_fallback_embeds_and_every_door_says_so(tmp_path, backend):
    ws = write_notes(tmp_path / "ws")
    with LoopbackEmbedder() as embedder:
        embedder.down = True
        cfg = _config(tmp_path, backend, ws, embedder.base_url)
        report = _answer(run_cli(tmp_path, cfg, "index", "--json"))
        assert report["chunksEmbedded"] >= 1 and report["vectorsError"] is None, report
        assert report["fallback"]["from"] == "openai" and report["fallback"]["kind"] == "provider", report
        # The cold CLI, a later process each: the index the fallback built is searched with it
        _fell_back(_answer(run_cli(tmp_path, cfg, "search", QUESTION, "--json", "--mode", "vector")))
        text = run_cli(tmp_path, cfg, "search", QUESTION)
        assert text.returncode == 0 and "the embedding provider openai failed" in text.stdout + text.stderr, text.stdout
        status = run_cli(tmp_path, cfg, "status")
        assert "local (requested openai)" in status.stdout and "Fallback" in status.stdout, status.stdout
        assert "rebuild" not in json.loads(run_cli(tmp_path, cfg, "status", "--json").stdout)["searchNow"]
        # The resident helper (the first warm call starts it, the second is its answer)
        try:
            for _ in range(2):
                warm = _answer(run_cli(tmp_path, cfg, "search", QUESTION, "--json", "--mode", "vector",
                                       resident=True))
            _fell_back(warm)
        finally:
            run_cli(tmp_path, cfg, "helpers", "stop", "--all", resident=True)
        # MCP over stdio and over HTTP
        for answer in memory_search_over_mcp(tmp_path, cfg, {"query": QUESTION, "mode": "vector"}):
            _fell_back(answer)
        # The provider is back: an explicit index returns to it
        embedder.down = False
        back = _answer(run_cli(tmp_path, cfg, "index", "--json"))
        assert back["fullReindex"] and back["vectorsError"] is None and back.get("fallback") is None, back
        answer = _answer(run_cli(tmp_path, cfg, "search", QUESTION, "--json", "--mode", "vector"))
        assert answer["provider"] == "openai" and answer.get("fallback") is None, answer.get("fallback")
        assert not answer.get("degraded", {}).get("vector"), answer.get("degraded")


def test_index_says_the_fallback_failed_too(tmp_path):
    """A fallback that cannot be set up (Gemini, no key): the notes are indexed for keyword search
    and `index` says to check the fallback, instead of advising to set one (before: builtin's
    first index failed outright, as the fallback was counted on)."""
    ws = write_notes(tmp_path / "ws")
    with LoopbackEmbedder() as embedder:
        embedder.down = True
        cfg = tmp_path / "memsift.json"
        cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws), "memorySearch": {
            "provider": "openai", "fallback": "gemini", "remote": {"baseUrl": embedder.base_url, "apiKey": "sk-x"}}}}}))
        failed = run_cli(tmp_path, cfg, "index")
        assert failed.returncode == 5, failed.stderr
        assert "check the fallback provider (gemini), which failed too" in failed.stderr, failed.stderr
        assert "set memorySearch.fallback" not in failed.stderr
        found = _answer(run_cli(tmp_path, cfg, "search", "drip irrigation", "--json"))
        assert found["results"] and found["results"][0]["path"] == ANSWER
