from __future__ import annotations

import pytest

from memsift.engine.search.scripts import coverage, query_scripts
from memsift.engine.search.modes import QMD_MODE_FOR, parse_search_mode


def test_units_per_script():
    assert query_scripts("Which database did we pick?") == {"Latin": 5}
    assert query_scripts("索靖擅长什么？") == {"Han": 6}
    assert query_scripts("ラーメンはどこ") == {"Kana": 7}
    assert query_scripts("Größe café naïve 2024") == {"Latin": 3}
    assert query_scripts("Что такое ledger") == {"Cyrillic": 2, "Latin": 1}
    assert query_scripts("12 + 7 = ?") == {}


@pytest.mark.parametrize(
    "query,share,mostly",
    [
        ("what is my sister allergic to?", 0.0, False),
        ("索靖擅长什么？", 1.0, True),
        ("数据管道 latency", 0.8, True),  # 4 Han units, 1 Latin word
        ("ledger migration 会议", 2 / 4, False),  # half is not "mostly"
    ],
)
def test_coverage_of_an_english_model(query, share, mostly):
    cov = coverage(query, frozenset({"Latin"}))
    assert cov.uncovered_share == pytest.approx(share)
    assert cov.mostly_uncovered is mostly


def test_a_multilingual_model_covers_everything():
    assert coverage("索靖擅长什么？", None).uncovered_share == 0.0
    assert "Chinese characters" in coverage("索靖擅长什么？", frozenset({"Latin"})).describe()


def test_search_modes_and_aliases():
    assert [parse_search_mode(v) for v in (None, "", "auto", "HYBRID", "fts", "fts-only", "bm25", "vector-only")] == [
        "auto", "auto", "auto", "hybrid", "keyword", "keyword", "keyword", "vector"]
    with pytest.raises(ValueError, match="keyword"):
        parse_search_mode("fuzzy")
    assert QMD_MODE_FOR == {"keyword": "search", "vector": "vsearch", "hybrid": "query"}
