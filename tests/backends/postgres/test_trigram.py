"""`store.fts.tokenizer: "trigram"` on Postgres, as on builtin: the same keyword hits and BM25 ranks
on the example workspace (substrings, identifiers, 2-character CJK names), through the same
indexed text; and switching tokenizer rebuilds the agent's rows."""

from __future__ import annotations

import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings

pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.builtin import BuiltinSearchManager  # noqa: E402
from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402

TRIGRAM = {"store": {"fts": {"tokenizer": "trigram"}}, "sync": {"onSearch": False}}
QUERIES = [
    "数据",
    "会议",
    "陈伟",
    "陈伟开会",
    "Idempotency",
    "idempot",
    "ledger PostgreSQL",
    "a828e60",
    "rotat",
    "dempot",
    "which database did we pick for the ledger?",
    "Lisbon hotels",
    "Grafana dashboards",
    "ab",
    "memorySearch.query.hybrid",
]


def _settings(tmp_path, ws, dsn, ms):
    return make_settings(tmp_path, ws, ms, memory={"backend": "postgres", "postgres": {"dsn": dsn}})


def _keyword(answer):
    return [
        (h.path, h.start_line, h.end_line, round(h.explain.bm25_rank, 6) if h.explain.bm25_rank is not None else None)
        for h in answer.results
    ]


def test_trigram_keyword_search_matches_builtin(tmp_path, example_workspace, pg_dsn):
    settings = _settings(tmp_path, example_workspace, pg_dsn, TRIGRAM)

    async def run() -> None:
        async with (
            BuiltinSearchManager(settings, provider=None) as b,
            PostgresSearchManager(settings, provider=None) as p,
        ):
            await b.sync()
            await p.sync()
            assert (await p.status()).fts["tokenizer"] == "trigram"
            found = 0
            for q in QUERIES:
                want = await b.search(q, mode="keyword", max_results=10, min_score=0, explain=True)
                got = await p.search(q, mode="keyword", max_results=10, min_score=0, explain=True)
                assert _keyword(got) == _keyword(want), q
                found += bool(got.results)
            assert found >= len(QUERIES) - 2  # substrings are found, not only whole words
            pair = await p.search("陈伟", mode="keyword", min_score=0, explain=True)
            assert any(h.path == "memory/2026-11-12.md" and h.explain.keyword_score > 0 for h in pair.results)

    anyio.run(run)


def test_changing_the_tokenizer_rebuilds_the_agents_rows(tmp_path, example_workspace, pg_dsn):
    provider = FakeEmbeddingProvider()

    async def run() -> None:
        async with PostgresSearchManager(_settings(tmp_path, example_workspace, pg_dsn, {"sync": {"onSearch": False}}),
                                         provider=provider) as p:
            await p.sync()
            assert not (
                await p.search("dempot", mode="keyword", min_score=0)
            ).results  # unicode61: words and their stems only
        async with PostgresSearchManager(
            _settings(tmp_path, example_workspace, pg_dsn, TRIGRAM), provider=provider
        ) as p:
            stale = await p.search("dempot", mode="keyword", min_score=0)
            assert not stale.results  # a search never rebuilds: it says so
            report = await p.sync()
            assert report.full_reindex and "tokenizer" in (report.reindex_cause or "")
            assert "memory/2026-11-02.md" in [
                h.path for h in (await p.search("dempot", mode="keyword", min_score=0)).results
            ]

    anyio.run(run)
