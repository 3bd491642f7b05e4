"""What is LanceDB's own: its settings checked by memsift, generations kept and dropped, a damaged
dataset answered by the builtin fallback when asked for, and the doors: the CLI, `parity
--against lancedb`, the resident helper and MCP over stdio."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from memsift.engine.kit import ConfigError
from memsift.engine.kit.testing import NOTES, backend_of, open_manager, resolve_config

pytest.importorskip("memsift_lancedb", reason="the LanceDB plugin is not installed "
                    "(pip install -e contrib/plugins/memsift-lancedb)")

EXAMPLE = Path(__file__).resolve().parents[3] / "example-workspace"  # memsift's contrib/example-workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    for rel, text in NOTES.items():
        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        (w / rel).write_text(text, encoding="utf-8")
    return w


def _settings(tmp_path: Path, ws: Path, lancedb: dict | None = None, provider: str = "none"):
    overrides = {"stateDir": str(tmp_path / "state"), "memory": {"backend": "lancedb", "lancedb": lancedb or {}},
                 "agents": {"defaults": {"memorySearch": {"provider": provider}}}}
    return resolve_config(overrides=overrides, workspace=ws, environ={}, cwd=tmp_path)


def test_its_settings_are_checked_by_memsift_with_the_files_errors(tmp_path, ws):
    with pytest.raises(ConfigError) as err:
        open_manager(_settings(tmp_path, ws, {"keepGeneration": 3}))
    assert "memory.lancedb.keepGeneration: unknown key (did you mean 'keepGenerations'?)" in str(err.value)
    with pytest.raises(ConfigError, match=r"memory\.lancedb\.fallback"):
        open_manager(_settings(tmp_path, ws, {"fallback": "qmd"}))


def test_a_rebuild_publishes_a_new_generation_and_keeps_only_the_newest(tmp_path, ws):
    manager = open_manager(_settings(tmp_path, ws, {"keepGenerations": 2}))
    store = backend_of(manager).store  # below scope rules, the evidence ranker and the plugin guard

    async def go():
        try:
            first = await manager.sync()
            assert first.full_reindex and first.reindex_cause == "no index yet" and first.files_indexed == len(NOTES)
            for _ in range(2):
                again = await manager.sync(force=True)
                assert again.full_reindex and again.reindex_cause == "forced"
            assert store.current().number == 3 and store.generations() == [2, 3]
            assert (await manager.search("fig tree", min_score=0)).results[0].path == "memory/projects/garden.md"
            # A pointer that cannot be read is no index: the next sync builds a new generation (never
            # over one a search may be reading), nothing is lost.
            store.pointer.write_text("{not json")
            rebuilt = await manager.sync()
            assert rebuilt.full_reindex and "was damaged" in rebuilt.reindex_cause and store.current().number == 4
            assert (await manager.search("fig tree", min_score=0)).results[0].path == "memory/projects/garden.md"
        finally:
            await manager.aclose()

    anyio.run(go)
    assert all(p.read_text() == NOTES[str(p.relative_to(ws))] for p in ws.rglob("*.md"))


def test_another_processs_sync_is_seen_at_once_and_an_empty_workspace_answers_nothing(tmp_path, ws):
    reader, writer = (open_manager(_settings(tmp_path, ws)) for _ in range(2))  # two processes' managers

    async def go():
        try:
            assert (await reader.search("fig tree", min_score=0)).results  # its tables are open now
            note = ws / "memory/projects/garden.md"
            note.write_text(note.read_text().replace("fig tree", "olive sapling"))
            assert not (await writer.sync()).full_reindex
            found = await reader.search("olive sapling", min_score=0, mode="keyword")
            assert [h.path for h in found.results][:1] == ["memory/projects/garden.md"]
        finally:
            await reader.aclose()
            await writer.aclose()

    anyio.run(go)
    empty = tmp_path / "empty"
    empty.mkdir()
    manager = open_manager(_settings(tmp_path / "e", empty))

    async def nothing():
        try:
            answer = await manager.search("anything at all", min_score=0)
            assert answer.results == [] and answer.backend == "lancedb" and answer.unavailable is None
            assert (await manager.status()).files == 0
        finally:
            await manager.aclose()

    anyio.run(nothing)


def test_a_dataset_lancedb_cannot_open_is_answered_by_builtin_when_the_fallback_is_on(tmp_path, ws):
    manager = open_manager(_settings(tmp_path, ws, {"fallback": "builtin"}))

    async def go():
        try:
            assert (await manager.search("fig tree", min_score=0)).backend == "lancedb"
            db = tmp_path / "state" / "agents" / "main" / "lancedb" / "db"
            for table in db.glob("chunks_g*.lance"):
                shutil.rmtree(table)
            healed = await manager.search("zeppelin museum", min_score=0)  # a missing table: rebuilt from the notes
            assert healed.backend == "lancedb" and healed.fallback is None and healed.results
            shutil.rmtree(db)
            db.write_text("not a folder")  # nothing LanceDB can read or rebuild in
            answer = await manager.search("zeppelin museum", min_score=0)
            assert answer.backend == "builtin" and answer.fallback.from_ == "lancedb"
            assert "the lancedb backend (memsift-lancedb" in answer.fallback.reason
            assert {h.path for h in answer.results} >= {"memory/2026-11-20.md", "memory/2026-11-24.md"}
        finally:
            await manager.aclose()

    anyio.run(go)


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "MEMSIFT_NO_RESIDENT"}
    return {**env, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "XDG_RUNTIME_DIR": str(tmp_path / "run"), **more}


def _cli(tmp_path: Path, cfg: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), *args], capture_output=True,
                          text=True, env=_env(tmp_path, **env), timeout=300)


@pytest.fixture
def example(tmp_path: Path) -> tuple[Path, Path]:
    if not EXAMPLE.is_dir():
        pytest.skip("memsift's contrib/example-workspace is not beside this package")
    w = tmp_path / "example"
    shutil.copytree(EXAMPLE, w)
    cfg = tmp_path / "config.json5"
    cfg.write_text(json.dumps({"memory": {"backend": "lancedb"}, "agents": {"defaults": {"workspace": str(w)}}}))
    return w, cfg


def test_the_cli_the_resident_helper_and_parity_serve_it(tmp_path, example):
    _ws, cfg = example
    cold = _cli(tmp_path, cfg, "search", "which database did we pick for the ledger?", "--json", MEMSIFT_NO_RESIDENT="1")
    assert cold.returncode == 0, cold.stderr
    answer = json.loads(cold.stdout)
    assert answer["backend"] == "lancedb" and answer["mode"] == "hybrid" and answer["results"][0]["path"] == "MEMORY.md"
    assert "WARN" not in cold.stderr  # Lance's own log stays quiet
    try:
        warm = [json.loads(_cli(tmp_path, cfg, "search", "which database did we pick for the ledger?", "--json").stdout)
                for _ in range(2)]
        assert [h["path"] for h in warm[1]["results"]] == [h["path"] for h in answer["results"]]
        status = json.loads(_cli(tmp_path, cfg, "status", "--json").stdout)
        assert status["backend"] == "lancedb" and status["helper"]["running"], status["helper"]
    finally:
        _cli(tmp_path, cfg, "helpers", "stop", "--all")
    queries = tmp_path / "queries.txt"
    queries.write_text("which database did we pick for the ledger?\nMarco certificates\nLisbon hotels\n数据管道\n")
    report = _cli(tmp_path, cfg, "parity", str(queries), "--against", "lancedb", "--json", MEMSIFT_NO_RESIDENT="1")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert doc["against"] == "lancedb" and doc["comparable"] and doc["summary"]["lancedbErrors"] == 0
    assert doc["summary"]["meanOverlap"] >= 0.8 and "lancedb" in doc["queries"][0]


def test_mcp_over_stdio_serves_it(tmp_path, example):
    mcp = pytest.importorskip("mcp", reason="the MCP door needs memsift's mcp extra")
    _ws, cfg = example

    async def go() -> dict:
        params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memsift.engine.cli.main", "-c", str(cfg), "mcp"],
                                           env=_env(tmp_path, MEMSIFT_NO_RESIDENT="1"))
        async with mcp.Client(params) as client:
            found = (await client.call_tool("memory_search", {"query": "Marco certificates"})).structured_content
            hit = found["results"][0]
            got = await client.call_tool("memory_get", {"path": hit["path"], "from": hit["startLine"], "lines": 1})
            return {"found": found, "got": got.structured_content}

    out = anyio.run(go)
    assert out["found"]["backend"] == "lancedb" and out["found"]["results"][0]["path"] == "memory/2026-11-12.md"
    assert out["got"]["text"]
