"""The reader's data and late interaction's scoring (contrib/reader/): what docs/performance.md's
round-4 reader figures are computed from. Small chats are written here; no torch, no data sets."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

READER = Path(__file__).resolve().parents[2] / "contrib" / "reader"
sys.path.insert(0, str(READER))
sys.path.insert(0, str(READER.parent / "bench"))

from late_interaction import maxsim, question_weights, reordered  # noqa: E402
from self_pairs import self_groups, turns_of  # noqa: E402

CHAT = """## Session 1
[s1#0] User: I booked the plumber for Tuesday morning. He said the invoice would be around 185 euros.
[s1#1] Assistant: Great, that should fix the leak under the sink. Do you want a reminder on Monday evening?
[s1#2] User: Yes please. Also remind me to water the tomatoes before I leave for the airport.
[s1#3] Assistant: Done. I set both reminders. Is there anything else you need for the trip to Lisbon?
[s1#4] User: Could you list what I should pack for a week of rain? I always forget my umbrella somehow.
[s1#5] Assistant: Pack a light rain jacket, two pairs of shoes, and the umbrella by the door tonight.
"""


def _workspace(root: Path, person: str, days: int, *, shout: bool = False) -> None:
    memory = root / person / "memory"
    memory.mkdir(parents=True)
    for d in range(days):
        text = CHAT.upper() if shout else CHAT
        (memory / f"2026-01-0{d + 1}.md").write_text(text.replace("S1#", "s1#").replace("s1#", f"{person}{d}#"),
                                                   encoding="utf-8")
    (root / person / "MEMORY.md").write_text("# Memory\n- not a chat\n", encoding="utf-8")


def test_turns_drop_tags_and_skip_other_lines(tmp_path: Path) -> None:
    _workspace(tmp_path, "ana", 1)
    turns = turns_of(tmp_path / "ana" / "memory" / "2026-01-01.md")
    assert len(turns) == 6
    assert turns[0] == ("User", "I booked the plumber for Tuesday morning. He said the invoice would be around "
                                "185 euros.")
    assert not any("#" in text or "[" in text for _, text in turns)


def test_groups_ask_with_a_sentence_or_a_question_and_answer_with_its_turn(tmp_path: Path) -> None:
    _workspace(tmp_path, "ana", 2)
    _workspace(tmp_path, "ben", 2)
    groups = self_groups([tmp_path], negatives=3, limit=40, rng=random.Random(3))
    assert groups
    all_turns = {f"{s}: {t}" for f in tmp_path.rglob("2026-*.md") for s, t in turns_of(f)}
    for query, positive, negatives in groups:
        assert len(negatives) == 3
        assert positive not in negatives
        assert all(n in all_turns for n in negatives)  # negatives are real turns, never MEMORY.md
        if query.endswith("?") and positive.startswith("Assistant:"):
            continue  # a reply: the question's turn asked it, the next turn answers
        # inverse cloze: the sentence is cut from its turn, except one time in ten
        assert query not in positive or positive.removeprefix("User: ").removeprefix("Assistant: ").count(".") >= 1


def test_easy_groups_take_negatives_from_other_files(tmp_path: Path) -> None:
    _workspace(tmp_path, "ana", 1)
    _workspace(tmp_path, "ben", 1, shout=True)
    groups = self_groups([tmp_path], negatives=4, limit=12, rng=random.Random(5), easy=True)
    assert groups
    for _query, positive, negatives in groups:
        assert len(negatives) == 4
        own = "USER:" if positive.isupper() else "User:"  # ben's chat is ana's, shouted
        assert not any(n.startswith(own) or n.startswith(own.replace("USER", "ASSISTANT").replace("User", "Assistant"))
                       for n in negatives)


def test_maxsim_is_the_mean_best_match_of_the_question_pieces() -> None:
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    d = np.array([[1.0, 0.0], [0.6, 0.8]])
    assert maxsim(q, d) == (1.0 + 0.8) / 2
    assert maxsim(q, d, np.array([1.0, 0.0])) == 1.0  # a piece of weight 0 does not count
    assert maxsim(q, np.zeros((0, 2))) == 0.0


def test_stopwords_and_punctuation_do_not_count() -> None:
    weights = question_weights(["what", "did", "the", "plumber", "charge", "?"], "stop", {})
    assert weights.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 0.0]


def test_the_blend_can_lift_a_hit_over_the_backends_order() -> None:
    row = {"hits": [{"path": "a.md", "start": 1, "end": 2, "snippet": "a", "score": 0.60},
                    {"path": "b.md", "start": 1, "end": 2, "snippet": "b", "score": 0.55},
                    {"path": "c.md", "start": 1, "end": 2, "snippet": "c", "score": 0.10}]}
    assert [h.path for h in reordered(row, [0.2, 0.9], 0.0)] == ["a.md", "b.md", "c.md"]
    # 0.7 * 0.55 + 0.3 * 0.9 = 0.655 > 0.7 * 0.60 + 0.3 * 0.2 = 0.48; the unscored third keeps its place
    assert [h.path for h in reordered(row, [0.2, 0.9], 0.3)] == ["b.md", "a.md", "c.md"]


def _run(graph: bytes, ids: list[int]) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(graph, sess_options=opts, providers=["CPUExecutionProvider"])
    x = np.asarray([ids], dtype=np.int64)
    feeds = {"input_ids": x, "attention_mask": np.ones_like(x), "token_type_ids": np.zeros_like(x)}
    return session.run(None, {k: v for k, v in feeds.items() if k in {i.name for i in session.get_inputs()}})[0]


def test_the_graph_cut_after_the_last_layer_is_the_whole_model_and_an_earlier_cut_is_not():
    import pytest

    pytest.importorskip("onnx", reason="the reader cuts the model's graph with the onnx package")
    from late_reader import cut_after_layer, piece_tokenizer
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    graph_file = LocalMiniLMProvider().graph_file
    ids = piece_tokenizer().encode("We chose PostgreSQL 16 for the ledger after the load test.").ids
    whole = _run(graph_file.read_bytes(), ids)
    assert np.allclose(_run(cut_after_layer(graph_file, 6), ids), whole, atol=1e-5)
    second = _run(cut_after_layer(graph_file, 2), ids)
    assert second.shape == whole.shape
    cos = (second * whole).sum(-1) / np.linalg.norm(second, axis=-1) / np.linalg.norm(whole, axis=-1)
    assert cos.min() < 0.9  # layer 2's vectors are not the output's
    turned = np.eye(384, dtype=np.float32)[::-1]  # a projection that reverses the dimensions
    assert np.allclose(_run(cut_after_layer(graph_file, 2, turned), ids), second[..., ::-1], atol=1e-5)
    with pytest.raises(ValueError, match="LayerNormalization"):
        cut_after_layer(graph_file, 7)


def test_the_layer_reader_scores_each_hit_as_maxsim_alone_in_its_own_place():
    import pytest

    pytest.importorskip("onnx", reason="the reader cuts the model's graph with the onnx package")
    from late_interaction import hits_idf
    from late_reader import PIECES, LayerReader

    reader = LayerReader(2)
    docs = ["we chose postgres for the ledger", "lisbon hotels " * 200, "x", "the nightly export of the ledger"]
    together = reader.score("ledger database", docs)
    q_ids, q_words = reader.encode("ledger database")
    weights = question_weights(q_words[1:-1], "idf", hits_idf(docs, reader.tok))
    alone = [maxsim(reader.vectors(q_ids), reader.vectors(reader.encode(d)[0]), weights) for d in docs]
    assert np.allclose(together, alone, atol=1e-6)
    assert len(set(together)) == len(docs)
    assert together[0] > together[2]  # the ledger line over "x"
    assert len(reader.encode("lisbon hotels " * 200)[0]) == PIECES


def test_weighing_by_the_questions_own_hits_counts_a_word_every_hit_holds_least():
    from late_interaction import piece_tokenizer, pieces, row_weights

    tok = piece_tokenizer()
    row = {"query": "Caroline garden fence", "hits": [{"snippet": "Caroline: the garden fence fell over"},
                                                      {"snippet": "Caroline: lunch with Mel"},
                                                      {"snippet": "Caroline: a walk"}]}
    words = pieces(row["query"], tok, 128)
    weights = dict(zip(words, row_weights(row, words, tok, "hits", {}, candidates=3)))
    assert words == ["caroline", "garden", "fence"]
    assert weights["caroline"] < weights["garden"] == weights["fence"]
    # Only the question's top `candidates` count: with one hit every word is in all of them.
    one = dict(zip(words, row_weights(row, words, tok, "hits", {}, candidates=1)))
    assert one["caroline"] == one["garden"]


def test_token_codes_keep_a_hits_signs_and_the_questions_projection():
    from token_codes import coded, signs

    rng = np.random.default_rng(3)
    directions = np.linalg.qr(rng.normal(size=(384, 384)))[0][:, :16].astype(np.float32)
    question, hit = rng.normal(size=(3, 384)), rng.normal(size=(5, 384))
    out = coded({"q": question, "h": hit}, {"q"}, directions)
    projected = question @ directions
    assert np.allclose(out["q"], projected / np.linalg.norm(projected, axis=-1, keepdims=True), atol=1e-3)
    assert set(np.unique(np.round(np.abs(out["h"]) * 4, 3))) == {1.0}  # ±1/√16: one bit a dimension
    assert np.array_equal(out["h"] > 0, hit @ directions >= 0)
    assert np.array_equal(signs(np.zeros((1, 4))), np.full((1, 4), 0.5, dtype=np.float32))  # zero counts as +
