"""`corpus` (memory, sessions or all): which memory a search looks in, asked of memsift itself, so
the answer is ranked and cut to maxResults within that corpus (the OpenClaw plugin used to filter
after memsift's cut: a transcript outranking the memory note left `corpus=memory` with nothing).
On the Python API, the cold CLI and MCP over stdio; a value not in the list is refused on each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from helpers import write_transcript
from memsift.engine.compose.factory import open_manager
from memsift.engine.config import MemsiftConfig, resolve_agent
from memsift.engine.requests import InvalidRequest
from memsift.engine.testing.doors import cli_env, run_cli

QUESTION = "cabin wifi password"
NOTE = "memory/2026-11-10.md"
TRANSCRIPT = "sessions/trip.jsonl"


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("corpus")
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Prefers tea over coffee.\n")
    (ws / "memory" / "2026-11-10.md").write_text(
        "# 2026-11-10\n\n- 09:00 Booked the cabin for December; it has wifi.\n"
    )
    sessions = root / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    write_transcript(sessions / "trip.jsonl", [("user", "what is the cabin wifi password?"),
                                               ("assistant", "The cabin wifi password is on the fridge.")])
    cfg = root / "memsift.json"
    cfg.write_text(json.dumps({"stateDir": str(root / "state"), "agents": {"defaults": {"memorySearch": {
        "provider": "none", "sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}}}}}))
    return ws, cfg


def _cli(ws: Path, cfg: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(cfg.parent, cfg, "-w", str(ws), "search", QUESTION, "-n", "1", "--min-score", "0", *args,
                   state_from_config=True)


def test_the_corpus_is_searched_before_the_cut_on_every_door(setup):
    ws, cfg = setup
    settings = resolve_agent(MemsiftConfig.model_validate(json.loads(cfg.read_text())), workspace=ws, environ={})

    async def api():
        m = open_manager(settings)
        try:
            await m.sync()
            return {
                corpus: await m.search(QUESTION, max_results=1, min_score=0, **({"corpus": corpus} if corpus else {}))
                for corpus in (None, "all", "memory", "sessions")
            }
        finally:
            await m.aclose()

    answers = anyio.run(api)
    top = {corpus: [(h.path, h.source) for h in a.results] for corpus, a in answers.items()}
    assert top[None] == top["all"] == [(TRANSCRIPT, "sessions")], top  # the transcript outranks the note
    assert top["memory"] == [(NOTE, "memory")], top  # cut within the corpus: the note, not nothing
    assert top["sessions"] == [(TRANSCRIPT, "sessions")], top

    for corpus, want in (("memory", NOTE), ("sessions", TRANSCRIPT)):
        done = _cli(ws, cfg, "--json", "--corpus", corpus)
        assert done.returncode == 0, done.stderr
        assert [h["path"] for h in json.loads(done.stdout)["results"]] == [want]
    bad = _cli(ws, cfg, "--corpus", "wiki")
    assert bad.returncode == 2 and "--corpus" in bad.stderr and "memory, sessions, all" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr

    mcp = pytest.importorskip("mcp")

    async def agent():
        params = mcp.StdioServerParameters(command=sys.executable, env=cli_env(cfg.parent, state_from_config=True),
                                           args=["-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "mcp",
                                                 "--no-watch"])
        async with mcp.Client(params) as client:
            asked = {"query": QUESTION, "maxResults": 1, "minScore": 0}
            memory = (await client.call_tool("memory_search", {**asked, "corpus": "memory"})).structured_content
            refused = await client.call_tool("memory_search", {**asked, "corpus": "wiki"})
            return memory, refused

    memory, refused = anyio.run(agent)
    assert [h["path"] for h in memory["results"]] == [NOTE]
    assert refused.is_error and "corpus" in str(refused.content)


def test_a_corpus_not_in_the_list_is_refused_before_any_work(setup):
    ws, cfg = setup
    settings = resolve_agent(MemsiftConfig.model_validate(json.loads(cfg.read_text())), workspace=ws, environ={})

    async def api():
        m = open_manager(settings)
        try:
            await m.search(QUESTION, corpus="wiki")
        finally:
            await m.aclose()

    with pytest.raises(InvalidRequest, match="corpus"):
        anyio.run(api)
