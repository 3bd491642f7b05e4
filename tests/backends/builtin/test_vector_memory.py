"""Vectors in memory (backends/builtin/vector_memory.py): the 1-bit first pass with exact
rescoring finds what the exact scan finds, the exact in-memory scan of a long-running host agrees
with sqlite-vec, and both follow syncs (added, edited, removed notes) from the index's vector log."""

from __future__ import annotations

import random

import anyio
import numpy as np
import pytest

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin import indexer as indexer_module
from memsift.backends.builtin.store import blob_to_vec
from memsift.engine.embeddings.fake import FakeEmbeddingProvider

WORDS = [f"w{i}" for i in range(400)]
ANIMALS = {  # notes written during the test: long enough to escape the short-chunk discount
    "zebra": "zebra quagga okapi giraffe hyena jackal lemur tapir gazelle impala eland kudu",
    "narwhal": "narwhal beluga orca dolphin porpoise manatee seal walrus otter puffin gannet tern",
    "walrus": "walrus manatee dugong sealion elephantseal harpseal furseal leopardseal monkseal",
    "ibis": "ibis heron egret stork crane spoonbill flamingo pelican cormorant bittern",
}


def _workspace(root, n_files: int = 1200):
    rng = random.Random(5)
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- nothing yet\n")
    for i in range(n_files):
        words = [w for w in rng.sample(WORDS, 12) for _ in range(rng.randint(1, 4))]  # counts vary: few ties
        rng.shuffle(words)
        words = " ".join(words)
        (ws / "memory" / f"note-{i:04d}.md").write_text(f"# note {i}\n\n- {words}\n")
    return ws


def _manager(tmp_path, ws, **vector):
    settings = make_settings(tmp_path, ws, {"store": {"vector": vector}, "query": {"minScore": 0}})
    return BuiltinSearchManager(settings, provider=FakeEmbeddingProvider(dims=64))


def _exact_scores(m: BuiltinSearchManager, query: str) -> dict[str, float]:
    conn = m._reader()
    rows = conn.execute("SELECT path, embedding FROM chunks WHERE embedding IS NOT NULL").fetchall()
    q = np.asarray(anyio.run(m.provider.embed_query, query), dtype=np.float32)
    mat = np.stack([blob_to_vec(b) for _, b in rows])
    sims = mat @ q / np.maximum(np.linalg.norm(mat, axis=1) * np.linalg.norm(q), 1e-12)
    return {path: float(s) for (path, _), s in zip(rows, sims)}


def _exact_top(m: BuiltinSearchManager, query: str, k: int) -> list[str]:
    scores = _exact_scores(m, query)
    return sorted(scores, key=scores.__getitem__, reverse=True)[:k]


def _warm(m: BuiltinSearchManager) -> None:
    """One search starts the background load (sqlite-vec answers it); wait for the load."""
    assert _paths(m, "w1 w2 w3")
    assert m._memory_vectors.wait_loaded(60) and m._memory_vectors.load_error is None


def _paths(m: BuiltinSearchManager, query: str, k: int = 10) -> list[str]:
    answer = anyio.run(lambda: m.search(query, mode="vector", max_results=k, min_score=0))
    return [h.path for h in answer.results]


def test_the_first_pass_over_bit_codes_finds_what_the_exact_scan_finds(tmp_path):
    ws = _workspace(tmp_path)
    m = _manager(tmp_path, ws, quantizeAbove=0, rescorePool=60)  # 60 of ~1,200 rows rescored
    rng = random.Random(9)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(30)]
    try:
        _warm(m)
        recalls = []
        for q in queries:
            got = _paths(m, q)
            exact = _exact_scores(m, q)
            tenth = sorted(exact.values(), reverse=True)[9]
            recalls.append(sum(exact[p] >= tenth - 1e-6 for p in got) / 10)  # ties count
        assert m._memory_vectors is not None and m._memory_vectors.mode == "quantized"
        assert np.mean(recalls) >= 0.9, recalls
    finally:
        m._close_reader()


def test_a_long_running_host_scans_exactly_in_memory_and_agrees_with_sqlite_vec(tmp_path):
    ws = _workspace(tmp_path, 300)
    cold = _manager(tmp_path, ws)
    host = _manager(tmp_path, ws)

    class Quiet:  # the host's change check: nothing changed
        def changed(self) -> bool:
            return False

    host.watch_changes(Quiet())
    try:
        _warm(host)
        for q in ("w1 w2 w3", "w200 w17", "w399 w5 w77 w120"):
            a = anyio.run(lambda: cold.search(q, mode="vector", max_results=8, min_score=0))
            b = anyio.run(lambda: host.search(q, mode="vector", max_results=8, min_score=0))
            assert [h.path for h in a.results] == [h.path for h in b.results]
            assert [h.score for h in a.results] == pytest.approx([h.score for h in b.results], abs=1e-5)
        assert host._memory_vectors.mode == "exact" and cold._memory_vectors.mode is None  # cold used vec0
        assert not cold._memory_vectors.wait_loaded(0)  # a small index is not held by a one-off process
    finally:
        cold._close_reader()
        host._close_reader()


@pytest.mark.parametrize("quantize_above", [0, 10**9])  # the bit codes, and the exact matrix
def test_vectors_in_memory_follow_syncs_from_the_log_and_reload_when_it_was_pruned(
    tmp_path, monkeypatch, quantize_above
):
    ws = _workspace(tmp_path, 400)
    m = _manager(tmp_path, ws, quantizeAbove=quantize_above, rescorePool=400)
    m.watch_changes(None)
    m.resident_vectors = True  # as a host would (exact below quantizeAbove)
    try:
        _warm(m)
        mem = m._memory_vectors
        loads = mem.full_loads
        (ws / "memory" / "note-0001.md").write_text(f"# note 1\n\n- {ANIMALS['zebra']}\n")  # edited
        (ws / "memory" / "note-0002.md").unlink()  # removed
        (ws / "memory" / "fresh.md").write_text(f"# fresh\n\n- {ANIMALS['narwhal']}\n")  # added
        m.mark_dirty()
        assert _paths(m, ANIMALS['zebra'], 3)[0] == "memory/note-0001.md"
        assert _paths(m, ANIMALS['narwhal'], 3)[0] == "memory/fresh.md"
        for q in ("w1 w2", "w3 w4 w5", "w100"):
            assert "memory/note-0002.md" not in _paths(m, q, 50)
        assert (
            m._memory_vectors is mem and mem.full_loads == loads and mem.wait_loaded(0)
        )  # caught up from the log alone

        monkeypatch.setattr(indexer_module, "VECTOR_LOG_KEEP", 0)  # the log keeps nothing back
        (ws / "memory" / "fresh.md").write_text(f"# fresh\n\n- {ANIMALS['walrus']}\n")
        (ws / "memory" / "extra.md").write_text(f"# extra\n\n- {ANIMALS['ibis']}\n")
        m.mark_dirty()
        assert _paths(m, ANIMALS['walrus'], 3)[0] == "memory/fresh.md"  # sqlite-vec, while memory reloads
        assert mem.wait_loaded(60) and mem.full_loads == loads + 1  # pruned past what it had seen: reloaded whole
        assert _paths(m, ANIMALS['ibis'], 3)[0] == "memory/extra.md"
        assert "memory/fresh.md" not in _paths(m, ANIMALS['narwhal'], 5)[:1]
    finally:
        m._close_reader()
