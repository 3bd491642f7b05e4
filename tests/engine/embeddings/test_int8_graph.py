"""The int8 graph of the shipped model: built once into the cache, verified, rebuilt when damaged."""

from __future__ import annotations

import logging

import anyio
import pytest

from helpers import make_settings
from memsift.backends.builtin.manager import BuiltinSearchManager
from memsift.engine.embeddings import int8_graph
from memsift.engine.embeddings.local import LocalMiniLMProvider

pytestmark = pytest.mark.skipif(
    not int8_graph.int8_build_available(),
    reason="the int8 build needs the onnx package (a default dependency: pip install onnx)",
)

TEXTS = [
    "We chose PostgreSQL for the ledger service.",
    "The ledger will run on a Postgres database.",
    "She is planning a trip to Lisbon in December.",
    "The soup needs onions, garlic, carrots and a slow simmer. " * 40,  # several windows
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("model-cache")


def test_int8_graph_is_built_once_with_a_checksum_and_keeps_the_vectors(cache):
    p = LocalMiniLMProvider(cache_dir=cache)
    assert p.quantised and p.graph_file.parent == cache
    checksum = p.graph_file.with_suffix(".sha256").read_text().strip()
    assert checksum == int8_graph._sha256(p.graph_file)
    built = p.graph_file.stat().st_mtime_ns
    fp32 = LocalMiniLMProvider(int8=False)
    a, b = p.embed_sync(TEXTS), fp32.embed_sync(TEXTS)
    assert (a * b).sum(axis=1).min() > 0.98  # the same vectors within quantisation noise
    assert float(a[0] @ a[1]) > float(a[0] @ a[2]) + 0.3  # and the same neighbours
    again = LocalMiniLMProvider(cache_dir=cache)
    assert again.graph_file == p.graph_file and again.graph_file.stat().st_mtime_ns == built  # reused


def test_building_the_graph_prints_nothing_and_leaves_logging_as_it_was(tmp_path, capfd):
    root = logging.getLogger()
    handlers = list(root.handlers)
    for h in handlers:  # pytest's capture handlers would swallow a root record: let lastResort print it
        root.removeHandler(h)
    try:
        assert LocalMiniLMProvider(cache_dir=tmp_path).quantised  # built here (the graph is made on first use)
        assert root.handlers == []  # the quantiser's logging.warning used to basicConfig the root logger
    finally:
        for h in handlers:
            root.addHandler(h)
    err = capfd.readouterr().err
    assert "quantization" not in err and "WARNING" not in err, err  # the quantiser's advice stays out


def test_int8_vectors_get_their_own_fingerprint(cache):
    int8, fp32 = LocalMiniLMProvider(cache_dir=cache), LocalMiniLMProvider(int8=False)
    assert not fp32.quantised and fp32.graph_file == fp32._model_file
    assert int8.fingerprint != fp32.fingerprint and len(int8.fingerprint) == 16
    assert int8.fingerprint == LocalMiniLMProvider(cache_dir=cache).fingerprint


def test_a_damaged_graph_is_rebuilt(cache):
    graph = LocalMiniLMProvider(cache_dir=cache).graph_file
    good = graph.read_bytes()
    graph.write_bytes(good[: len(good) // 2])  # truncated, as by a crash or a full disk
    p = LocalMiniLMProvider(cache_dir=cache)
    assert p.graph_file == graph and graph.read_bytes() == good  # the same build again
    assert p.embed_sync(["hello"]).shape == (1, 384)


def test_without_onnx_or_a_usable_cache_the_fp32_graph_is_used(tmp_path, monkeypatch):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    p = LocalMiniLMProvider(cache_dir=not_a_dir / "models")  # cannot be created
    assert not p.quantised and p.fingerprint == LocalMiniLMProvider(int8=False).fingerprint
    monkeypatch.setattr(int8_graph, "int8_build_available", lambda: False)
    p = LocalMiniLMProvider(cache_dir=tmp_path / "empty")
    assert not p.quantised and not (tmp_path / "empty").exists()
    assert p.embed_sync(["hello"]).shape == (1, 384)


def test_an_index_of_fp32_vectors_is_rebuilt_with_int8_ones(tmp_path, example_workspace, cache):
    settings = make_settings(tmp_path, example_workspace)

    async def index_with(provider):
        m = BuiltinSearchManager(settings, provider=provider)
        try:
            report = await m.sync(reason="search")
            return report, (await m.search("which database for the ledger")).results
        finally:
            await m.aclose()

    first, _ = anyio.run(index_with, LocalMiniLMProvider(int8=False))
    second, hits = anyio.run(index_with, LocalMiniLMProvider(cache_dir=cache))
    assert first.full_reindex and second.full_reindex and second.reindex_cause
    assert second.chunks_embedded > 0 and hits
