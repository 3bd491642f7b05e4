"""A question dated by a holiday ("what did we do over Thanksgiving?", "on Valentine's Day") gets that
holiday's notes, and one dated "on the 14th of February" that day's. Before, only Christmas and New
Year were read (the rest named no time: the answer was whatever the words matched, other days'
notes first), and "the 14th of February" was this month's 14th; a weekday said alone ("who did I
have dinner with Tuesday?") named no day either. Asked on every backend through the
cold CLI (as of a fixed day), then with the year said through the resident helper, MCP over stdio
and HTTP, and the Python API."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from helpers import backend_memory, tools_over_mcp
from memsift.engine.compose.factory import open_manager, resolve_config
from memsift.engine.testing.doors import run_cli

NOTES = {
    # Thanksgiving 2026 was Thursday 26 November: its long weekend is 26-29 November.
    "memory/2026-11-20.md": "- We talked about dinner plans and the turkey order with the family.\n",
    "memory/2026-11-27.md": "- Dinner at Maria's: we played charades with the family.\n",
    "memory/2026-12-03.md": "- The family dinner recap: we should book the restaurant earlier next year.\n",
    "memory/2026-02-14.md": "- Flew home with Tap Air; dinner with Sam at the harbour.\n",
    "memory/2026-02-10.md": "- Booked the dinner table at the harbour for Sam and me.\n",
    "memory/2026-12-01.md": "- Noodles with Lena after work, a quiet dinner.\n",  # a Tuesday
}


def _config(tmp_path: Path, backend: str) -> Path:
    ws = tmp_path / "ws"
    for rel, text in NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {"workspace": str(ws)}}}))
    return cfg


def _paths(hits: list[dict]) -> list[str]:
    return [h["path"] for h in hits]


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_a_holiday_names_its_days_through_every_door(tmp_path: Path, backend: str):
    cfg = _config(tmp_path, backend)
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    for question, first in [("what did we do over Thanksgiving?", "memory/2026-11-27.md"),
                            ("who did I have dinner with on Valentine's Day?", "memory/2026-02-14.md"),
                            ("what did we do on Valentine\u2019s Day?", "memory/2026-02-14.md"),
                            # a day of a named month (was read as this month's 14th)
                            ("who did I have dinner with on the 14th of February?", "memory/2026-02-14.md"),
                            # a weekday said alone: the latest before today (7 December 2026, a Monday)
                            ("who did I have dinner with Tuesday?", "memory/2026-12-01.md"),
                            # beside a holiday (was "after Thanksgiving": every day since)
                            ("who was at dinner the day after Thanksgiving?", "memory/2026-11-27.md")]:
        done = run_cli(tmp_path, cfg, "search", question, "--json", MEMSIFT_NOW="2026-12-07")
        assert done.returncode == 0, done.stderr[-2000:]
        hits = json.loads(done.stdout)["results"]
        assert _paths(hits)[:1] == [first], (question, [(h["path"], h["score"]) for h in hits])
    # With the year said, no "now" is needed: the other doors.
    said = "what did we do over Thanksgiving 2026?"
    for resident in (True, True):  # the second is the resident helper's answer
        done = run_cli(tmp_path, cfg, "search", said, "--json", resident=resident)
        assert _paths(json.loads(done.stdout)["results"])[:1] == ["memory/2026-11-27.md"], done.stdout[-2000:]
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    for (answer,) in tools_over_mcp(tmp_path, cfg, [("memory_search", {"query": said})]):
        assert _paths(answer["results"])[:1] == ["memory/2026-11-27.md"], answer["results"]
    if backend != "builtin":
        return

    async def through_the_api() -> list[str]:
        settings = resolve_config(cfg, environ={"MEMSIFT_STATE_DIR": str(tmp_path / "state")})
        async with open_manager(settings) as manager:
            answer = await manager.search("what happened on Valentine's Day 2026?")
        return [h.path for h in answer.results]

    assert anyio.run(through_the_api)[:1] == ["memory/2026-02-14.md"]
