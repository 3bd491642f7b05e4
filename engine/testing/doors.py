"""What a backend plugin's own tests share: a workspace of the contract's notes, a config file naming
the backend, the `memsift` CLI run as a user runs it (a private state folder and XDG homes, no
resident helper unless asked), and `PluginDoors`, the tests that serve the backend through every
door (its settings checked by memsift, the cold CLI, the resident helper, `parity`, MCP over stdio),
and the generations every `IndexedManager` plugin publishes (`keepGenerations` kept after a rebuild).

    class TestQdrantDoors(PluginDoors):
        backend = "qdrant"
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from ..compose.factory import open_manager, resolve_config
from ..compose.wrapped import backend_of
from ..errors import ConfigError
from . import NOTES

__all__ = [
    "PluginDoors",
    "write_notes",
    "example_workspace",
    "backend_config",
    "cli_env",
    "run_cli",
    "EXAMPLE_WORKSPACE",
]

# memsift's example workspace, beside the engine in a clone (an installed wheel has none: tests skip)
EXAMPLE_WORKSPACE = Path(__file__).resolve().parents[2] / "contrib" / "example-workspace"


def write_notes(folder: Path) -> Path:
    """The contract's notes (`NOTES`) written under `folder`."""
    for rel, text in NOTES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def example_workspace(tmp_path: Path) -> Path:
    """A copy of memsift's example workspace (skips the test where it is not beside the engine)."""
    if not EXAMPLE_WORKSPACE.is_dir():
        pytest.skip("memsift's contrib/example-workspace is not beside this memsift (a clone has it)")
    ws = tmp_path / "example"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    return ws


def backend_config(file: Path, backend: str, workspace: Path, /, *, state: Path | None = None,
                   provider: str | None = None, **options: Any) -> Path:
    """A config file at `file` serving `workspace` from `backend` (`options`: its `memory.<backend>` keys)."""
    defaults: dict[str, Any] = {"workspace": str(workspace)}
    if provider is not None:
        defaults["memorySearch"] = {"provider": provider}
    doc: dict[str, Any] = {"memory": {"backend": backend, backend: options}, "agents": {"defaults": defaults}}
    if state is not None:
        doc["stateDir"] = str(state)
    file.write_text(json.dumps(doc), encoding="utf-8")
    return file


