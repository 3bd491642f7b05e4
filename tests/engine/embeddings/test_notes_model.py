"""`local.notesModelPath`: a second model embeds the notes while the question model embeds the
questions (a smaller student taught the question model's vectors indexes faster). Here the notes
model is the bundled graph with one bias changed, so its vectors are near the bundled ones but not
the same: which model made a vector can be told. The real local model; no torch."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np
import pytest

from helpers import RESIDENT_DRIVER, HttpMcp, make_notes_model, vector_score, wait_for_socket
from memsift.engine.errors import ProviderError, ProviderUnavailableError
from memsift.engine.testing.doors import cli_env, run_cli

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

NOTES = ["The plumber came on Tuesday. Invoice €185, paid by card.",
         "We chose PostgreSQL 16 for the ledger after comparing it with SQLite. " * 40]
QUESTION = "how much was the plumbing repair?"


@pytest.fixture(scope="module")
def notes_model(tmp_path_factory) -> Path:
    return make_notes_model(tmp_path_factory.mktemp("notes-model"))


def test_notes_are_embedded_by_the_notes_model_and_questions_by_the_question_model(notes_model, tmp_path):
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    cache = tmp_path / "models"
    both = LocalMiniLMProvider(notes_model_path=str(notes_model), cache_dir=cache)
    plain = LocalMiniLMProvider(cache_dir=cache)
    student = LocalMiniLMProvider(str(notes_model), cache_dir=cache, student=True)

    notes = both.embed_sync(NOTES)
    assert np.array_equal(notes, student.embed_sync(NOTES))  # the notes model's own vectors, to the bit
    assert not np.allclose(notes, plain.embed_sync(NOTES), atol=1e-3)
    assert np.allclose(both.embed_query_sync(QUESTION), plain.embed_query_sync(QUESTION), atol=1e-5)
    assert np.allclose(anyio.run(both.embed_documents, NOTES), notes, atol=1e-6)
    # The notes model runs as an int8 graph of its own, built once into the same cache
    assert student.quantised and student.graph_file.parent == cache and student.graph_file != plain.graph_file
    assert "notes by " + notes_model.name + " (int8)" in both.runtime


def test_the_fingerprint_names_the_notes_model(notes_model, tmp_path):
    """An index made with notes of another model is rebuilt: the fingerprint differs, and stays the
    same from one process's provider to the next."""
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    cache = tmp_path / "models"
    both = LocalMiniLMProvider(notes_model_path=str(notes_model), cache_dir=cache)
    assert both.fingerprint != LocalMiniLMProvider(cache_dir=cache).fingerprint
    assert both.fingerprint == LocalMiniLMProvider(notes_model_path=str(notes_model), cache_dir=cache).fingerprint


def test_a_missing_notes_model_or_a_download_address_is_refused_clearly(tmp_path):
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    missing = LocalMiniLMProvider(notes_model_path=str(tmp_path / "nowhere.onnx"), cache_dir=tmp_path)
    with pytest.raises(ProviderUnavailableError, match="notesModelPath: local model file not found: .*nowhere.onnx"):
        missing.check_setup()
    with pytest.raises(ProviderUnavailableError, match="local.notesModelPath .* never downloads"):
        LocalMiniLMProvider(notes_model_path="https://example.com/student.onnx")


def test_a_notes_model_of_another_width_is_refused(notes_model, tmp_path, monkeypatch):
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    both = LocalMiniLMProvider(notes_model_path=str(notes_model), cache_dir=tmp_path)
    assert both._notes is not None
    monkeypatch.setattr(both._notes, "embed_sync", lambda texts: np.zeros((len(texts), 768), dtype=np.float32))
    with pytest.raises(ProviderError, match="768-dimensional vectors, the question model 384"):
        both.embed_sync(NOTES)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- " + NOTES[1][:80] + "\n")
    (ws / "memory" / "2026-03-03.md").write_text("# 2026-03-03\n\n- " + NOTES[0] + "\n")
    return ws


def _local_keys(notes_model: Path, tmp_path: Path) -> dict:
    return {"notesModelPath": str(notes_model), "modelCacheDir": str(tmp_path / "models")}


def _config(notes_model: Path, tmp_path: Path) -> Path:
    cfg = tmp_path / "memsift.json"
    memory_search = {"provider": "local", "local": _local_keys(notes_model, tmp_path)}
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": memory_search}}}))
    return cfg


