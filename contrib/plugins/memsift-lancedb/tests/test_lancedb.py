"""What is LanceDB's own: its settings checked by memsift, generations kept and dropped, a damaged
dataset answered by the builtin fallback when asked for, and the doors (the kit's `PluginDoors`):
its settings checked by memsift, the CLI, `parity --against lancedb`, the resident helper and MCP
over stdio."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from memsift.engine.kit.testing import NOTES, PluginDoors, backend_of, open_manager, resolve_config, write_notes

pytest.importorskip("memsift_lancedb", reason="the LanceDB plugin is not installed "
                    "(pip install -e contrib/plugins/memsift-lancedb)")

@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "ws")


def _settings(tmp_path: Path, ws: Path, lancedb: dict | None = None, provider: str = "none"):
    overrides = {"stateDir": str(tmp_path / "state"), "memory": {"backend": "lancedb", "lancedb": lancedb or {}},
                 "agents": {"defaults": {"memorySearch": {"provider": provider}}}}
    return resolve_config(overrides=overrides, workspace=ws, environ={}, cwd=tmp_path)


def test_a_pointer_that_cannot_be_read_is_rebuilt_as_a_new_generation(tmp_path, ws):
    manager = open_manager(_settings(tmp_path, ws))
    store = backend_of(manager).store  # below scope rules, the evidence ranker and the plugin guard

    async def go():
        try:
            assert (await manager.sync()).full_reindex and store.current().number == 1
            # A pointer that cannot be read is no index: the next sync builds a new generation (never
            # over one a search may be reading), nothing is lost.
            store.pointer.write_text("{not json")
            rebuilt = await manager.sync()
            assert rebuilt.full_reindex and "was damaged" in rebuilt.reindex_cause and store.current().number == 2
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


class TestLanceDBDoors(PluginDoors):
    backend = "lancedb"
