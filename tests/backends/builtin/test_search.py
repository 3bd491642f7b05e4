from __future__ import annotations

from datetime import datetime, timezone

import anyio
import pytest

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.text import utf16_len


def run(coro_fn, *args, **kw):
    return anyio.run(lambda: coro_fn(*args, **kw))


@pytest.fixture
def manager(tmp_path, example_workspace, local_provider):
    m = BuiltinSearchManager(make_settings(tmp_path, example_workspace), provider=local_provider)
    yield m
    m._close_reader()


@pytest.mark.parametrize(
    "query,expected_path",
    [
        ("which database did we pick for the ledger service?", "MEMORY.md"),
        ("what is my sister allergic to?", "MEMORY.md"),
        ("why did the nightly export job fail?", "memory/2026-11-05.md"),
        ("hotel shortlist for the trip to Portugal", "memory/projects/travel.md"),
        ("how fast is the ledger write path", "memory/2026-11-18.md"),
        ("certificate rotation for the API gateway", "memory/2026-11-12.md"),
    ],
)
def test_hybrid_search_finds_the_right_note(manager, query, expected_path):
    answer = run(manager.search, query)
    assert answer.mode == "hybrid" and answer.provider == "local" and answer.model == "all-MiniLM-L6-v2"
    assert answer.results, f"no hits for {query!r}"
    assert answer.results[0].path == expected_path


def test_exact_identifier_is_the_top_hit(manager):
    for query, path in [("a828e60", "memory/2026-11-02.md"), ("ECONNRESET", "memory/2026-11-05.md")]:
        answer = run(manager.search, query, explain=True)
        assert answer.results[0].path == path
        assert answer.results[0].explain.keyword_score > 0.3


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
@pytest.mark.parametrize("query", ["数据", "会议", "陈伟"])
def test_short_cjk_terms_find_their_note(tmp_path, example_workspace, local_provider, tokenizer, query):
    settings = make_settings(tmp_path, example_workspace, {"store": {"fts": {"tokenizer": tokenizer}}})
    m = BuiltinSearchManager(settings, provider=local_provider)
    answer = run(m.search, query, explain=True)
    assert answer.results[0].path in ("memory/2026-11-12.md", "MEMORY.md")
    assert any(h.path == "memory/2026-11-12.md" and h.explain.keyword_score for h in answer.results)
    m._close_reader()


def test_hits_carry_lines_snippets_and_citations(manager, example_workspace):
    answer = run(manager.search, "Lisbon hotels budget per night", max_results=3)
    assert 1 <= len(answer.results) <= 3
    hit = answer.results[0]
    lines = (example_workspace / hit.path).read_text().split("\n")
    assert hit.snippet == "\n".join(lines[hit.start_line - 1 : hit.end_line])
    assert hit.citation == f"{hit.path}#L{hit.start_line}-L{hit.end_line}"
    assert answer.citations == "auto"
    group = run(manager.search, "Lisbon hotels", session_key="agent:main:discord:group:123")
    assert all(h.citation is None for h in group.results)  # auto: no citations in group chats


def test_explain_adds_up(manager):
    answer = run(manager.search, "PostgreSQL ledger decision", explain=True, min_score=0)
    for hit in answer.results:
        e = hit.explain
        expected = (e.vector_weight * (e.vector_score or 0) + e.text_weight * (e.keyword_score or 0)) * e.decay
        assert e.final_score == pytest.approx(expected, abs=1e-6)
        assert hit.score == e.final_score  # the same value, so both print alike at any precision


def test_min_score_and_max_results_are_respected(manager):
    answer = run(manager.search, "ledger", max_results=2, min_score=0)
    assert len(answer.results) == 2
    strict = run(manager.search, "ledger", min_score=0.99)
    assert all(h.explain is None for h in strict.results)
    assert all(h.score >= 0.99 or h.path for h in strict.results)
    assert [h.score for h in answer.results] == sorted((h.score for h in answer.results), reverse=True)


def test_empty_and_whitespace_queries(manager):
    for q in ("", "   ", "\n\t"):
        answer = run(manager.search, q)
        assert answer.results == [] and answer.mode == "none"


def test_long_chunk_snippet_is_bounded_and_centred(tmp_path, local_provider):
    ws = tmp_path / "w"
    (ws / "memory").mkdir(parents=True)
    body = [f"- filler line {i} about nothing in particular, just padding text" for i in range(60)]
    body[35] = "- the quarterly OKR review moved to Thursday"
    (ws / "MEMORY.md").write_text("\n".join(body))
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=local_provider)
    answer = run(m.search, "quarterly OKR review")
    hit = answer.results[0]
    assert utf16_len(hit.snippet) <= 700 and "quarterly OKR review" in hit.snippet
    assert hit.start_line <= 36 <= hit.end_line
    m._close_reader()


