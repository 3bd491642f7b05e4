"""Several memsift processes writing one agent: no duplicates, no lost file; a killed writer leaves nothing
half-visible."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402

WORKER = Path(__file__).with_name("worker.py")


def _workspace(root: Path, files: int, lines: int = 30) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Long-term\n\n- the ledger runs on Postgres\n")
    for i in range(files):
        notes = [f"- note {i}.{j}: the heron {i} was seen fishing at pond {j} with {i * j} fish" for j in range(lines)]
        (ws / "memory" / f"2026-10-{i:02d}.md").write_text("\n\n".join(notes) + "\n")
    return ws


def _spawn(role: str, dsn: str, tmp: Path, ws: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), role, dsn, str(tmp / f"state-{role}"), str(ws)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _counts(dsn: str) -> dict:
    with psycopg.connect(dsn) as conn:
        gen = conn.execute("SELECT generation FROM memsift_agents WHERE agent_id = 'main'").fetchone()[0]
        q = lambda sql: conn.execute(sql, (gen,)).fetchone()  # noqa: E731
        return {
            "generations": conn.execute("SELECT count(DISTINCT generation) FROM memsift_chunks").fetchone()[0],
            "files": q("SELECT count(*) FROM memsift_files WHERE agent_id = 'main' AND generation = %s")[0],
            "chunks": q("SELECT count(*) FROM memsift_chunks WHERE agent_id = 'main' AND generation = %s")[0],
            "distinct": q(
                "SELECT count(DISTINCT (path, start_line, end_line, hash)) FROM memsift_chunks "
                "WHERE agent_id = 'main' AND generation = %s"
            )[0],
            "orphans": q(
                "SELECT count(*) FROM memsift_postings p WHERE agent_id = 'main' AND generation = %s AND NOT EXISTS "
                "(SELECT 1 FROM memsift_chunks c WHERE c.agent_id = p.agent_id AND c.generation = p.generation "
                "AND c.chunk = p.chunk)"
            )[0],
        }


def test_three_processes_index_one_agent_without_duplicates_or_lost_files(tmp_path, pg_dsn):
    ws = _workspace(tmp_path, 24)
    procs = [_spawn("sync", pg_dsn, tmp_path / str(i), ws) for i in range(3)]
    outs = [json.loads(p.communicate(timeout=240)[0].strip().splitlines()[-1]) for p in procs]
    assert all(o["ok"] for o in outs), outs
    assert sum(o["indexed"] for o in outs) == 25  # one process indexed every file; the others found them done
    counts = _counts(pg_dsn)
    assert counts["files"] == 25 and counts["chunks"] == counts["distinct"] and counts["orphans"] == 0
    assert counts["generations"] == 1


def test_a_writer_killed_mid_rebuild_leaves_the_live_index_whole(tmp_path, pg_dsn):
    ws = _workspace(tmp_path, 40, lines=60)  # over one group of chunks (GROUP_CHUNKS): the rebuild commits a part
    settings = make_settings(
        tmp_path, ws, {"sync": {"onSearch": False}}, memory={"backend": "postgres", "postgres": {"dsn": pg_dsn}}
    )

    async def first_sync():
        async with PostgresSearchManager(settings, provider=FakeEmbeddingProvider()) as m:
            await m.sync()

    anyio.run(first_sync)
    before = _counts(pg_dsn)
    proc = _spawn("slow-rebuild", pg_dsn, tmp_path, ws)
    assert json.loads(proc.stdout.readline())["started"]
    deadline = time.monotonic() + 60
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:  # kill it once part of the new generation is written
            if conn.execute("SELECT count(DISTINCT generation) FROM memsift_chunks").fetchone()[0] > 1:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the rebuild never wrote a group")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert _counts(pg_dsn)["files"] == before["files"]  # the live generation is untouched
        for _ in range(100):  # the server notices the dropped connection and frees its lock
            if not conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()[0]:
                break
            time.sleep(0.1)

    async def search_and_resync():
        async with PostgresSearchManager(settings, provider=FakeEmbeddingProvider()) as m:
            hits = (await m.search("heron fishing pond", mode="keyword")).results
            assert hits and all(h.path.startswith("memory/2026-10-") for h in hits)
            report = await m.sync()
            assert not report.full_reindex and report.files_indexed == 0  # nothing was lost: nothing to redo

    anyio.run(search_and_resync)
    after = _counts(pg_dsn)
    assert (
        after["generations"] == 1 and after["files"] == 41 and after["chunks"] == before["chunks"] == after["distinct"]
    )
