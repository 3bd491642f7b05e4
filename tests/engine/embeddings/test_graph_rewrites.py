"""The exported graph's attention, GELU and NaN guards rewritten into fused kernels: the same function,
and a rewrite that would change it (or finds no pattern) changes nothing."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from memsift.engine.embeddings import graph_rewrites, int8_graph
from memsift.engine.embeddings.local import LocalMiniLMProvider, _bundled_model, _bundled_tokenizer

pytestmark = pytest.mark.skipif(
    not int8_graph.int8_build_available(),
    reason="the rewrites need the onnx package (a default dependency: pip install onnx)",
)

TEXTS = [
    "We chose PostgreSQL 16 for the ledger service.",
    "How much was the plumbing repair? The plumber came on Tuesday; invoice €185. " * 6,
    "ok",
]


@pytest.fixture(scope="module")
def fp32_model():
    import onnx

    return int8_graph._fold_dequantised_weights(onnx.load(str(_bundled_model())))


def _session(model):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _padded_batch():
    """The three texts as one batch, padded to the longest: masked keys must stay masked."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_bundled_tokenizer()))
    tok.no_padding()
    tok.no_truncation()
    ids = [tok.encode(t).ids[:256] for t in TEXTS]
    width = max(map(len, ids))
    tokens = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros_like(tokens)
    for i, row in enumerate(ids):
        tokens[i, : len(row)], mask[i, : len(row)] = row, 1
    return {"input_ids": tokens, "attention_mask": mask, "token_type_ids": np.zeros_like(tokens)}, mask


def test_the_rewritten_graph_is_the_same_function_with_padding_too(fp32_model):
    rewritten, done = graph_rewrites.rewrite(fp32_model)
    assert done == {"nan guards": 6, "attention": 6, "gelu": 6}  # each of the six layers
    ops = collections.Counter(n.op_type for n in rewritten.graph.node)
    assert ops["MultiHeadAttention"] == 6 and ops["Gelu"] == 6
    assert not {"IsNaN", "Where", "Erf", "Softmax", "Transpose"} & set(ops)
    feeds, mask = _padded_batch()
    before, after = _session(fp32_model).run(None, feeds)[0], _session(rewritten).run(None, feeds)[0]
    real = mask.astype(bool)  # padded positions' outputs are never pooled
    assert np.allclose(before[real], after[real], atol=1e-4, rtol=1e-3)
    assert not np.allclose(before[real], after[real][::-1])  # a comparison that can fail


def test_a_rewrite_that_would_change_the_function_leaves_the_graph_as_it_was(fp32_model, monkeypatch):
    def gelu_as_relu(g):  # matches GELU, writes the wrong op: the check must refuse the result
        count = graph_rewrites._fuse_gelu(g)
        for n in g.graph.node:
            if n.op_type == "Gelu":
                n.op_type, n.domain = "Relu", ""
        return count

    rewrites = [(name, gelu_as_relu if name == "gelu" else fn) for name, fn in graph_rewrites.REWRITES]
    monkeypatch.setattr(graph_rewrites, "REWRITES", tuple(rewrites))
    model, done = graph_rewrites.rewrite(fp32_model)
    assert done == {} and model is fp32_model


def test_a_graph_without_the_patterns_is_left_alone():
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input_ids_f", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("input_ids_f", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    same, done = graph_rewrites.rewrite(model)
    assert done == {} and same is model


def test_the_built_int8_graph_runs_the_fused_kernels_and_keeps_quality(tmp_path):
    import onnx

    provider = LocalMiniLMProvider(cache_dir=tmp_path)
    ops = collections.Counter(n.op_type for n in onnx.load(str(provider.graph_file)).graph.node)
    assert ops["MultiHeadAttention"] == 6 and ops["Gelu"] == 6 and ops["DynamicQuantizeMatMul"] > 0
    assert not {"IsNaN", "Where", "SkipLayerNormalization"} & set(ops)  # the slow fused norm left out
    int8, fp32 = provider.embed_sync(TEXTS), LocalMiniLMProvider(int8=False).embed_sync(TEXTS)
    cosine = (int8 * fp32).sum(axis=1)
    assert cosine[:2].min() > 0.98  # the fp32 model's vectors within quantisation noise
    # A 3-token window ("ok") quantises coarsest: 0.969-0.982 by recipe and CPU kind, measured
    assert cosine[2] > 0.96
