"""A search whose sync waits on another process's write lock answers from the index as it is and
then exits at once: the sync it began is cancelled cleanly (no thread left behind, no chunk stored
without its vector), and the next sync indexes the change properly."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import apsw

from figures import FIGURES
from helpers import EXAMPLE_WORKSPACE, make_settings
from memory_guard import assert_untouched, snapshot
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider


class _HeldLock:
    """Another process's writer: holds `<db>.lock` (flock is per open file, so this counts)."""

    def __init__(self, db: Path) -> None:
        self.fd = os.open(f"{db}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _null_vectors(db: Path) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NULL").fetchone()[0]
    finally:
        conn.close()


def _indexed(db: Path, path: str) -> bool:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM files WHERE path=?", (path,)).fetchone()[0] == 1
    finally:
        conn.close()


def test_a_search_behind_a_held_lock_closes_promptly_and_leaves_nothing_half_done(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    settings = make_settings(tmp_path, ws)
    provider = FakeEmbeddingProvider()
    m = BuiltinSearchManager(settings, provider=provider)
    anyio.run(m.sync)
    anyio.run(m.aclose)
    (ws / "memory" / "2026-11-21.md").write_text("- 10:00 The zeppelin hangar lease was signed.\n")
    held = _HeldLock(settings.store_path)
    try:
        m = BuiltinSearchManager(settings, provider=provider)
        m.search_sync_budget_s = 0.3
        threads = threading.active_count()

        async def go():
            answer = await m.search("Lisbon trip with Lena", min_score=0)
            assert answer.results and answer.sync_pending  # from the index as it is
            started = time.monotonic()
            await m.aclose()
            return time.monotonic() - started

        closed_in = anyio.run(go)
        assert closed_in < 5  # it used to wait for the lock (up to 600 s)
        time.sleep(0.2)
        assert threading.active_count() <= threads  # the sync's thread has ended
    finally:
        held.release()
    time.sleep(0.3)  # had a sync been left running, it would write now
    assert not _indexed(settings.store_path, "memory/2026-11-21.md") and _null_vectors(settings.store_path) == 0
    m = BuiltinSearchManager(settings, provider=provider)
    report = anyio.run(m.sync)
    anyio.run(m.aclose)
    assert report.files_indexed == 1 and _null_vectors(settings.store_path) == 0
    FIGURES["searches behind another process's write lock: closed promptly"] += 1


def test_a_cold_cli_search_exits_while_another_process_holds_the_lock(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))  # the real local model
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1"}
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws)]
    assert subprocess.run([*base, "index"], env=env, capture_output=True, timeout=300).returncode == 0
    store = Path(
        json.loads(subprocess.run([*base, "config", "show"], env=env, capture_output=True, text=True).stdout)[
            "storePath"
        ]
    )
    (ws / "memory" / "2026-11-21.md").write_text("- 10:00 The zeppelin hangar lease was signed.\n" * 40)
    notes = snapshot(ws)
    held = _HeldLock(store)
    try:
        started = time.monotonic()
        r = subprocess.run(
            [*base, "search", "Lisbon trip with Lena", "--json"], env=env, capture_output=True, text=True, timeout=60
        )
        took = time.monotonic() - started
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
        answer = json.loads(r.stdout)
        assert answer["results"] and answer["syncPending"] is True
        assert took < 30, took  # answered after the 2 s budget, then exited (it used to wait for the lock)
        FIGURES["cold CLI search behind a held write lock: seconds to exit"] = round(took, 1)
    finally:
        held.release()
    time.sleep(1)
    assert _null_vectors(store) == 0 and not _indexed(store, "memory/2026-11-21.md")
    assert subprocess.run([*base, "index"], env=env, capture_output=True, timeout=300).returncode == 0
    assert _indexed(store, "memory/2026-11-21.md") and _null_vectors(store) == 0
    assert_untouched(notes, ws)


def test_a_sync_cancelled_before_its_thread_began_leaves_nothing_to_wait_for(tmp_path):
    """`memsift mcp` whose client left at once cancelled the first sync while it waited for a worker
    thread: anyio then never runs it, but the manager still counted it as running, so its close
    waited the full stop timeout (30 s) for a sync that never began."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider())
    release = threading.Event()

    async def go():
        anyio.to_thread.current_default_thread_limiter().total_tokens = 1
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, release.wait)  # holds the only worker token
            await anyio.sleep(0.05)
            tg.start_soon(m.sync)
            while not m._running:  # registered, and now waiting for the token
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
            release.set()
        assert not m._running  # nothing left to wait for: the sync never began
        await m.aclose()
        return m.pending_files()

    assert anyio.run(go) is None
