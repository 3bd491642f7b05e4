"""The local cross-encoder's plumbing, on ONNX graphs built here (tests/cross_encoder_graph.py):
inputs by name, truncation to maxTokens, batching and padding, output shapes, budget, bad folders."""

from __future__ import annotations

import time

import anyio
import numpy as np
import pytest

pytest.importorskip("onnx", reason="the test graphs are built with the onnx package (pip install onnx)")

from cross_encoder_graph import bert_cross_encoder, model_folder, probe_graph  # noqa: E402
from memsift.engine.errors import ProviderError, ProviderUnavailableError  # noqa: E402
from memsift.engine.rerank import RerankBudgetExceeded  # noqa: E402
from memsift.engine.rerank.local import LocalCrossEncoder  # noqa: E402

QUERY = "ledger database"
DOCS = ["we chose postgres for the ledger", "lisbon hotels " * 200, "x", "the ledger ledger database", "nightly export"]


def _tokens(enc: LocalCrossEncoder, query: str, doc: str) -> int:
    enc.load()
    return len(enc._tokenizer.encode(query, doc).ids)


def test_length_probe_sees_each_pair_cut_to_max_tokens(tmp_path):
    folder = model_folder(tmp_path / "m", lambda p: probe_graph(p, mode="length"))
    enc = LocalCrossEncoder(folder, max_tokens=32, batch_size=16)
    scores = enc.score_sync(QUERY, DOCS)
    # The graph's logit is the number of real (unpadded) tokens: [CLS] query [SEP] chunk [SEP], at most 32.
    assert scores[1] == 32.0  # 400 words cut to maxTokens
    assert scores[2] == 6.0  # [CLS] ledger database [SEP] x [SEP]
    assert scores[0] == _tokens(enc, QUERY, DOCS[0]) < 32
    long_query = LocalCrossEncoder(folder, max_tokens=32).score_sync("ledger " * 100, ["short chunk"])
    assert long_query == [32.0]  # longest first: a long query is cut too, never an error


def test_batches_pad_to_their_longest_and_do_not_change_scores(tmp_path):
    folder = model_folder(tmp_path / "m", lambda p: bert_cross_encoder(p, seed=3))
    one = LocalCrossEncoder(folder, max_tokens=64, batch_size=1)
    two = LocalCrossEncoder(folder, max_tokens=64, batch_size=2)
    all_ = LocalCrossEncoder(folder, max_tokens=64, batch_size=16)
    s1, s2, s16 = (e.score_sync(QUERY, DOCS) for e in (one, two, all_))
    assert (one.batches_run, two.batches_run, all_.batches_run) == (5, 3, 1)
    # Padding is masked: a pair scores the same alone or beside a longer one.
    np.testing.assert_allclose(s1, s2, atol=1e-5)
    np.testing.assert_allclose(s1, s16, atol=1e-5)
    assert len(set(np.round(s1, 6))) == len(DOCS)  # random weights still tell the pairs apart


def test_token_probe_orders_chunks_by_the_query_word_and_feeds_only_the_graphs_inputs(tmp_path):
    ledger_id = None
    for token_types, output in ((True, "b1"), (False, "b"), (False, "b2")):
        folder = tmp_path / f"m-{token_types}-{output}"
        if ledger_id is None:
            probe = model_folder(tmp_path / "probe", lambda p: probe_graph(p))
            enc = LocalCrossEncoder(probe)
            enc.load()
            ledger_id = enc._tokenizer.token_to_id("ledger")
        model_folder(
            folder, lambda p: probe_graph(p, mode="token", token_id=ledger_id, token_types=token_types, output=output)
        )
        enc = LocalCrossEncoder(folder, batch_size=2)
        scores = enc.score_sync(QUERY, DOCS)
        # ledger once in the query, plus its count in the chunk; [batch, 2] reads class 1 over class 0.
        assert scores == [2.0, 1.0, 1.0, 3.0, 1.0], (token_types, output)
        enc.load()
        assert ("token_type_ids" in enc.encode(QUERY, DOCS[:1])) is token_types


def test_budget_is_checked_between_batches(tmp_path):
    folder = model_folder(tmp_path / "m", lambda p: probe_graph(p))
    enc = LocalCrossEncoder(folder, batch_size=2)
    with pytest.raises(RerankBudgetExceeded, match="scored 0 of 5 chunks within the budget"):
        enc.score_sync(QUERY, DOCS, deadline=time.monotonic() - 1)
    assert anyio.run(lambda: enc.score(QUERY, DOCS[:1], deadline=time.monotonic() + 60)) == [
        pytest.approx(_tokens(enc, QUERY, DOCS[0]))
    ]


def test_a_folder_without_its_files_or_with_a_wrong_graph_says_what_is_missing(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        ProviderUnavailableError, match=r"has no model\.onnx .*modelPath needs model\.onnx and tokenizer\.json"
    ):
        LocalCrossEncoder(tmp_path / "empty").check_setup()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not an onnx graph")
    (broken / "tokenizer.json").write_text("{}")
    with pytest.raises(ProviderUnavailableError, match="cannot load"):
        LocalCrossEncoder(broken).score_sync(QUERY, DOCS)

    def three_outputs(p):
        from onnx import TensorProto, helper

        from cross_encoder_graph import _inputs, _save

        nodes = [helper.make_node("Cast", ["input_ids"], ["f"], to=TensorProto.FLOAT),
                 helper.make_node("Slice", ["f", "s", "e", "a"], ["logits"])]
        inits = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("s", 0), ("e", 3), ("a", 1))]
        out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])]
        _save(helper.make_graph(nodes, "three", _inputs(False), out, inits), p)

    wrong = model_folder(tmp_path / "wrong", three_outputs)
    with pytest.raises(ProviderError, match=r"returned shape \(5, 3\); expected"):
        LocalCrossEncoder(wrong).score_sync(QUERY, DOCS)
