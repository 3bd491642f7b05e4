"""Session transcripts (`sources: ["memory", "sessions"]` with `experimental.sessionMemory`) through
the doors, on every backend that indexes them itself: `memsift index` reads the agent's JSONL
transcripts, and the cold CLI (`--corpus sessions`), `status`, the resident helper, MCP over stdio
and over HTTP answer `sessions/<name>.jsonl` at its JSONL lines with secrets redacted and read it
back (`get`, `memory_get`: it was refused as no `.md` file); `memsift watch` indexes a transcript's
growth (its transcript-delta sync). LanceDB and Qdrant indexed Markdown only before. The API: the
backend contract; the OpenClaw plugin: its Node tests."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import backend_memory, tools_over_mcp, write_transcript
from memsift.engine.testing import NOTES
from memsift.engine.testing.doors import cli_env, run_cli, write_notes

QUESTION = "what is the wifi password for the cabin?"
SECRET = "sk-abcdefghijklmnopqrstuvwx"
TURNS = [("user", "what is the wifi password for the cabin"),
         ("assistant", f"It is on the fridge, token: {SECRET}")]
READ = "User: what is the wifi password for the cabin\n\nAssistant: It is on the fridge, [redacted]"


def _config(tmp_path: Path, backend: str, ws: Path) -> Path:
    cfg = tmp_path / "memsift.json"
    memory_search = {"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True},
                     "sync": {"sessions": {"deltaBytes": 0, "deltaMessages": 0}}}
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {
        "workspace": str(ws), "memorySearch": memory_search}}}))
    return cfg


def _answer(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _transcript_hit(answer: dict, last_line: int = 4) -> None:
    hit = answer["results"][0]
    assert (hit["path"], hit["source"], hit["startLine"], hit["endLine"]) == (
        "sessions/abc.jsonl", "sessions", 2, last_line), answer["results"]
    assert SECRET not in json.dumps(answer) and "[redacted]" in hit["snippet"], hit["snippet"]


def _read_hit(answer: dict) -> None:
    """memory_get of the transcript hit: its messages at the JSONL's lines, the tool record between empty."""
    assert answer["path"] == "sessions/abc.jsonl" and answer["text"] == READ, answer


def _watch_event(proc: subprocess.Popen, wanted, timeout: float = 120) -> dict:
    """The first JSON event of `memsift watch --json` for which `wanted(event)` holds."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if not ready:
            assert proc.poll() is None, "memsift watch exited"
            continue
        line = proc.stdout.readline()
        if line.strip().startswith("{") and wanted(event := json.loads(line)):
            return event
    raise AssertionError("memsift watch did not say it")


@pytest.mark.parametrize("backend", ["builtin", "lancedb", "qdrant", "postgres"])
def test_transcripts_are_answered_through_every_door(tmp_path, backend):
    ws = write_notes(tmp_path / "ws")
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"  # the state folder `cli_env` gives
    sessions.mkdir(parents=True)
    write_transcript(sessions / "abc.jsonl", TURNS)
    cfg = _config(tmp_path, backend, ws)
    report = _answer(run_cli(tmp_path, cfg, "index", "--json"))
    assert report["filesIndexed"] == len(NOTES) + 1, report
    # The cold CLI, JSON and text, and status
    _transcript_hit(_answer(run_cli(tmp_path, cfg, "search", QUESTION, "--json", "--corpus", "sessions")))
    text = run_cli(tmp_path, cfg, "search", QUESTION, "--corpus", "sessions")
    assert "sessions/abc.jsonl:2-4" in text.stdout and SECRET not in text.stdout, text.stdout
    _read_hit(_answer(run_cli(tmp_path, cfg, "get", "sessions/abc.jsonl#L2-L4", "--json")))  # memory_get
    status = _answer(run_cli(tmp_path, cfg, "status", "--json"))
    assert "sessions" in status["sources"] and status["sourceCounts"]["sessions"] == {"files": 1, "chunks": 1}, status
    shown = run_cli(tmp_path, cfg, "status").stdout  # each source's files · chunks beside the total
    assert f"(memory {len(NOTES)} · " in shown and ", sessions 1 · 1)" in shown, shown
    # The resident helper (the first warm call starts it, the second is its answer)
    try:
        for _ in range(2):
            warm = _answer(run_cli(tmp_path, cfg, "search", QUESTION, "--json", "--corpus", "sessions", resident=True))
        _transcript_hit(warm)
        _read_hit(_answer(run_cli(tmp_path, cfg, "get", "sessions/abc.jsonl:2-4", "--json", resident=True)))
    finally:
        run_cli(tmp_path, cfg, "helpers", "stop", "--all", resident=True)
    # MCP over stdio and over HTTP
    for found, read in tools_over_mcp(tmp_path, cfg, [("memory_search", {"query": QUESTION, "corpus": "sessions"}),
                                                      ("memory_get", {"path": "sessions/abc.jsonl", "from": 2,
                                                                      "lines": 3})]):
        _transcript_hit(found)
        _read_hit(read)
    # `memsift watch`: the transcript grows, its transcript sync indexes it (a search's sync never waits on it)
    watch = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "watch", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=cli_env(tmp_path))
    try:
        _watch_event(watch, lambda e: e.get("event") == "ready")
        write_transcript(sessions / "abc.jsonl", [*TURNS, ("user", "and the boat key? under the mat")])
        grown = _watch_event(watch, lambda e: e.get("reason") == "session-delta"
                             and e.get("report", {}).get("filesIndexed") == 1)
        assert grown["report"]["backend"] == backend, grown
    finally:
        watch.terminate()
        watch.wait(timeout=60)
    found = _answer(run_cli(tmp_path, cfg, "search", "boat key under the mat", "--json", "--corpus", "sessions"))
    assert found["results"][0]["path"] == "sessions/abc.jsonl", found["results"]


def test_asking_for_transcripts_where_none_are_searched_says_what_to_set(tmp_path):
    """`--corpus sessions` (memory_search's corpus) with sessions no source answered "No results."
    alone, as if no chat had ever mentioned it; it says which settings make transcripts searchable."""
    ws = write_notes(tmp_path / "ws")
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws)}}}))
    answer = _answer(run_cli(tmp_path, cfg, "search", QUESTION, "--json", "--corpus", "sessions"))
    assert answer["results"] == [] and any("memorySearch.sources" in n for n in answer["notes"]), answer
    for found in tools_over_mcp(tmp_path, cfg, [("memory_search", {"query": QUESTION, "corpus": "sessions"})]):
        assert any("memorySearch.sources" in n for n in found[0]["notes"]), found
    everything = _answer(run_cli(tmp_path, cfg, "search", QUESTION, "--json"))
    assert not any("memorySearch.sources" in n for n in everything.get("notes") or []), everything