def _places(hits: list[dict]) -> list[tuple[str, int]]:
    return [(h["path"], h["startLine"]) for h in hits]


def test_the_cli_indexes_with_the_notes_model_and_status_says_so(notes_model, tmp_path):
    """From a config file, as an operator sets it: the cold CLI indexes and searches with it, and
    `status` names the notes model; the Python API, the resident helper and MCP over stdio give the
    same hits."""
    from memsift.engine.compose.factory import open_manager
    from memsift.engine.config import MemsiftConfig, resolve_agent

    ws = _workspace(tmp_path)
    cfg = _config(notes_model, tmp_path)

    indexed = run_cli(tmp_path, cfg, "-w", str(ws), "index")
    assert indexed.returncode == 0, indexed.stderr
    found = run_cli(tmp_path, cfg, "-w", str(ws), "search", QUESTION, "--json", "--min-score", "0")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["results"]
    assert hits[0]["path"] == "memory/2026-03-03.md"
    status = run_cli(tmp_path, cfg, "-w", str(ws), "status", "--json")
    assert f"notes by {notes_model.name} (int8)" in json.loads(status.stdout)["modelRuntime"]

    settings = resolve_agent(MemsiftConfig.model_validate(json.loads(cfg.read_text())), workspace=ws,
                             environ={"MEMSIFT_STATE_DIR": str(tmp_path / "state")})

    async def api():
        m = open_manager(settings)
        try:
            return (await m.search(QUESTION, min_score=0)).results
        finally:
            await m.aclose()

    through_api = anyio.run(api)
    assert [(h.path, h.start_line) for h in through_api] == [(h["path"], h["startLine"]) for h in hits]
    assert through_api[0].score == pytest.approx(hits[0]["score"], abs=1e-4)

    # The resident helper (started by the first warm call, answering the second) and MCP over stdio
    first = [(h["path"], h["startLine"]) for h in hits]
    try:
        warm = [run_cli(tmp_path, cfg, "-w", str(ws), "search", QUESTION, "--json", "--min-score", "0", resident=True)
                for _ in range(2)]
        assert [(h["path"], h["startLine"]) for h in json.loads(warm[1].stdout)["results"]] == first
        helped = json.loads(run_cli(tmp_path, cfg, "-w", str(ws), "status", "--json", resident=True).stdout)
        assert helped["helper"]["running"] and f"notes by {notes_model.name}" in helped["modelRuntime"]
    finally:
        run_cli(tmp_path, cfg, "helpers", "stop", "--all", resident=True)
    mcp = pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK")

    async def over_mcp() -> dict:
        params = mcp.StdioServerParameters(command=sys.executable, env=cli_env(tmp_path),
                                           args=["-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "mcp"])
        async with mcp.Client(params) as client:
            return (await client.call_tool("memory_search", {"query": QUESTION, "minScore": 0})).structured_content

    assert [(h["path"], h["startLine"]) for h in anyio.run(over_mcp)["results"]] == first


def test_watch_and_mcp_over_http_search_with_the_notes_model(notes_model, tmp_path):
    """The long-running doors: `memsift watch` answers a terminal's search itself, and `memsift mcp
    --http` answers memory_search, both with the index the notes model made (the cold CLI's hits);
    a note written while watch runs is embedded by the notes model too."""
    pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK")
    ws = _workspace(tmp_path)
    cfg = _config(notes_model, tmp_path)
    assert run_cli(tmp_path, cfg, "-w", str(ws), "index").returncode == 0
    cold = run_cli(tmp_path, cfg, "-w", str(ws), "search", QUESTION, "--json", "--min-score", "0")
    first = _places(json.loads(cold.stdout)["results"])
    assert first[0][0] == "memory/2026-03-03.md"

    runtime = Path(tempfile.mkdtemp(prefix="msn"))  # a socket's path must stay short
    env = cli_env(tmp_path, resident=True, XDG_RUNTIME_DIR=str(runtime),
                  MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED="false")  # watch, not a helper, answers
    watch = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "watch",
                              "--json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    http = HttpMcp([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws)], cli_env(tmp_path),
                   "--no-watch")
    try:
        wait_for_socket(runtime, watch)
        args = ["-c", str(cfg), "-w", str(ws), "search", QUESTION, "--json", "--min-score", "0"]
        by_watch = subprocess.run([sys.executable, "-c", RESIDENT_DRIVER, *args], env=env, capture_output=True,
                                  text=True, timeout=300)
        assert by_watch.returncode == 0, (by_watch.returncode, by_watch.stderr[-2000:])  # 99: watch declined
        assert _places(json.loads(by_watch.stdout)["results"]) == first

        call = {"name": "memory_search", "arguments": {"query": QUESTION, "minScore": 0}}
        assert _places(http.call("tools/call", call)["result"]["structuredContent"]["results"]) == first

        # A note written now: watch embeds it with the notes model (the same vector the notes model gives)
        (ws / "memory" / "2026-03-04.md").write_text("# 2026-03-04\n\n- The roofer sent a quote: €2,400.\n")
        deadline = time.monotonic() + 120
        while True:
            found = subprocess.run([sys.executable, "-c", RESIDENT_DRIVER, "-c", str(cfg), "-w", str(ws), "search",
                                    "roofer quote", "--json", "--min-score", "0", "--mode", "vector"],
                                   env=env, capture_output=True, text=True, timeout=300)
            assert found.returncode == 0, found.stderr[-2000:]
            hits = json.loads(found.stdout)["results"]
            if hits and hits[0]["path"] == "memory/2026-03-04.md":
                break
            assert time.monotonic() < deadline, hits
            time.sleep(0.5)
    finally:
        http.close()
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=30)
        shutil.rmtree(runtime, ignore_errors=True)
    status = json.loads(run_cli(tmp_path, cfg, "-w", str(ws), "status", "--json").stdout)
    assert status["files"] == 3 and f"notes by {notes_model.name}" in status["modelRuntime"]
    text, stored = _stored_vector(tmp_path / "state", "roofer")
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    cache = tmp_path / "models"
    by_notes_model = LocalMiniLMProvider(str(notes_model), cache_dir=cache, student=True).embed_sync([text])[0]
    assert np.allclose(stored, by_notes_model, atol=1e-5)
    assert not np.allclose(stored, LocalMiniLMProvider(cache_dir=cache).embed_sync([text])[0], atol=1e-3)


