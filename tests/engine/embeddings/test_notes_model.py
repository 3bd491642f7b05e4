"""`local.notesModelPath`: a second model embeds the notes while the question model embeds the
questions (a smaller student taught the question model's vectors indexes faster). Here the notes
model is the bundled graph with one bias changed, so its vectors are near the bundled ones but not
the same: which model made a vector can be told. The real local model; no torch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

from memsift.engine.errors import ProviderError, ProviderUnavailableError
from memsift.engine.testing.doors import cli_env, run_cli

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

NOTES = ["The plumber came on Tuesday. Invoice €185, paid by card.",
         "We chose PostgreSQL 16 for the ledger after comparing it with SQLite. " * 40]
QUESTION = "how much was the plumbing repair?"


@pytest.fixture(scope="module")
def notes_model(tmp_path_factory) -> Path:
    from memsift.engine.embeddings.local import LocalMiniLMProvider, _bundled_model

    graph = onnx.load(str(_bundled_model()))
    bias = next(i for i in graph.graph.initializer if i.name == "inner.encoder.layer.5.output.LayerNorm.bias")
    changed = onnx.numpy_helper.to_array(bias) * 0.5
    bias.CopyFrom(onnx.numpy_helper.from_array(changed.astype(np.float32), bias.name))
    folder = tmp_path_factory.mktemp("notes-model")
    onnx.save(graph, str(folder / "model.onnx"))
    (folder / "tokenizer.json").write_bytes(Path(LocalMiniLMProvider()._tokenizer_file).read_bytes())
    return folder


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


def test_the_cli_indexes_with_the_notes_model_and_status_says_so(notes_model, tmp_path):
    """From a config file, as an operator sets it: the cold CLI indexes and searches with it, and
    `status` names the notes model; the Python API, the resident helper and MCP over stdio give the
    same hits."""
    from memsift.engine.compose.factory import open_manager
    from memsift.engine.config import MemsiftConfig, resolve_agent

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- " + NOTES[1][:80] + "\n")
    (ws / "memory" / "2026-03-03.md").write_text("# 2026-03-03\n\n- " + NOTES[0] + "\n")
    cfg = tmp_path / "memsift.json"
    local = {"notesModelPath": str(notes_model), "modelCacheDir": str(tmp_path / "models")}
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"provider": "local", "local": local}}}}))

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
