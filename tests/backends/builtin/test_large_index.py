"""Keyword search on a large index (backends/builtin/search.py, `_large_index_match`): only the
query's rare terms are ranked, a query of common words only still answers from its newest
matches, and a small index is searched as before. The thresholds are lowered so a few hundred
notes stand in for a million chunks."""

from __future__ import annotations

import anyio
import pytest

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin import search as search_module
from memsift.engine.embeddings import ProviderSelection
from memsift.engine.search.fts_query import plan_query


@pytest.fixture
def keyword_manager(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The team keeps notes here.\n")
    for i in range(300):
        rare = " The quokka census closed." if i in (17, 230) else ""
        (ws / "memory" / f"2026-01-{i:03d}.md").write_text(
            f"# Day {i}\n\n- Reviewed the ledger service deploy again.{rare}\n"
        )
    m = BuiltinSearchManager(make_settings(tmp_path, ws),
                             selection=ProviderSelection(None, "none", unavailable_reason="test: keyword only"))
    yield m
    m._close_reader()


def _search(m, query):
    return anyio.run(lambda: m.search(query, mode="keyword", max_results=5, min_score=0))


def test_a_large_index_ranks_the_rare_terms_and_bounds_common_only_queries(keyword_manager, monkeypatch):
    m = keyword_manager
    before = [h.path for h in _search(m, "ledger quokka").results]
    monkeypatch.setattr(search_module, "LARGE_INDEX_CHUNKS", 100)
    monkeypatch.setattr(search_module, "COMMON_MATCHES", 50)
    monkeypatch.setattr(search_module, "COMMON_RANK_ROWS_MAX", 40)
    conn = m._reader()

    match, bound = search_module._large_index_match(conn, plan_query('ledger "quokka census"'))
    assert (
        "ledger" not in match and '"quokka"' in match and '"census"' in match and bound == search_module.RANK_ROWS_MAX
    )
    assert '"quokka census"' in match and '"ledger quokka census"' not in match  # phrases: of rare words only

    hits = [h.path for h in _search(m, "ledger quokka").results]
    assert set(hits[:2]) == set(before[:2]) == {"memory/2026-01-017.md", "memory/2026-01-230.md"}

    conn = m._reader()  # a search of a manager kept open syncs first, and a sync closes the reader
    match, bound = search_module._large_index_match(conn, plan_query("reviewed the ledger service"))
    assert bound == 40 and '"ledger service"' not in match  # common words only: single words, bounded
    common = _search(m, "reviewed the ledger service").results
    assert common and all(h.path.startswith("memory/") for h in common)
