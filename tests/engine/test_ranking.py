from __future__ import annotations

import math

import pytest

from memsift.engine.search.ranking import (
    Candidate,
    bm25_rank_to_score,
    bm25_relative_scores,
    dated_file_timestamp,
    decay_multiplier,
    is_evergreen,
    jaccard,
    drop_repeated_lines,
    merge_hybrid,
    mmr_rerank,
    mmr_tokens,
)


@pytest.mark.parametrize(
    "rank,score",
    [(-4.2, 0.8077), (-1, 0.5), (0, 1.0), (1, 0.5), (10, 0.0909), (float("nan"), 0.001), (float("-inf"), 0.001)],
)
def test_bm25_rank_maps_like_the_reference(rank, score):
    assert bm25_rank_to_score(rank) == pytest.approx(score, abs=1e-4)


def test_keyword_scores_are_linear_in_bm25_and_anchored_at_the_best_hit():
    # A long query: the plain mapping gives 0.952 / 0.909 / 0.833, nearly flat.
    scores = bm25_relative_scores([-20.0, -10.0, -5.0])
    assert scores[0] == pytest.approx(bm25_rank_to_score(-20.0))
    assert scores[1] == pytest.approx(scores[0] / 2)
    assert scores[2] == pytest.approx(scores[0] / 4)
    # Weak evidence stays weak: the best hit of a weak query keeps its low absolute score.
    assert bm25_relative_scores([-0.2, -0.1]) == pytest.approx([0.2 / 1.2, 0.1 / 1.2])
    # Degenerate ranks fall back to the plain mapping, never divide by zero.
    assert bm25_relative_scores([0.0, 1.0]) == pytest.approx([1.0, 0.5])
    assert bm25_relative_scores([]) == []
    assert all(0 <= s <= 1 for s in bm25_relative_scores([-3.0, float("nan"), -1e-6]))


def _c(cid: str, text: str = "", **kw) -> Candidate:
    return Candidate(chunk_id=cid, path=f"memory/{cid}.md", source="memory", start_line=1, end_line=2, text=text, **kw)


FULL = " ".join(["word"] * 40)  # enough words that brevity leaves the vector score whole


def test_hybrid_merge_is_a_weighted_union():
    keyword = [_c("a", FULL, text_score=0.8), _c("b", FULL, text_score=0.4)]
    vector = [_c("b", FULL, vector_score=0.9), _c("c", FULL, vector_score=0.5)]
    merged = {c.chunk_id: c for c in merge_hybrid(keyword, vector, vector_weight=0.7, text_weight=0.3)}
    assert merged["a"].score == pytest.approx(0.3 * 0.8)
    assert merged["b"].score == pytest.approx(0.7 * 0.9 + 0.3 * 0.4)
    assert merged["c"].score == pytest.approx(0.7 * 0.5)
    assert merged["b"].keyword_hit and merged["b"].vector_hit
    assert not merged["c"].keyword_hit
    order = [c.chunk_id for c in merge_hybrid(keyword, vector, vector_weight=0.7, text_weight=0.3)]
    assert order == ["b", "c", "a"]


def test_a_near_empty_chunk_keeps_only_part_of_its_similarity():
    short = _c("m", "Caroline and Melanie are friends.", vector_score=0.5)
    evidence = _c("e", FULL, text_score=0.3, vector_score=0.25)
    merged = {c.chunk_id: c for c in merge_hybrid([evidence], [short, evidence], vector_weight=0.7, text_weight=0.3)}
    assert merged["m"].brevity == pytest.approx(5 / 20)
    assert merged["m"].score == pytest.approx(0.7 * 0.5 * 5 / 20)
    assert merged["e"].score > merged["m"].score  # without brevity: 0.265 < 0.35


def test_decay_halves_at_the_half_life_and_ignores_the_future():
    assert decay_multiplier(30, 30) == pytest.approx(0.5)
    assert decay_multiplier(60, 30) == pytest.approx(0.25)
    assert decay_multiplier(-5, 30) == 1.0
    assert decay_multiplier(math.nan, 30) == 1.0
    assert decay_multiplier(10, 0) == 1.0


def test_dated_file_names_and_evergreen_files():
    assert dated_file_timestamp("memory/2026-11-02.md") == pytest.approx(1793577600.0)
    assert dated_file_timestamp("./memory/2026-11-02.md") is not None
    assert dated_file_timestamp("memory/2026-02-30.md") is None  # not a calendar date
    assert dated_file_timestamp("notes/2026-11-02.md") is None
    assert is_evergreen("MEMORY.md", "memory")
    assert is_evergreen("memory/projects/travel.md", "memory")
    assert not is_evergreen("memory/2026-11-02.md", "memory")
    assert not is_evergreen("memory/2026-02-30.md", "memory")  # dated pattern: falls back to mtime
    assert not is_evergreen("sessions/a.jsonl", "sessions")


def test_mmr_demotes_near_duplicates():
    items = [
        _c("a", "postgres ledger migration plan", score=1.0),
        _c("b", "postgres ledger migration plan", score=0.95),
        _c("c", "lisbon hotel shortlist december", score=0.9),
    ]
    order = [c.chunk_id for c in mmr_rerank(items, 0.5)]
    assert order == ["a", "c", "b"]
    assert items[1].mmr_penalty > 0