def cli_env(tmp_path: Path, *, resident: bool = False, state_from_config: bool = False, **more: str) -> dict[str, str]:
    """The environment of a CLI run: no API key and no MEMSIFT_* of the caller's, private homes, and
    the state folder `tmp_path/state` (`state_from_config`: the config's `stateDir` says)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("MEMSIFT")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    if not state_from_config:
        env["MEMSIFT_STATE_DIR"] = str(tmp_path / "state")
    if not resident:
        env["MEMSIFT_NO_RESIDENT"] = "1"
    return {**env, **more}


def run_cli(tmp_path: Path, cfg: Path, *args: str, resident: bool = False, state_from_config: bool = False,
            **env: str) -> subprocess.CompletedProcess:
    """`memsift -c cfg ARGS…` in a new process (environment: `cli_env`); a traceback on stderr fails the test."""
    done = subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), *args],
        capture_output=True,
        text=True,
        env=cli_env(tmp_path, resident=resident, state_from_config=state_from_config, **env),
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done


class PluginDoors:
    """A backend served through every door, on memsift's example workspace with the local model.
    Set `backend`; `options` are its `memory.<backend>` keys for these tests."""

    backend = ""
    options: dict[str, Any] = {}
    question = "which database did we pick for the ledger?"
    answered_by = "MEMORY.md"  # the example workspace's answer to `question`

    @pytest.fixture
    def example(self, tmp_path: Path) -> tuple[Path, Path]:
        ws = example_workspace(tmp_path)
        return ws, backend_config(tmp_path / "config.json5", self.backend, ws, **self.options)

    def test_its_settings_are_checked_by_memsift_with_the_files_errors(self, tmp_path: Path) -> None:
        ws = write_notes(tmp_path / "ws")

        def opened(**keys: Any) -> Any:
            overrides = {"stateDir": str(tmp_path / "state"),
                         "memory": {"backend": self.backend, self.backend: {**self.options, **keys}}}
            return open_manager(resolve_config(overrides=overrides, workspace=ws, environ={}, cwd=tmp_path))

        with pytest.raises(ConfigError) as err:
            opened(keepGeneration=3)
        assert f"memory.{self.backend}.keepGeneration: unknown key (did you mean 'keepGenerations'?)" in str(err.value)
        with pytest.raises(ConfigError, match=rf"memory\.{self.backend}\.fallback"):
            opened(fallback="qmd")

    def generations(self, backend: Any) -> tuple[int, list[int]]:
        """(the published generation, the generations kept) of the plugin's manager below the stages;
        the default reads `store.current().number` and `store.generations()`."""
        return backend.store.current().number, backend.store.generations()

    def test_a_forced_rebuild_publishes_a_new_generation_and_keeps_only_the_newest(self, tmp_path: Path) -> None:
        ws = write_notes(tmp_path / "ws")
        overrides = {
            "stateDir": str(tmp_path / "state"),
            "agents": {"defaults": {"memorySearch": {"provider": "none"}}},
            "memory": {"backend": self.backend, self.backend: {**self.options, "keepGenerations": 2}},
        }
        manager = open_manager(resolve_config(overrides=overrides, workspace=ws, environ={}, cwd=tmp_path))

        async def go() -> None:
            try:
                first = await manager.sync()
                assert (
                    first.full_reindex and first.reindex_cause == "no index yet" and first.files_indexed == len(NOTES)
                )
                for _ in range(2):
                    again = await manager.sync(force=True)
                    assert again.full_reindex and again.reindex_cause == "forced"
                assert self.generations(backend_of(manager)) == (3, [2, 3])
                found = await manager.search("fig tree", min_score=0)
                assert found.backend == self.backend and found.results[0].path == "memory/projects/garden.md"
            finally:
                await manager.aclose()

        anyio.run(go)
        assert all(p.read_text(encoding="utf-8") == NOTES[p.relative_to(ws).as_posix()] for p in ws.rglob("*.md"))

    def test_the_cli_the_resident_helper_and_parity_serve_it(self, tmp_path: Path, example: tuple[Path, Path]) -> None:
        _ws, cfg = example
        cold = run_cli(tmp_path, cfg, "search", self.question, "--json")
        assert cold.returncode == 0, cold.stderr
        answer = json.loads(cold.stdout)
        assert answer["backend"] == self.backend and answer["mode"] == "hybrid"
        assert answer["results"][0]["path"] == self.answered_by
        assert "WARN" not in cold.stderr  # the engine's own log stays quiet
        try:
            warm = [json.loads(run_cli(tmp_path, cfg, "search", self.question, "--json", resident=True).stdout)
                    for _ in range(2)]  # the first starts the helper, the second is answered by it
            assert [h["path"] for h in warm[1]["results"]] == [h["path"] for h in answer["results"]]
            status = json.loads(run_cli(tmp_path, cfg, "status", "--json", resident=True).stdout)
            assert status["backend"] == self.backend and status["helper"]["running"] and status["files"] > 0, status
        finally:
            run_cli(tmp_path, cfg, "helpers", "stop", "--all", resident=True)
        queries = tmp_path / "queries.txt"
        queries.write_text(f"{self.question}\nMarco certificates\nLisbon hotels\n数据管道\n", encoding="utf-8")
        report = run_cli(tmp_path, cfg, "parity", str(queries), "--against", self.backend, "--json")
        assert report.returncode == 0, report.stderr
        doc = json.loads(report.stdout)
        assert doc["against"] == self.backend and doc["comparable"] and doc["summary"][f"{self.backend}Errors"] == 0
        assert doc["summary"]["meanOverlap"] >= 0.8 and self.backend in doc["queries"][0]

    def test_mcp_over_stdio_serves_it(self, tmp_path: Path, example: tuple[Path, Path]) -> None:
        mcp = pytest.importorskip("mcp", reason="the MCP door needs memsift's mcp extra")
        _ws, cfg = example

        async def go() -> dict:
            params = mcp.StdioServerParameters(command=sys.executable,
                                               args=["-m", "memsift.engine.cli.main", "-c", str(cfg), "mcp"],
                                               env=cli_env(tmp_path))
            async with mcp.Client(params) as client:
                found = (await client.call_tool("memory_search", {"query": "Marco certificates"})).structured_content
                hit = found["results"][0]
                got = await client.call_tool("memory_get", {"path": hit["path"], "from": hit["startLine"], "lines": 1})
                return {"found": found, "got": got.structured_content}

        out = anyio.run(go)
        assert out["found"]["backend"] == self.backend and out["found"]["results"][0]["path"] == "memory/2026-11-12.md"
        assert out["got"]["text"]