def test_temporal_decay_prefers_recent_notes_but_not_evergreen(tmp_path):
    ws = tmp_path / "w"
    (ws / "memory").mkdir(parents=True)
    text = "- standup: the deploy pipeline is green again\n"
    (ws / "memory" / "2026-01-01.md").write_text(text)
    (ws / "memory" / "2026-11-01.md").write_text(text)
    (ws / "MEMORY.md").write_text(text)
    now = datetime(2026, 11, 2, tzinfo=timezone.utc).timestamp()
    # The reference's formula (bounded decay: tests/backends/builtin/test_time_search.py).
    settings = make_settings(
        tmp_path, ws, {"query": {"hybrid": {"temporalDecay": {"enabled": True, "formula": "reference"}}}}
    )
    m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    answer = run(m.search, "deploy pipeline green", min_score=0, explain=True, now=now)
    by_path = {h.path: h for h in answer.results}
    assert by_path["MEMORY.md"].explain.decay == 1.0
    assert by_path["memory/2026-11-01.md"].explain.decay == pytest.approx(0.5 ** (1 / 30), rel=1e-3)
    assert by_path["memory/2026-01-01.md"].explain.decay < 0.01
    assert [h.path for h in answer.results][-1] == "memory/2026-01-01.md"
    m._close_reader()


def test_mmr_spreads_near_duplicates(tmp_path):
    ws = tmp_path / "w"
    (ws / "memory").mkdir(parents=True)
    dup = "- ledger migration plan: move entries table, defer constraints"
    for i in range(3):
        (ws / "memory" / f"dup{i}.md").write_text(dup + f" copy {i}\n")
    (ws / "memory" / "other.md").write_text("- ledger sharding by merchant id needs a design doc\n")
    settings = make_settings(tmp_path, ws, {"query": {"hybrid": {"mmr": {"enabled": True, "lambda": 0.3}}}})
    m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    answer = run(m.search, "ledger migration plan", min_score=0, max_results=4, explain=True)
    paths = [h.path for h in answer.results]
    assert paths.index("memory/other.md") == 1  # promoted above the near-duplicates
    assert any(h.explain.mmr_penalty > 0 for h in answer.results)
    m._close_reader()


def test_vector_search_without_sqlite_vec_uses_the_bounded_scan(tmp_path, example_workspace, local_provider):
    with_vec = BuiltinSearchManager(make_settings(tmp_path / "a", example_workspace), provider=local_provider)
    without = BuiltinSearchManager(
        make_settings(tmp_path / "b", example_workspace, {"store": {"vector": {"enabled": False}}}),
        provider=local_provider,
    )
    q = "what does the user drink in the afternoon"
    a = run(with_vec.search, q, min_score=0, explain=True)
    b = run(without.search, q, min_score=0, explain=True)
    assert [h.path for h in a.results] == [h.path for h in b.results]
    for x, y in zip(a.results, b.results):
        assert x.explain.vector_score == pytest.approx(y.explain.vector_score, abs=1e-4)
    assert "in-process scan" in b.degraded.vector
    st = run(without.status)
    assert st.vector["search"] == "numpy-scan" and not st.vector["available"]
    with_vec._close_reader()
    without._close_reader()


def test_vector_only_when_hybrid_is_off(tmp_path, example_workspace, local_provider):
    settings = make_settings(tmp_path, example_workspace, {"query": {"hybrid": {"enabled": False}}})
    m = BuiltinSearchManager(settings, provider=local_provider)
    answer = run(m.search, "peanut allergy", min_score=0, explain=True)
    assert answer.mode == "vector-only" and all(h.explain.keyword_score is None for h in answer.results)
    m._close_reader()


def test_search_reads_its_own_writes(tmp_path, example_workspace, local_provider):
    m = BuiltinSearchManager(make_settings(tmp_path, example_workspace), provider=local_provider)
    run(m.search, "anything")
    note = example_workspace / "memory" / "2026-11-21.md"
    note.write_text("- decided to adopt Renovate for dependency updates\n")
    m.mark_dirty()  # what the watcher (or a new CLI process) does
    answer = run(m.search, "Renovate dependency updates")
    assert answer.results[0].path == "memory/2026-11-21.md"
    m._close_reader()


def test_status_reports_counts_and_deep_probe(manager):
    run(manager.sync)
    st = run(manager.status, deep=True)
    assert st.backend == "builtin" and st.files == 6 and st.chunks >= 6
    assert st.provider == "local" and st.dimensions == 384 and st.search_mode == "hybrid"
    assert st.vector["available"] and st.vector["rows"] == st.chunks
    assert st.fts["available"] and st.cache["entries"] >= st.chunks
    assert st.dirty is False
    assert st.deep["embedding"]["ok"] and st.deep["embedding"]["dimensions"] == 384
    assert st.deep["integrity"] == "ok"