def _stored_vector(state: Path, word: str) -> tuple[str, np.ndarray]:
    """The chunk holding `word` and the vector the index keeps for it."""
    import sqlite3

    for db in state.rglob("*.sqlite"):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT text, embedding FROM chunks WHERE text LIKE ?", (f"%{word}%",)).fetchone()
        except sqlite3.Error:
            row = None
        con.close()
        if row:
            return row[0], np.frombuffer(row[1], dtype=np.float32)
    raise AssertionError(f"no chunk with {word!r} under {state}")


def test_an_openclaw_config_sets_the_notes_model_as_the_plugin_passes_it(notes_model, tmp_path):
    """The OpenClaw plugin runs memsift with the Gateway's own config file (`--openclaw-config`): the key
    set there, under OpenClaw 2026.9's `memory.search`, reaches the provider, and memsift's own
    config file can set it as well."""
    ws = _workspace(tmp_path)
    openclaw = tmp_path / "openclaw.json"
    local = _local_keys(notes_model, tmp_path)
    openclaw.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws)}},
                                    "memory": {"search": {"provider": "local", "local": local}}}))
    empty = tmp_path / "memsift.json"
    empty.write_text("{}")
    status = run_cli(tmp_path, empty, "--openclaw-config", str(openclaw), "status", "--json")
    assert status.returncode == 0, status.stderr
    assert f"notes by {notes_model.name} (int8)" in json.loads(status.stdout)["modelRuntime"]
    shown = run_cli(tmp_path, empty, "--openclaw-config", str(openclaw), "config", "show")
    assert str(notes_model) in shown.stdout and shown.returncode == 0, shown.stderr


@pytest.mark.parametrize("backend", ["lancedb", "qdrant"])
def test_the_plugin_backends_store_the_notes_models_vectors(notes_model, tmp_path, backend):
    """A backend from another package indexes through the shared provider too: its vector score for a
    note is the builtin index's with the notes model, not the one without."""
    pytest.importorskip(f"memsift_{backend}", reason=f"the {backend} plugin is not installed "
                        f"(pip install -e contrib/plugins/memsift-{backend})")
    with_notes = vector_score(tmp_path, {"backend": backend}, notes_model)
    assert with_notes == pytest.approx(vector_score(tmp_path, {"backend": "builtin"}, notes_model), abs=1e-4)
    assert abs(with_notes - vector_score(tmp_path, {"backend": "builtin"}, None)) > 1e-3
