"""Searches read the replica (`readDsn`); a search right after this process's own sync reads its writes."""

from __future__ import annotations

import time

import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402


def test_read_your_writes_through_a_lagging_replica(tmp_path, example_workspace, pg_dsn, pg_replica):
    dbname = psycopg.conninfo.conninfo_to_dict(pg_dsn)["dbname"]
    replica = f"{pg_replica} dbname={dbname}"
    deadline = time.monotonic() + 30
    while True:  # the new database reaches the replica
        try:
            psycopg.connect(replica).close()
            break
        except psycopg.OperationalError:
            assert time.monotonic() < deadline
            time.sleep(0.1)

    def settings(state):
        return make_settings(tmp_path / state, example_workspace, {"sync": {"onSearch": False}}, memory={
            "backend": "postgres", "postgres": {"dsn": pg_dsn, "readDsn": replica, "replicaWaitMs": 300}})

    async def run():
        async with PostgresSearchManager(settings("w"), provider=FakeEmbeddingProvider()) as writer, \
                PostgresSearchManager(settings("r"), provider=FakeEmbeddingProvider()) as reader:
            await writer.sync()
            assert (await writer.search("ledger database", mode="keyword")).results  # replica caught up in time
            with psycopg.connect(replica, autocommit=True) as conn:
                conn.execute("SELECT pg_wal_replay_pause()")  # the replica falls behind from here
                try:
                    (example_workspace / "memory" / "2026-11-21.md").write_text("- a kittiwake landed on the pier\n")
                    assert (await writer.sync()).files_indexed == 1
                    own = await writer.search("kittiwake pier", mode="keyword")
                    assert [h.path for h in own.results] == ["memory/2026-11-21.md"]  # read from the primary
                    other = await reader.search("kittiwake pier", mode="keyword")
                    assert other.results == []  # another process reads the paused replica: not there yet
                finally:
                    conn.execute("SELECT pg_wal_replay_resume()")
            for _ in range(100):
                if (await reader.search("kittiwake pier", mode="keyword")).results:
                    break
                await anyio.sleep(0.1)
            else:
                raise AssertionError("the replica never replayed the sync")
            status = await writer.status()
            assert status.index["postgres"]["readDsn"].startswith("host=")

    anyio.run(run)
