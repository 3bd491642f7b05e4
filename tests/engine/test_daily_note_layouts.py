"""Daily notes named as other tools name them answer "what did I do on <day>?" on every backend:
Logseq's journals (`2026_11_27.md`, here an extra path), Dendron's `daily.journal.2026.11.25.md`,
a compact `20261126.md`, a year/month/day layout (`memory/2026/11/29.md`) and Roam's daily pages
(`November 24th, 2026.md`). They were undated:
the question got the notes of the days around it instead. The day is read at index time and stored
by each backend (QMD's answers read the files), so each is asked through the cold CLI, then a day
by its date through the resident helper and MCP over stdio and HTTP. The evidence ranker takes them
for the daily logs they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import backend_memory, tools_over_mcp
from memsift.engine.testing.doors import run_cli

NOTES = {
    "memory/2026/11/29.md": "- Met the auditors about the ledger.\n",
    "memory/daily.journal.2026.11.25.md": "- Repotted the fig tree.\n",
    "memory/20261126.md": "- Bought a kayak.\n",
    "memory/November 24th, 2026.md": "- Fixed the bike's brakes.\n",  # Roam's daily pages
    "memory/2026-11-28.md": "- Booked flights to Lisbon.\n",  # the days around them, named as OpenClaw names them
    "memory/2026-11-30.md": "- Deployed the billing service to staging.\n",
    "logseq/journals/2026_11_27.md": "- Painted the fence.\n",
}
ASKED = {"what did I do on November 29?": "memory/2026/11/29.md",
         "what did I do on November 27?": "../logseq/journals/2026_11_27.md",
         "what did I do on November 26?": "memory/20261126.md",
         "what did I do on November 25?": "memory/daily.journal.2026.11.25.md",
         "what did I do on November 24?": "memory/November 24th, 2026.md"}


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_a_day_question_finds_the_daily_note_of_another_tools_naming(tmp_path: Path, backend: str):
    ws = tmp_path / "ws"
    for rel, text in NOTES.items():
        path = (ws / rel) if rel.startswith("memory/") else (tmp_path / rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {
        "workspace": str(ws), "memorySearch": {"extraPaths": [str(tmp_path / "logseq" / "journals")]}}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    for question, note in ASKED.items():
        done = run_cli(tmp_path, cfg, "search", question, "--json", MEMSIFT_NOW="2026-12-01")
        assert done.returncode == 0, done.stderr[-2000:]
        hits = json.loads(done.stdout)["results"]
        assert [h["path"] for h in hits[:1]] == [note], (question, [(h["path"], h["score"]) for h in hits])
    # The stored day through the other doors: a day asked by its date (no "now" needed).
    by_day = ["search", "what did I do on 2026-11-27?", "--json"]
    for resident in (True, True):  # the second is the resident helper's answer
        done = run_cli(tmp_path, cfg, *by_day, resident=resident)
        assert [h["path"] for h in json.loads(done.stdout)["results"]] == [ASKED["what did I do on November 27?"]]
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    for (answer,) in tools_over_mcp(tmp_path, cfg, [("memory_search", {"query": "what did I do on 2026-11-29?"})]):
        assert [h["path"] for h in answer["results"]] == ["memory/2026/11/29.md"], answer["results"]
    if backend == "qmd":
        return  # QMD's answers here are its keyword search's, which the ranker leaves as they are
    # They are daily logs to the evidence ranker too, which orders a hybrid pool of such notes.
    done = run_cli(tmp_path, cfg, "search", "did I buy a kayak or paint the fence?", "--min-score", "0", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout).get("ranker"), done.stdout[-1500:]