def test_mmr_stops_choosing_once_enough_items_pass_the_threshold():
    import random

    rng = random.Random(3)
    words = "ledger postgres lisbon hotel sprint retro coffee kafka budget invoice".split()

    def pool():
        return [_c(str(i), " ".join(rng.sample(words, 4)), score=rng.random()) for i in range(40)]

    for _ in range(20):
        items = pool()
        full = [c.chunk_id for c in mmr_rerank([_c(c.chunk_id, c.text, score=c.score) for c in items], 0.7)]
        cut = mmr_rerank(items, 0.7, limit=6, min_score=0.3)
        passing = [c.chunk_id for c in cut if c.score >= 0.3][:6]
        # The same six hits a search returns, in the same order, as a full rerank gives.
        assert passing == [cid for cid in full if items[int(cid)].score >= 0.3][:6]
        assert sorted(c.chunk_id for c in cut) == sorted(full)  # nothing lost


def test_mmr_with_lambda_one_is_plain_score_order():
    items = [_c("a", "x", score=0.2), _c("b", "x", score=0.9), _c("c", "y", score=0.5)]
    assert [c.chunk_id for c in mmr_rerank(items, 1.0)] == ["b", "c", "a"]


def test_mmr_tokens_include_cjk_unigrams_and_bigrams():
    toks = mmr_tokens("Data 数据库 ok")
    assert {"data", "ok", "数", "据", "库", "数据", "据库"} <= toks
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset({"a"}), frozenset()) == 0.0
    assert jaccard(frozenset({"a", "b"}), frozenset({"b", "c"})) == pytest.approx(1 / 3)


def test_pieces_of_a_line_already_shown_are_dropped():
    def piece(cid, path, start, end, score):
        return Candidate(
            chunk_id=cid, path=path, source="memory", start_line=start, end_line=end, text=f"text of {cid}",
            score=score,
        )

    ranked = [
        piece("a1", "memory/a.md", 7, 7, 0.9),  # the best piece of long line 7
        piece("b", "memory/b.md", 7, 7, 0.8),  # the same line number in another file
        piece("a2", "memory/a.md", 7, 7, 0.7),  # another piece of line 7: nothing new to show
        piece("a3", "memory/a.md", 6, 8, 0.6),  # shows lines 6 and 8 too: kept
        piece("a4", "memory/a.md", 8, 8, 0.5),  # line 8 is shown by a3 already
    ]
    assert [c.chunk_id for c in drop_repeated_lines(ranked)] == ["a1", "b", "a3"]


def test_copies_of_a_chunk_on_the_same_day_are_one_hit_cited_by_the_shortest_path():
    def hit(cid, path, text, score, day=None):
        return Candidate(chunk_id=cid, path=path, source="memory", start_line=1, end_line=2, text=text, score=score,
                         day=day)

    ranked = [
        hit("copy", "memory/2026-11-02 (conflicted copy).md", "# 2026-11-02\n- ferry", 0.9, "2026-11-02"),
        hit("note", "memory/2026-11-02.md", "# 2026-11-02\n-  ferry ", 0.8, "2026-11-02"),  # spacing aside, the same
        hit("other-day", "memory/2026-11-09.md", "# 2026-11-02\n- ferry", 0.7, "2026-11-09"),
        hit("edited", "memory/2026-11-02.sync-conflict-1.md", "# 2026-11-02\n- ferry, cabin 12", 0.6, "2026-11-02"),
        hit("twice", "memory/2026-11-02.sync-conflict-2.md", "# 2026-11-02\n- ferry", 0.5, "2026-11-02"),
        Candidate(chunk_id="repeated", path="memory/2026-11-02.md", source="memory", start_line=9, end_line=10,
                  text="# 2026-11-02\n- ferry", score=0.4, day="2026-11-02"),  # said again in the same file: kept
    ]
    kept = drop_repeated_lines(ranked)
    assert [(c.chunk_id, c.score) for c in kept] == [("note", 0.9), ("other-day", 0.7), ("edited", 0.6),
                                                     ("repeated", 0.4)]


def test_keyword_scores_are_relative_to_the_best_rank_expansions_add_a_little_and_the_cut_keeps_the_extras():
    from memsift.engine.search.expansion import EXPANSION_WEIGHT, keyword_scores

    rows = [("a", -10.0), ("b", -5.0), ("c", -1.0), ("v", -0.5)]  # "v" only because the vector side found it
    every = keyword_scores(rows, [("b", -4.0), ("x", -2.0)])
    scores = {k: (s, r) for k, s, r in every}
    assert [k for k, _s, _r in every] == ["a", "b", "c", "v", "x"]  # the order found, expansions' own finds last
    assert scores["b"][0] == pytest.approx(bm25_relative_scores([-10.0, -5.0, -1.0, -0.5])[1] + EXPANSION_WEIGHT * 0.8)
    assert scores["x"] == (pytest.approx(EXPANSION_WEIGHT * bm25_relative_scores([-4.0, -2.0])[1]), None)
    cut = keyword_scores(rows, [("b", -4.0), ("x", -2.0)], limit=2, extra=["v"])
    assert [k for k, _s, _r in cut] == ["a", "b", "v"]  # the best two, then the vector side's find
    assert keyword_scores([], []) == [] and keyword_scores([], [], limit=3) == []
    assert all(s <= 1.0 for _k, s, _r in keyword_scores([("a", -9.0)], [("a", -9.0)]))  # capped at 1