def test_words_in_half_the_chunks_leave_a_large_query_with_the_same_top_hits(tmp_path, monkeypatch):
    from memsift.backends.builtin import search as search_mod
    from memsift.backends.builtin.store import open_db
    from memsift.engine.search.fts_query import plan_query

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(60):
        extra = " Kafka consumer lag alert." if i % 20 == 0 else ""
        (ws / "memory" / f"2026-01-{i:02d}.md").write_text(f"- 09:00 Standup number {i} about the ledger.{extra}\n")
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider())
    run(m.sync)
    conn, _ = open_db(m.db_path, readonly=True)
    plan = plan_query("standup kafka lag")

    monkeypatch.setattr(search_mod, "COMMON_TERM_MIN_CHUNKS", 10**9)  # never: the plain query
    plain, plain_ranks = search_mod.keyword_candidates(conn, plan, 5)
    monkeypatch.setattr(search_mod, "COMMON_TERM_MIN_CHUNKS", 10)
    total = search_mod.row_estimate(conn)
    assert '"standup"' not in search_mod._without_weightless_terms(conn, plan, total)  # in all 60 chunks
    assert '"kafka"' in search_mod._without_weightless_terms(conn, plan, total)
    lean, lean_ranks = search_mod.keyword_candidates(conn, plan, 5)
    top = [c.path for c in plain if plain_ranks[c.chunk_id] < -1e-3]  # the hits with real evidence
    assert top and [c.path for c in lean][: len(top)] == top
    # A query of nothing but common words keeps them (they are all it has).
    assert (
        search_mod._without_weightless_terms(conn, plan_query("standup ledger"), total)
        == plan_query("standup ledger").match
    )
    conn.close()
    m._close_reader()


def test_a_unique_token_in_a_long_daily_log_is_found_even_with_three_results(
    tmp_path, example_workspace, local_provider
):
    # 600 near-identical lines: ~40 chunks score ~0.5 cosine for any token. A keyword hit the
    # vector side did not return used to count its vector score as 0 and lost to all of them.
    tokens = [f"soaktoken{n:05d}x{(n * 7919) % 10**6:06d}" for n in range(600)]
    log = example_workspace / "memory" / "2026-11-22.md"
    log.write_text(
        "# 2026-11-22\n\n" + "".join(f"- 21:{n % 60:02d} remember {t} for the soak run\n" for n, t in enumerate(tokens))
    )
    m = BuiltinSearchManager(make_settings(tmp_path, example_workspace), provider=local_provider)
    # The whole index first, vectors included: a first search waits only 10 s for them, which a loaded
    # machine's ~45 chunks of this log can take (the search then answers by keyword and says so).
    run(m.sync)
    for t in tokens[::10]:
        answer = run(m.search, t, max_results=3, min_score=0.0, explain=True)
        assert answer.degraded.vector is None, answer.degraded.vector  # the vector side answered, or this says why
        top = answer.results[0]
        assert t in top.snippet, (t, [h.snippet[:60] for h in answer.results])
        # Both sides scored it: its real cosine, not 0, and its BM25.
        assert top.explain.vector_score is not None and top.explain.vector_score > 0.2
        assert top.explain.keyword_score is not None
    m._close_reader()


def test_chunks_the_vector_side_found_get_their_bm25_beyond_the_keyword_pool(tmp_path, example_workspace):
    from memsift.backends.builtin.search import keyword_candidates
    from memsift.backends.builtin.store import open_db
    from memsift.engine.search.fts_query import plan_query

    m = BuiltinSearchManager(make_settings(tmp_path, example_workspace), provider=FakeEmbeddingProvider())
    run(m.sync)
    conn, _ = open_db(m.db_path, readonly=True)
    plan = plan_query("ledger postgres")
    everything, ranks = keyword_candidates(conn, plan, 50)
    assert len(everything) >= 3
    top, _ = keyword_candidates(conn, plan, 1)
    third = everything[2]
    unrelated = conn.execute(
        "SELECT id FROM chunks WHERE text NOT LIKE '%ledger%' AND text NOT LIKE '%postgres%' LIMIT 1"
    ).fetchone()[0]
    with_also, also_ranks = keyword_candidates(conn, plan, 1, also=[third.chunk_id, unrelated])
    assert [c.chunk_id for c in with_also] == [top[0].chunk_id, third.chunk_id]  # the non-match is not invented
    assert also_ranks[third.chunk_id] == pytest.approx(ranks[third.chunk_id])
    assert with_also[1].text_score == pytest.approx(third.text_score)  # scaled by the same best hit
    conn.close()
    m._close_reader()
