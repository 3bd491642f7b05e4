"""The data a smaller embedder is distilled from, and how a candidate graph is measured
(contrib/embedder/distil_data.py, contrib/bench/quality.py): what docs/performance.md's distilled
student figures rest on. A real index of a small workspace, the real local model; no torch."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"
sys.path.insert(0, str(CONTRIB / "embedder"))
sys.path.insert(0, str(CONTRIB / "bench"))

import distil_data  # noqa: E402
import quality  # noqa: E402

pytest.importorskip("onnxruntime")

DAY = """# 2026-03-0{d}

- The plumber came on day {d}. Invoice €185, paid by card.
- We chose PostgreSQL 16 for the ledger after comparing it with SQLite on day {d}.
"""


def _provider():
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    return LocalMiniLMProvider()


def test_chunks_come_with_the_vectors_the_shipped_model_gives_them(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for d in (1, 2, 3):
        (ws / "memory" / f"2026-03-0{d}.md").write_text(DAY.format(d=d), encoding="utf-8")
    (ws / "MEMORY.md").write_text("# Memory\n\n- The ledger runs on PostgreSQL 16.\n", encoding="utf-8")
    anyio.run(lambda: quality.warm_index("hybrid", ws, tmp_path / "state" / "evidence-lme" / "ws", lambda _s: None))

    rows = distil_data.index_chunks(tmp_path / "state", "lme")
    assert len(rows) == 4  # one chunk a file, each text once
    texts = [t for t, _ in rows]
    assert any("Invoice €185" in t for t in texts)
    stored = np.stack([np.frombuffer(b, dtype=np.float32) for _, b in rows])
    fresh = _provider().embed_sync(texts)
    assert np.allclose(stored, fresh, atol=1e-5)  # the target is exactly what a search compares against
    assert distil_data.index_chunks(tmp_path / "state", "realmem") == []


def test_sets_whose_licence_forbids_shipping_weights_are_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["distil_data.py", "--work", str(tmp_path), "--sets", "lme,locomo",
                                      "--out", str(tmp_path / "d.npz")])
    with pytest.raises(SystemExit, match="locomo: its licence"):
        distil_data.main()
    assert not (tmp_path / "d.npz").exists()


def test_a_candidate_with_its_int8_graph_runs_as_the_bundled_model(tmp_path: Path, monkeypatch) -> None:
    """A candidate (here the bundled weights saved again, so memsift does not recognise them) runs
    as it is; given the int8 graph built from those weights, it gives the bundled provider's vectors
    to the bit: windows run alone, as the default install runs them."""
    onnx = pytest.importorskip("onnx")
    from memsift.engine.embeddings.local import _bundled_model

    graph = onnx.load(str(_bundled_model()))
    graph.doc_string = "a candidate"
    (tmp_path / "candidate").mkdir()
    onnx.save(graph, str(tmp_path / "candidate" / "model.onnx"))
    bundled = _provider()
    (tmp_path / "candidate" / "tokenizer.json").write_bytes(Path(bundled._tokenizer_file).read_bytes())
    texts = ["The plumber came. Invoice €185.", "We chose PostgreSQL 16 for the ledger. " * 60, "short"]
    expected = bundled.embed_sync(texts)
    monkeypatch.setattr(quality, "_PROVIDERS", {})

    as_is = quality.local_provider(str(tmp_path / "candidate"))
    assert not as_is.quantised
    assert not np.array_equal(as_is.embed_sync(texts), expected)  # fp32: close, not the same

    monkeypatch.setattr(quality, "_PROVIDERS", {})
    candidate = quality.local_provider(str(tmp_path / "candidate"), str(bundled.graph_file))
    assert candidate.quantised
    assert np.array_equal(candidate.embed_sync(texts), expected)



def test_a_notes_model_is_measured_through_its_config_key(tmp_path: Path, monkeypatch) -> None:
    """`--extra '{"local":{"notesModelPath":…}}'`: the bench's one provider a run is the product's own,
    with the notes model (kept apart from the plain one)."""
    monkeypatch.setattr(quality, "_PROVIDERS", {})
    notes = tmp_path / "student.onnx"
    notes.write_bytes(b"not read before the first embedding")
    with_notes = quality.local_provider(notes_model_path=str(notes))
    assert with_notes._notes is not None and with_notes._notes._model_file == notes
    assert quality.local_provider(notes_model_path=str(notes)) is with_notes
    assert quality.local_provider()._notes is None
