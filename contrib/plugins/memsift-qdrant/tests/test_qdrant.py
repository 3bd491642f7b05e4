"""What is Qdrant's own: its settings checked by memsift, generations kept and dropped, processes
taking turns at the local folder, a server that does not answer (the builtin fallback, or a clear
error), the API key read from its variable and never shown, and the doors: the CLI with its
resident helper, `parity --against qdrant`, MCP over stdio."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from memsift.engine.kit import BackendError, ConfigError
from memsift.engine.kit.testing import NOTES, backend_of, open_manager, resolve_config

pytest.importorskip("memsift_qdrant", reason="the Qdrant plugin is not installed (pip install -e contrib/plugins/memsift-qdrant)")

EXAMPLE = Path(__file__).resolve().parents[3] / "example-workspace"  # memsift's contrib/example-workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    for rel, text in NOTES.items():
        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        (w / rel).write_text(text, encoding="utf-8")
    return w


def _settings(tmp_path: Path, ws: Path, qdrant: dict | None = None, provider: str = "none", environ: dict | None = None):
    overrides = {"stateDir": str(tmp_path / "state"), "memory": {"backend": "qdrant", "qdrant": qdrant or {}},
                 "agents": {"defaults": {"memorySearch": {"provider": provider}}}}
    return resolve_config(overrides=overrides, workspace=ws, environ=environ or {}, cwd=tmp_path)


def _backend(manager):
    return backend_of(manager)  # below scope rules, the evidence ranker and the plugin guard


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


def test_its_settings_are_checked_by_memsift_with_the_files_errors(tmp_path, ws):
    with pytest.raises(ConfigError) as err:
        open_manager(_settings(tmp_path, ws, {"keepGeneration": 3}))
    assert "memory.qdrant.keepGeneration: unknown key (did you mean 'keepGenerations'?)" in str(err.value)
    with pytest.raises(ConfigError, match=r"memory\.qdrant\.collectionPrefix"):
        open_manager(_settings(tmp_path, ws, {"collectionPrefix": "no spaces allowed"}))


def test_a_rebuild_publishes_a_new_generation_and_keeps_only_the_newest(tmp_path, ws):
    manager = open_manager(_settings(tmp_path, ws, {"keepGenerations": 2}))
    store = _backend(manager).store

    async def go():
        try:
            first = await manager.sync()
            assert first.full_reindex and first.reindex_cause == "no index yet" and first.files_indexed == len(NOTES)
            for _ in range(2):
                again = await manager.sync(force=True)
                assert again.full_reindex and again.reindex_cause == "forced"
            assert store.current().number == 3 and store.generations() == [2, 3]
            # BM25's average length is these short notes' own, not a full chunk's (300 words).
            assert 0 < store.current().meta["averageLength"] < 60
            assert (await manager.search("fig tree", min_score=0)).results[0].path == "memory/projects/garden.md"
            note = ws / "memory/projects/garden.md"
            note.write_text(note.read_text().replace("fig tree", "olive sapling"))
            step = await manager.sync()
            assert not step.full_reindex and step.files_indexed == 1 and step.files_unchanged == len(NOTES) - 1
            assert (await manager.search("fig tree", min_score=0, mode="keyword")).results == []
            found = await manager.search("olive sapling", min_score=0, mode="keyword")
            assert [h.path for h in found.results] == ["memory/projects/garden.md"]
            status = await manager.status()
            assert status.backend == "qdrant" and status.files == len(NOTES) and status.index["qdrant"]["generation"] == 3
        finally:
            await manager.aclose()

    anyio.run(go)
    untouched = [p for p in ws.rglob("*.md") if p.name != "garden.md"]  # the one this test edits
    assert untouched and all(p.read_text() == NOTES[str(p.relative_to(ws))] for p in untouched)


def test_processes_take_turns_at_the_local_folder(tmp_path, ws, monkeypatch):
    import memsift_qdrant.store as store_module

    monkeypatch.setattr(store_module, "LOCAL_LINGER_S", 0.0)  # each hands its turn over at once
    holder, waiter = (open_manager(_settings(tmp_path, ws)) for _ in range(2))  # two processes' managers
    anyio.run(holder.sync)
    held = threading.Event()

    def hold(seconds: float) -> None:
        with _backend(holder).store.client():  # another process at work in the folder
            held.set()
            time.sleep(seconds)

    async def search():
        return await waiter.search("fig tree", min_score=0)

    worker = threading.Thread(target=hold, args=(1.0,))
    worker.start()
    held.wait()
    started = time.monotonic()
    answer = anyio.run(search)  # waits its turn, then answers
    assert time.monotonic() - started >= 0.5 and answer.results[0].path == "memory/projects/garden.md"
    worker.join()
    monkeypatch.setattr(store_module, "LOCAL_WAIT_S", 0.3)
    held.clear()
    worker = threading.Thread(target=hold, args=(2.0,))
    worker.start()
    held.wait()
    with pytest.raises(BackendError, match="stayed in use by another memsift process .* run a Qdrant server"):
        anyio.run(search)
    worker.join()
    for m in (holder, waiter):
        anyio.run(m.aclose)


def test_a_server_that_does_not_answer_falls_back_to_builtin_or_says_so(tmp_path, ws):
    url = f"http://127.0.0.1:{_closed_port()}"
    guarded = open_manager(_settings(tmp_path, ws, {"url": url, "fallback": "builtin", "timeoutS": 2}))

    async def fallback():
        try:
            return await guarded.search("zeppelin museum", min_score=0)
        finally:
            await guarded.aclose()

    answer = anyio.run(fallback)
    assert answer.backend == "builtin" and answer.fallback.from_ == "qdrant"
    assert {h.path for h in answer.results} >= {"memory/2026-11-20.md", "memory/2026-11-24.md"}
    bare = open_manager(_settings(tmp_path / "b", ws, {"url": url, "timeoutS": 2}))

    async def fails():
        try:
            await bare.search("zeppelin museum")
        finally:
            await bare.aclose()

    with pytest.raises(BackendError, match=f"Qdrant at {url} failed"):
        anyio.run(fails)


def test_the_api_key_comes_from_its_variable_and_is_never_shown(tmp_path, ws, monkeypatch):
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.delenv("MEMSIFT_TEST_QDRANT_KEY", raising=False)
    manager = open_manager(_settings(tmp_path, ws, {"url": url, "apiKeyEnv": "MEMSIFT_TEST_QDRANT_KEY"}))
    with pytest.raises(BackendError, match="MEMSIFT_TEST_QDRANT_KEY is not set"):
        anyio.run(manager.sync)
    anyio.run(manager.aclose)
    monkeypatch.setenv("MEMSIFT_TEST_QDRANT_KEY", "qd-secret-canary-0042")
    manager = open_manager(_settings(tmp_path, ws, {"url": url, "apiKeyEnv": "MEMSIFT_TEST_QDRANT_KEY", "timeoutS": 2}))
    with pytest.raises(BackendError) as err:
        anyio.run(manager.sync)
    anyio.run(manager.aclose)
    assert "qd-secret-canary" not in str(err.value) and url in str(err.value)


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
    cfg.write_text(json.dumps({"memory": {"backend": "qdrant"}, "agents": {"defaults": {"workspace": str(w)}}}))
    return w, cfg


def test_the_cli_the_resident_helper_and_parity_serve_it(tmp_path, example):
    _ws, cfg = example
    cold = _cli(tmp_path, cfg, "search", "which database did we pick for the ledger?", "--json", MEMSIFT_NO_RESIDENT="1")
    assert cold.returncode == 0, cold.stderr
    answer = json.loads(cold.stdout)
    assert answer["backend"] == "qdrant" and answer["mode"] == "hybrid" and answer["results"][0]["path"] == "MEMORY.md"
    try:
        warm = [json.loads(_cli(tmp_path, cfg, "search", "which database did we pick for the ledger?", "--json").stdout)
                for _ in range(2)]
        assert [h["path"] for h in warm[1]["results"]] == [h["path"] for h in answer["results"]]
        # The helper holds no turn at the folder between searches: a cold command still gets one.
        status = json.loads(_cli(tmp_path, cfg, "status", "--json").stdout)
        assert status["backend"] == "qdrant" and status["helper"]["running"] and status["files"] > 0, status
    finally:
        _cli(tmp_path, cfg, "helpers", "stop", "--all")
    queries = tmp_path / "queries.txt"
    queries.write_text("which database did we pick for the ledger?\nMarco certificates\nLisbon hotels\n数据管道\n")
    report = _cli(tmp_path, cfg, "parity", str(queries), "--against", "qdrant", "--json", MEMSIFT_NO_RESIDENT="1")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert doc["against"] == "qdrant" and doc["comparable"] and doc["summary"]["qdrantErrors"] == 0
    assert doc["summary"]["meanOverlap"] >= 0.8, doc["summary"]


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
    assert out["found"]["backend"] == "qdrant" and out["found"]["results"][0]["path"] == "memory/2026-11-12.md"
    assert out["got"]["text"]
