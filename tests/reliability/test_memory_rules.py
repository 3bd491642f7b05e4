"""Which files are memory is decided once (engine/files/rules.py), and every backend and door
obeys it: a single-file extra path is that file and never its folder, a symlinked extra path is no
memory at all, `qmd/<collection>/<path>` reads only what the collection's pattern selects, and a
hit naming any other file is dropped above the backends. Checked on builtin, QMD (running or not)
and Postgres (its reads need no server), through the Python API, MCP's memory_get and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from figures import FIGURES
from helpers import make_settings
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.compose.factory import open_manager
from memsift.engine.mcp.server import MemoryServer
from memsift.engine.files.rules import MemoryRules, glob_matches

SECRET = "SECRET-c0ffee"
FAKEBIN = Path(__file__).parents[1] / "backends" / "qmd" / "fakebin"


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "home"
    (home / "private" / "deep").mkdir(parents=True)
    (home / "agent-notes.md").write_text("- agent note: the ferry leaves at nine\n")
    (home / "private" / "deep" / "diary.md").write_text(f"{SECRET} diary\n")
    (home / "other.md").write_text(f"{SECRET} other\n")
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "notes").mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n- ferry timetable lives in agent-notes\n")
    (ws / "memory" / "2026-01-05.md").write_text("- booked the ferry\n")
    (ws / "README.md").write_text(f"{SECRET} readme\n")
    (ws / "notes" / "private.md").write_text(f"{SECRET} private\n")
    os.symlink(ws / "README.md", ws / "link-notes.md")  # a symlinked single-file extra path
    return {"home": home, "ws": ws}


def _settings(tmp_path: Path, layout: dict[str, Path], backend: str = "qmd"):
    extra = [str(layout["home"] / "agent-notes.md"), "link-notes.md"]
    memory = {"backend": backend, "qmd": {"command": "qmd-not-installed-here"}}
    if backend == "postgres":
        memory["postgres"] = {"dsn": "postgresql://memsift@127.0.0.1:9/nowhere", "fallback": "none"}
    return make_settings(tmp_path, layout["ws"], {"extraPaths": extra, "provider": "none"}, memory=memory)


def refused(layout: dict[str, Path]) -> list[str]:
    home, ws = layout["home"], layout["ws"]
    return [
        str(home / "private" / "deep" / "diary.md"),
        str(home / "other.md"),
        "qmd/custom-1-main/private/deep/diary.md",
        "qmd/custom-1-main/other.md",
        "qmd/custom-1-main/../other.md",
        "qmd/memory-root-main/README.md",
        "qmd/memory-root-main/notes/private.md",
        "qmd/memory-root-main/memory/../README.md",
        "qmd/memory-dir-main/../README.md",
        "qmd/custom-2-main/link-notes.md",
        "qmd/custom-2-main/README.md",
        "README.md",
        "notes/private.md",
        "link-notes.md",
        str(ws / "link-notes.md"),
        "../home/other.md",
        "../home/private/deep/diary.md",
        "qmd/nope/MEMORY.md",
        "qmd/",
        "qmd/custom-1-main/",
    ]


def allowed(layout: dict[str, Path]) -> list[tuple[str, str]]:
    home = layout["home"]
    return [
        (str(home / "agent-notes.md"), "ferry leaves"), ("qmd/custom-1-main/agent-notes.md", "ferry leaves"),
        ("MEMORY.md", "timetable"), ("qmd/memory-root-main/MEMORY.md", "timetable"),
        ("memory/2026-01-05.md", "booked"), ("qmd/memory-dir-main/2026-01-05.md", "booked"),
    ]


def _backends() -> list[str]:
    out = ["builtin", "qmd"]
    try:
        import psycopg  # noqa: F401, PLC0415

        out.append("postgres")
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("backend", _backends())
def test_every_backend_reads_only_memory_files(tmp_path, layout, backend):
    settings = _settings(tmp_path, layout, backend)

    async def go() -> None:
        manager = open_manager(settings)  # QMD is not even installed: reads need no qmd process
        mcp = MemoryServer(manager, settings)
        try:
            for path in refused(layout):
                FIGURES["memory-rule paths tried (every backend, API and MCP)"] += 2
                with pytest.raises(PathNotAllowedError):
                    await manager.read(path)
                out = await mcp.get(path)
                assert out.disabled and SECRET not in out.text and SECRET not in (out.error or ""), (backend, path)
            for path, words in allowed(layout):
                assert words in (await manager.read(path)).text, (backend, path)
                assert words in (await mcp.get(path)).text, (backend, path)
        finally:
            await manager.aclose()

    anyio.run(go)


def test_the_cli_refuses_what_every_backend_refuses(tmp_path, layout):
    cfg = tmp_path / "cfg.json5"
    extra = [str(layout["home"] / "agent-notes.md"), "link-notes.md"]
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state"), "memory": {"backend": "qmd"},
                               "agents": {"defaults": {"memorySearch": {"extraPaths": extra, "provider": "none"}}}}))
    env = {**os.environ, "HOME": str(layout["home"]), "PATH": f"{FAKEBIN}:{os.environ['PATH']}"}
    env.pop("MEMSIFT_CONFIG", None)
    for path in ["~/private/deep/diary.md", "qmd/memory-root-main/README.md", "qmd/custom-1-main/private/deep/diary.md",
                 "link-notes.md"]:
        for backend in ("qmd", "builtin"):
            res = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "memsift.engine.cli.main",
                    "-c",
                    str(cfg),
                    "-w",
                    str(layout["ws"]),
                    "-b",
                    backend,
                    "get",
                    path,
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            FIGURES["memory-rule paths tried (CLI)"] += 1
            assert res.returncode == 6, (backend, path, res.stdout, res.stderr)
            assert SECRET not in res.stdout + res.stderr
    res = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(layout["ws"]),
                          "get", "~/agent-notes.md"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0 and "ferry leaves" in res.stdout


def test_hits_naming_other_files_are_dropped_above_the_backend(tmp_path, layout):
    """A QMD that answers hits for files beside the single-file collection (or behind a symlink)
    never gets them through: the scoped manager drops them and says so."""
    settings = _settings(tmp_path, layout)
    settings = settings.model_copy(update={"memory": settings.memory.model_copy(update={
        "qmd": settings.memory.qmd.model_copy(update={"command": "qmd", "include_default_memory": False})})})
    env = {
        "FAKE_QMD_HITS": json.dumps(["agent-notes.md", "private/deep/diary.md", "other.md"]),
        "FAKE_QMD_SAMPLES": str(Path(__file__).parents[1] / "qmd-samples"),
        "PATH": f"{FAKEBIN}:{os.environ['PATH']}",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        async def go():
            manager = open_manager(settings)
            try:
                await manager.sync()
                return await manager.search("ferry", min_score=0)
            finally:
                await manager.aclose()

        answer = anyio.run(go)
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert answer.backend == "qmd" and answer.fallback is None
    # Cited as the builtin backend cites the extra path's file (`../home/agent-notes.md`), not as
    # QMD's collection alias: one citation for one file whichever backend answers.
    assert [h.path for h in answer.results] == ["../home/agent-notes.md"]
    assert MemoryRules.from_settings(settings).resolve("../home/agent-notes.md")[0] == layout["home"] / "agent-notes.md"
    assert any("2 hit(s) left out" in n for n in answer.notes or [])


def test_a_symlinked_extra_path_is_no_collection_and_no_memory(tmp_path, layout):
    rules = MemoryRules.from_settings(_settings(tmp_path, layout))
    assert [c.name for c in rules.collections] == ["memory-root-main", "memory-dir-main", "custom-1-main"]
    assert rules.collections[2].path == layout["home"] and rules.collections[2].pattern == "agent-notes.md"
    assert not rules.is_memory("link-notes.md") and not rules.is_memory("README.md")
    assert rules.admits_hit("memory/2026-01-05.md") and not rules.admits_hit("notes/private.md")
    assert rules.admits_hit("sessions/abc.jsonl", "sessions") and not rules.admits_hit(
        "sessions/../x.jsonl", "sessions"
    )


@pytest.mark.parametrize("pattern, path, expected", [
    ("**/*.md", "a.md", True), ("**/*.md", "x/y/a.md", True), ("*.md", "x/a.md", False), ("*.md", "a.md", True),
    ("MEMORY.md", "MEMORY.md", True), ("MEMORY.md", "notes/MEMORY.md", False), ("notes/**/*.md", "notes/a/b.md", True),
    ("notes/**/*.md", "other/a.md", False), ("{a,b}/*.md", "b/x.md", True), ("{a,b}/*.md", "c/x.md", False),
    ("[[]x].md", "[x].md", True), ("[[]x].md", "x.md", False), ("?.md", "ab.md", False),
])
def test_collection_patterns_match_as_globs(pattern, path, expected):
    assert glob_matches(pattern, path) is expected
