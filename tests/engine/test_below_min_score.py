"""No empty answer when a note shares the question's topic: when nothing reaches the configured
minScore, the closest few (a keyword match, or a vector near enough) are shown below it, each
marked, on every door; a minScore the caller sets still cuts; nothing near stays empty."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from memsift.engine.compose.factory import open_manager
from memsift.engine.config import MemsiftConfig, resolve_agent
from memsift.engine.search.ranking import Candidate
from memsift.engine.search.pipeline import BELOW_SHOWN, PipelineParams, rank

QUESTION = "how much was the plumbing repair?"
MIN_SCORE = 0.6  # configured: above what the tradesman's note scores for the question


def _candidate(cid: str, *, vector: float, keyword: bool = False, text: str = "") -> Candidate:
    return Candidate(
        chunk_id=cid,
        path=f"memory/{cid}.md",
        source="memory",
        start_line=1,
        end_line=1,
        text=text or f"a note {cid}",  # each its own text: copies of one text are one hit
        score=0.0,
        vector_score=vector,
        vector_hit=True,
        keyword_hit=keyword,
        text_score=0.2 if keyword else 0.0,
    )


def _params(show_below: bool) -> PipelineParams:
    return PipelineParams(max_results=6, min_score=MIN_SCORE, vector_weight=0.7, text_weight=0.3, mmr_enabled=False,
                          mmr_lambda=0.7, show_below=show_below)


def test_the_pipeline_shows_the_closest_few_below_a_default_min_score_and_only_those_near():
    def pool():
        return [_candidate("near", vector=0.55), _candidate("word", vector=0.1, keyword=True),
                _candidate("far", vector=0.15), *[_candidate(f"n{i}", vector=0.45 + i / 100) for i in range(4)]]

    ranked, facts = rank(lambda _p: None, keyword=None, vector=pool(), terms=["plumbing"], params=_params(True))
    assert len(ranked) == BELOW_SHOWN and "far" not in {c.chunk_id for c in ranked}
    assert facts["below"] == {c.chunk_id for c in ranked} and facts["below_min_score"][0] == 7
    ranked, facts = rank(lambda _p: None, keyword=None, vector=pool(), terms=["plumbing"], params=_params(False))
    assert ranked == [] and "below" not in facts  # the caller's own minScore cuts
    ranked, _ = rank(lambda _p: None, keyword=None, vector=[_candidate("far", vector=0.15)], terms=["x"],
                     params=_params(True))
    assert ranked == []  # nothing near: nothing shown


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("plumbing") / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Prefers tea over coffee.\n- The car insurance renews in March.\n")
    (ws / "memory" / "2026-11-10.md").write_text(
        # No word of the question, nor of its root (plumbing → plumber), is in it: only its meaning is near.
        "# 2026-11-10\n\n- 09:00 The tradesman came to fix the leaking pipe under the kitchen sink. Invoice €185, paid "
        "by card.\n"
    )
    (ws / "memory" / "2026-11-12.md").write_text(
        "# 2026-11-12\n\n- 10:00 Reviewed the quarterly budget with Anna; travel spending is over plan.\n")
    return ws


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state"),
                               "agents": {"defaults": {"memorySearch": {"query": {"minScore": MIN_SCORE}}}}}))
    return cfg


def _env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
            "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def _cli(tmp_path: Path, ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(_config(tmp_path)), "-w", str(ws),
                           "search", *args], env=_env(tmp_path), capture_output=True, text=True, timeout=300)


def test_every_door_shows_the_tradesmans_note_below_the_configured_min_score_marked(tmp_path, workspace):
    # The Python API
    raw = json.loads(_config(tmp_path).read_text())
    settings = resolve_agent(MemsiftConfig.model_validate(raw), workspace=workspace, environ={})

    async def api():
        m = open_manager(settings)
        try:
            return await m.search(QUESTION), await m.search(QUESTION, min_score=MIN_SCORE)
        finally:
            await m.aclose()

    shown, cut = anyio.run(api)
    assert shown.results and shown.results[0].path == "memory/2026-11-10.md", [(h.path, h.score) for h in shown.results]
    assert all(h.below_min_score and h.score < MIN_SCORE for h in shown.results)
    assert shown.below_min_score is not None
    assert cut.results == [] and cut.below_min_score is not None  # a minScore the caller sets still cuts

    # The CLI, text and JSON
    text = _cli(tmp_path, workspace, QUESTION)
    assert text.returncode == 0, text.stderr
    first = text.stdout.splitlines()[0]
    assert first.endswith(f"[below minScore {MIN_SCORE:g}: nothing reached it, this is one of the closest]") \
        and "memory/2026-11-10.md" in first, text.stdout
    assert f"Nothing reached minScore {MIN_SCORE:g}; shown below it, marked" in text.stdout
    as_json = json.loads(_cli(tmp_path, workspace, QUESTION, "--json").stdout)
    assert as_json["results"][0]["path"] == "memory/2026-11-10.md" and as_json["results"][0]["belowMinScore"] is True
    assert (
        json.loads(_cli(tmp_path, workspace, QUESTION, "--json", "--min-score", str(MIN_SCORE)).stdout)["results"] == []
    )

    # MCP (stdio), as an agent calls it
    mcp = pytest.importorskip("mcp")

    async def agent():
        params = mcp.StdioServerParameters(
            command=sys.executable,
            env=_env(tmp_path),
            args=[
                "-m",
                "memsift.engine.cli.main",
                "-c",
                str(_config(tmp_path)),
                "-w",
                str(workspace),
                "mcp",
                "--no-watch",
            ],
        )
        async with mcp.Client(params) as client:
            return (await client.call_tool("memory_search", {"query": QUESTION})).structured_content

    found = anyio.run(agent)
    assert found["results"][0]["path"] == "memory/2026-11-10.md" and found["results"][0]["belowMinScore"] is True


def test_the_plumbers_note_is_found_by_the_word_of_its_root_and_kept(tmp_path, workspace):
    # "plumbing" is not "plumber" to the stemmer; the lexicon joins them, so the note is a keyword
    # match and the rescue keeps it under the configured minScore, on the Python API and the CLI.
    ws = tmp_path / "plumber"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-10.md").write_text(
        (workspace / "memory" / "2026-11-10.md").read_text().replace("tradesman", "plumber"))
    (ws / "memory" / "2026-11-12.md").write_text((workspace / "memory" / "2026-11-12.md").read_text())
    raw = json.loads(_config(tmp_path).read_text())
    settings = resolve_agent(MemsiftConfig.model_validate(raw), workspace=ws, environ={})

    async def api():
        m = open_manager(settings)
        try:
            return await m.search(QUESTION, explain=True)
        finally:
            await m.aclose()

    answer = anyio.run(api)
    assert [h.path for h in answer.results] == ["memory/2026-11-10.md"]
    assert answer.results[0].rescued and answer.results[0].explain.keyword_score > 0
    hits = json.loads(_cli(tmp_path, ws, QUESTION, "--json").stdout)["results"]
    assert [h["path"] for h in hits] == ["memory/2026-11-10.md"] and hits[0]["rescued"] is True
