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


def test_a_cache_that_cannot_be_written_keeps_the_graph_in_the_private_runtime_folder(tmp_path, monkeypatch, cache):
    # A read-only home (a container, a sandboxed service): the int8 graph, and so the vectors' fingerprint,
    # must stay those of the processes that could write the cache, or their index falls to keywords only.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    p = LocalMiniLMProvider(cache_dir=not_a_dir / "models")  # cannot be created
    assert p.quantised and p.graph_file.parent == tmp_path / "run" / "memsift" / "models"
    assert p.fingerprint == LocalMiniLMProvider(cache_dir=cache).fingerprint
    assert (tmp_path / "run" / "memsift").stat().st_mode & 0o777 == 0o700
    again = LocalMiniLMProvider(cache_dir=not_a_dir / "models")  # found there, not built again
    built = p.graph_file.stat().st_mtime_ns
    assert again.graph_file == p.graph_file and again.graph_file.stat().st_mtime_ns == built


def test_without_onnx_or_any_usable_folder_the_fp32_graph_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "memsift").write_text("not a folder")  # the runtime folder is not usable either
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    p = LocalMiniLMProvider(cache_dir=not_a_dir / "models")
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


def test_no_two_weights_the_kernels_add_in_16_bits_can_saturate(cache):
    """AVX2's integer kernel adds each pair of uint8 × int8 products (rows 2i and 2i + 1 of a weight
    column) in 16 bits with saturation, where VNNI sums in 32: every pair of the stored graph's
    weights sums to at most 128 in magnitude, so 255 × that fits and every CPU computes alike. The
    columns still use the whole int8 range where their pairs allow (not a blanket 7 bits)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(LocalMiniLMProvider(cache_dir=cache).graph_file)).graph
    inits = {i.name: i for i in graph.initializer}
    integer_matmuls = [n for n in graph.node if n.op_type in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat",
                                                               "MatMulInteger")]
    weights = [numpy_helper.to_array(inits[n.input[1]]) for n in integer_matmuls if n.input[1] in inits]
    assert len(weights) == 36 and all(w.dtype == np.int8 and w.ndim == 2 for w in weights)  # 6 layers × 6
    for w in weights:
        pairs = w[0::2].astype(np.int32) + w[1::2].astype(np.int32)
        assert np.abs(pairs).max() <= int8_graph.PAIR_LIMIT
    wide = np.mean([(np.abs(w.astype(np.int32)).max(0) > 64).mean() for w in weights])
    assert wide > 0.2


def test_the_same_vectors_on_a_cpu_without_vnni(cache, tmp_path, monkeypatch):
    """The graph run with this CPU's kernels and with its AVX2 ones (contrib/bench/as_avx2.py: AVX-512
    and VNNI masked, where the CPU allows) gives the same vectors within float rounding."""
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np

    bench = Path(__file__).resolve().parents[3] / "contrib" / "bench"
    sys.path.insert(0, str(bench))
    import as_avx2

    reason = as_avx2.why_not()
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the mask's build, not in the user's cache
    here = LocalMiniLMProvider(cache_dir=cache).embed_sync(TEXTS)
    child = ("import sys, numpy as np, json; from pathlib import Path\n"
             "from memsift.engine.embeddings.local import LocalMiniLMProvider\n"
             f"v = LocalMiniLMProvider(cache_dir=Path({str(cache)!r})).embed_sync(json.loads(sys.argv[1]))\n"
             f"np.save({str(tmp_path / 'avx2.npy')!r}, np.asarray(v))\n")
    import json

    done = subprocess.run([sys.executable, "-c", child, json.dumps(TEXTS)], env=as_avx2.masked_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    there = np.load(tmp_path / "avx2.npy")
    assert (here * there).sum(axis=1).min() > 0.999  # the previous recipe: 0.990 on these
