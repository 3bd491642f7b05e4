"""A large agent's keyword search ranks its rare terms only, as builtin's does (a common word's
postings are most of the work and a fraction of the score): checked on a real server with the
size thresholds lowered to this workspace's, so the plan that runs at 200,000 chunks runs here."""

from __future__ import annotations

import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.postgres import PostgresSearchManager, search  # noqa: E402
from memsift.engine.search.terms import QueryItems  # noqa: E402


def test_the_plan_keeps_rare_terms_and_phrases_of_rare_words_else_caps_the_common_ones():
    items = QueryItems(["ledger", "the", "team"], [("ledger", "service"), ("the", "team")])
    df = {"ledger": 40, "the": 90_000, "team": 30_000, "service": 800}
    assert search.large_index_items(items, df) == (QueryItems(["ledger"], [("ledger", "service")]), None)
    common = QueryItems(["the", "team"], [("the", "team")])
    assert search.large_index_items(common, df) == (QueryItems(["the", "team"], []), search.COMMON_RANK_ROWS_MAX)


def test_a_large_agent_ranks_only_the_rare_terms_and_still_answers_common_ones(tmp_path, pg_dsn, monkeypatch):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(30):  # "note" and "daily" in every file; "zeppelin" in one
        extra = " the zeppelin museum in Friedrichshafen" if i == 7 else ""
        (ws / "memory" / f"2026-10-{i + 1:02d}.md").write_text(f"- daily note {i}{extra}\n")
    settings = make_settings(
        tmp_path, ws, {"provider": "none"}, memory={"backend": "postgres", "postgres": {"dsn": pg_dsn}}
    )
    manager = PostgresSearchManager(settings)

    async def go():
        try:
            await manager.sync()
            before = await manager.search("daily note zeppelin", mode="keyword", min_score=0)
            assert len(before.results) > 1  # the common words match every file
            monkeypatch.setattr(search, "LARGE_INDEX_CHUNKS", 10)
            monkeypatch.setattr(search, "COMMON_MATCHES", 5)
            monkeypatch.setattr(search, "COMMON_RANK_ROWS_MAX", 4)
            large = await manager.search("daily note zeppelin", mode="keyword", min_score=0)
            assert [h.path for h in large.results] == ["memory/2026-10-08.md"]  # only the rare word's chunk was ranked
            assert large.results[0].path == before.results[0].path  # and it was the top hit before as well
            common = await manager.search("daily note", mode="keyword", min_score=0, max_results=10)
            # The common words alone: each ranked over at most 4 of its postings (both are in the same
            # chunks, so the same 4).
            assert 1 <= len(common.results) <= 4
        finally:
            await manager.aclose()

    anyio.run(go)


def test_the_bm25_statistics_kept_by_the_sync_match_a_count_after_edits_deletes_and_a_rebuild(tmp_path, pg_dsn):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(6):
        (ws / "memory" / f"2026-10-{i + 1:02d}.md").write_text(f"# Day {i}\n\n- note {i} about the ledger\n")
    settings = make_settings(
        tmp_path, ws, {"provider": "none"}, memory={"backend": "postgres", "postgres": {"dsn": pg_dsn}}
    )
    manager = PostgresSearchManager(settings)

    async def kept_and_counted() -> tuple[tuple, tuple]:
        async with (await manager._pool("read")).connection() as conn:
            gen = (await (await conn.execute("SELECT generation FROM memsift_agents WHERE agent_id = %s",
                                             (settings.agent_id,))).fetchone())[0]
            kept = await (
                await conn.execute(
                    "SELECT chunks, total_len FROM memsift_stats WHERE agent_id = %s AND generation = %s",
                    (settings.agent_id, gen),
                )
            ).fetchone()
            counted = await (await conn.execute("SELECT count(*), sum(doc_len) FROM memsift_chunks WHERE agent_id = %s "
                                                "AND generation = %s", (settings.agent_id, gen))).fetchone()
            others = await (
                await conn.execute(
                    "SELECT count(*) FROM memsift_stats WHERE agent_id = %s AND generation <> %s",
                    (settings.agent_id, gen),
                )
            ).fetchone()
            assert others == (0,)  # a replaced generation's statistics go with its rows
            return tuple(kept), tuple(counted)

    async def go():
        try:
            await manager.sync()
            first, counted = await kept_and_counted()
            assert first == counted and first[0] == 6
            (ws / "memory" / "2026-10-02.md").write_text(
                "# Day 1\n\n- a much longer note about the ledger and its many accounts\n\n"
                "## More\n\n- and a second section\n"
            )
            (ws / "memory" / "2026-10-03.md").unlink()
            (ws / "memory" / "2026-10-09.md").write_text("- a new day\n")
            await manager.sync()
            kept, counted = await kept_and_counted()
            assert kept == counted and kept != first
            await manager.sync(force=True)
            assert await kept_and_counted() == (counted, counted)
        finally:
            await manager.aclose()

    anyio.run(go)
