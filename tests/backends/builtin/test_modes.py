"""Search modes chosen by config or per search, scripts a model does not cover, trigram CJK terms."""

from __future__ import annotations

import anyio
import pytest

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.compose.factory import open_manager


def run(coro_fn, *args, **kw):
    return anyio.run(lambda: coro_fn(*args, **kw))


@pytest.fixture
def fake_manager(tmp_path, example_workspace):
    provider = FakeEmbeddingProvider()
    m = BuiltinSearchManager(make_settings(tmp_path, example_workspace), provider=provider)
    run(m.sync)
    yield m, provider
    m._close_reader()


def test_provider_none_is_keyword_search_by_choice(tmp_path, example_workspace):
    manager = open_manager(make_settings(tmp_path, example_workspace, {"provider": "none"}))

    async def go():
        try:
            report = await manager.sync()
            answer = await manager.search("Lisbon hotels", explain=True)
            status = await manager.status()
            return report, answer, status
        finally:
            await manager.aclose()

    report, answer, status = anyio.run(go)
    assert report.chunks_embedded == 0
    assert answer.mode == "fts-only" and answer.provider == "none"
    assert answer.degraded.vector is None  # a choice, not an outage
    assert answer.results[0].path == "memory/projects/travel.md"
    assert answer.results[0].explain.vector_score is None
    assert status.search_mode == "fts-only" and status.provider == "none"


def test_keyword_mode_per_search_embeds_no_query(fake_manager):
    m, provider = fake_manager
    calls = len(provider.calls)
    answer = run(m.search, "Lisbon hotels", mode="keyword", explain=True)
    assert len(provider.calls) == calls  # no query vector was computed
    assert answer.mode == "fts-only" and answer.degraded.vector is None
    assert all(h.explain.vector_score is None for h in answer.results)
    assert answer.results[0].path == "memory/projects/travel.md"


def test_vector_and_hybrid_modes_per_search(tmp_path, example_workspace):
    settings = make_settings(tmp_path, example_workspace, {"query": {"hybrid": {"enabled": False}}})
    m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    try:
        assert run(m.search, "Lisbon hotels").mode == "vector-only"  # as configured
        vector = run(m.search, "Lisbon hotels", mode="vector", explain=True)
        assert vector.mode == "vector-only" and all(h.explain.keyword_score is None for h in vector.results)
        hybrid = run(m.search, "Lisbon hotels", mode="hybrid", explain=True)
        assert hybrid.mode == "hybrid"  # per search, although the config turned hybrid off
        assert any(h.explain.keyword_score for h in hybrid.results)
    finally:
        m._close_reader()


def test_vector_mode_without_a_provider_says_why(tmp_path, example_workspace):
    manager = open_manager(make_settings(tmp_path, example_workspace, {"provider": "none"}))
    try:
        answer = run(manager.search, "Lisbon hotels", mode="vector")
    finally:
        run(manager.aclose)
    assert answer.results == [] and answer.mode == "none"


def test_unknown_mode_is_a_clear_error(fake_manager):
    m, _ = fake_manager
    with pytest.raises(ValueError, match="unknown search mode 'fuzzy'"):
        run(m.search, "x", mode="fuzzy")


def test_a_query_in_a_script_the_model_does_not_cover_is_searched_by_keyword(tmp_path, example_workspace):
    english = FakeEmbeddingProvider(scripts=frozenset({"Latin"}))
    m = BuiltinSearchManager(make_settings(tmp_path, example_workspace), provider=english)
    try:
        run(m.sync)
        calls = len(english.calls)
        answer = run(m.search, "数据管道的延迟", explain=True)
        assert len(english.calls) == calls  # the query was not embedded
        assert answer.mode == "fts-only"
        assert "Chinese characters (Han)" in answer.degraded.vector and "does not cover" in answer.degraded.vector
        assert answer.results[0].path == "memory/2026-11-12.md"
        mixed = run(m.search, "ledger migration 会议")  # half Latin: both sides still run
        assert mixed.mode == "hybrid" and mixed.degraded.vector is None
    finally:
        m._close_reader()
    multilingual = BuiltinSearchManager(
        make_settings(tmp_path / "b", example_workspace), provider=FakeEmbeddingProvider()
    )
    try:
        assert run(multilingual.search, "数据管道的延迟").mode == "hybrid"
    finally:
        multilingual._close_reader()


def test_the_local_model_declares_english_only(local_provider):
    assert local_provider.scripts == frozenset({"Latin"})


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_a_two_character_name_inside_a_cjk_question_is_searched(tmp_path, tokenizer):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "people.md").write_text("# 人物\n\n西晋书法家索靖的草书最好。\n", encoding="utf-8")
    (ws / "memory" / "other.md").write_text("# 其他\n\n今天天气很好，我们去公园散步。\n", encoding="utf-8")
    (ws / "memory" / "go.md").write_text("# Languages\n\nWe write the sync service in Go.\n", encoding="utf-8")
    settings = make_settings(tmp_path, ws, {"provider": "none", "store": {"fts": {"tokenizer": tokenizer}}})
    m = BuiltinSearchManager(settings)
    try:
        answer = run(m.search, "索靖擅长什么？", explain=True, min_score=0)
        assert answer.results and answer.results[0].path == "memory/people.md"
        assert answer.results[0].explain.keyword_score > 0  # matched through the index, not a scan
        go = run(m.search, "Go", explain=True, min_score=0)  # a 2-letter word, under a trigram index too
        assert go.results and go.results[0].path == "memory/go.md" and go.results[0].explain.keyword_score > 0
    finally:
        m._close_reader()
