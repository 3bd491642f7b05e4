"""Faults: provider errors and timeouts, QMD crashes and hangs, disk full during a reindex, the
database locked by another process, SIGKILL at random points of a sync. Afterwards the index
opens, answers, and matches the files after the next sync (no lost update)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import apsw
import pytest

from figures import FIGURES
from helpers import QMD_SAMPLES, make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin import indexer as indexer_mod
from memsift.backends.qmd import QmdSearchManager
from memsift.engine.config.models import MemorySearchConfig
from memsift.engine.embeddings import create_provider
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.errors import IndexUnusableError
from memsift.engine.compose.fallback import FallbackSearchManager
from provider_server import Fault, ProviderServer

TESTS = Path(__file__).resolve().parents[1]
WORKER = TESTS / "backends" / "builtin" / "worker.py"
FAKEBIN = TESTS / "backends" / "qmd" / "fakebin"
KEY = "test-key-123456789"


def _ws(tmp_path: Path, n: int = 8, lines: int = 40) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- the user drinks dark roast coffee with oat milk\n")
    for i in range(n):
        body = "\n".join(
            f"- log {i}.{j}: standup, deploy, ledger review item {j} " + "padding " * 12 for j in range(lines)
        )
        (ws / "memory" / f"2026-09-{i % 28 + 1:02d}-{i}.md").write_text(f"# {i}\n\n{body}\n")
    return ws


def _on_disk(ws: Path) -> dict[str, str]:
    out = {}
    for p in [ws / "MEMORY.md", *sorted((ws / "memory").rglob("*.md"))]:
        if p.is_file():
            out[p.relative_to(ws).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _index_state(db: Path) -> tuple[str, dict[str, str], int]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        files = dict(conn.execute("SELECT path, hash FROM files"))
        orphans = conn.execute(
            "SELECT count(*) FROM files f WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.path = f.path)"
        ).fetchone()[0]
        return integrity, files, orphans
    finally:
        conn.close()


def _lost_updates(db: Path, ws: Path) -> int:
    """Files whose current content is not what the index holds, plus index rows for gone files."""
    _, files, _ = _index_state(db)
    disk = _on_disk(ws)
    return sum(1 for p in disk.keys() | files.keys() if disk.get(p) != files.get(p))


def _check_recovered(m: BuiltinSearchManager, ws: Path) -> None:
    """Opens, answers, and matches the files after the next sync."""
    integrity, _, orphans = _index_state(m.db_path)
    assert integrity == "ok" and orphans == 0

    async def go():
        answer = await m.search("dark roast coffee", min_score=0)
        assert answer.results and answer.results[0].path == "MEMORY.md"
        await m.sync()

    anyio.run(go)
    lost = _lost_updates(m.db_path, ws)
    FIGURES["lost updates observed"] += lost
    assert lost == 0


# --- provider errors and timeouts ---------------------------------------------------------------


async def _no_sleep(_s: float) -> None:
    return None


def test_provider_errors_and_timeouts_during_sync_and_search(tmp_path):
    ws = _ws(tmp_path, n=4, lines=10)
    with ProviderServer("openai") as server:
        ms = MemorySearchConfig.model_validate(
            {"provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": KEY}}
        )
        provider = create_provider("openai", ms, environ={}, sleep=_no_sleep)
        provider.query_timeout = provider.batch_timeout = 0.3
        settings = make_settings(tmp_path, ws, {"sync": {"onSearch": False}})
        m = BuiltinSearchManager(settings, provider=provider)

        async def go():
            await m.sync()  # healthy first build
            (ws / "memory" / "new.md").write_text("- a new note about gannets\n")
            faults = (
                [Fault(500)] * 4
                + [Fault(503)] * 4
                + [Fault(200, delay=1.0)] * 4
                + [Fault(429, headers={"Retry-After": "0"})] * 4
            )
            server.faults = list(faults)
            FIGURES["faults injected: provider 5xx"] += 8
            FIGURES["faults injected: provider timeout"] += 4
            FIGURES["faults injected: provider 429"] += 4
            report = await m.sync()  # the text is stored; vectors wait for the provider
            assert report.files_indexed == 1 and m._embed_error
            answer = await m.search("gannets", min_score=0)  # query embedding fails too: keyword answer
            assert answer.results and answer.results[0].path == "memory/new.md"
            assert answer.degraded.vector and "query embedding" in answer.degraded.vector
            st = await m.status()
            assert st.index["lastEmbedError"]
            server.faults = []
            await m.sync()  # the provider is back: the missing vectors are filled in
            conn = apsw.Connection(str(m.db_path), flags=apsw.SQLITE_OPEN_READONLY)
            assert conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NULL").fetchone()[0] == 0
            conn.close()
            answer = await m.search("gannets", min_score=0)
            assert answer.mode == "hybrid" and answer.degraded.vector is None
            await m.aclose()

        anyio.run(go)
        assert _lost_updates(settings.store_path, ws) == 0


# --- QMD crashes and hangs ------------------------------------------------------------------------


def test_qmd_crashes_and_hangs_fall_back_and_recover(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    env = {"PATH": f"{FAKEBIN}:{os.environ['PATH']}", "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
           "FAKE_QMD_PIDS": str(tmp_path / "pids"), "HOME": os.environ.get("HOME", "/root")}
    settings = make_settings(tmp_path, ws, memory={"backend": "qmd", "qmd": {
        "includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}],
        "update": {"debounceMs": 60_000}, "limits": {"timeoutMs": 1500}}})
    anyio.run(QmdSearchManager(settings, environ=env).sync)
    builtin = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())

    async def go():
        for mode in ["crash", "hang", "garbage", "crash", "garbage"]:
            # The manager reads FAKE_QMD_MODE at every call; after a failure the wrapper tries it
            # again (retry_after_s=0), and it then finds QMD healthy again.
            m = FallbackSearchManager(lambda: QmdSearchManager(settings, environ=env), lambda: builtin,
                                      name="qmd", retry_after_s=0)
            env["FAKE_QMD_MODE"] = mode
            answer = await m.search("aurora telemetry", min_score=0)
            FIGURES[f"faults injected: qmd {mode}"] += 1
            assert answer.results and answer.backend == "builtin" and answer.fallback is not None, mode
            env["FAKE_QMD_MODE"] = "replay"
            answer = await m.search("aurora telemetry", min_score=0)
            assert answer.results and answer.backend == "qmd" and answer.fallback is None, mode
            await m.primary().aclose()
        await builtin.aclose()

    anyio.run(go)


# --- disk full ------------------------------------------------------------------------------------

DISK_FULL_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys, anyio
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from helpers import make_settings
    from memsift.backends.builtin import BuiltinSearchManager
    from memsift.engine.embeddings.fake import FakeEmbeddingProvider
    root, ws, limit, force = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    m = BuiltinSearchManager(make_settings(root, ws), provider=FakeEmbeddingProvider())
    try:
        anyio.run(lambda: m.sync(force=force))
        print(json.dumps({{"error": None}}))
    except Exception as exc:
        print(json.dumps({{"error": type(exc).__name__ + ": " + str(exc)}}))
    """
).format(tests=str(TESTS))


@pytest.mark.parametrize("force", [True, False], ids=["full-rebuild", "incremental"])
def test_disk_full_during_a_reindex(tmp_path, force):
    ws = _ws(tmp_path, n=6)
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider())
    anyio.run(m.sync)
    anyio.run(m.aclose)
    before = _index_state(m.db_path)[1]
    for i in range(30):  # enough new text that the sync must grow the files
        (ws / "memory" / f"big-{i}.md").write_text(f"- bulk note {i} about storm petrels " * 400 + "\n")
    size = max(
        os.path.getsize(m.db_path), os.path.getsize(f"{m.db_path}-wal") if os.path.exists(f"{m.db_path}-wal") else 0
    )
    limit = size + 64 * 1024
    proc = subprocess.run(
        [sys.executable, "-c", DISK_FULL_CHILD, str(tmp_path), str(ws), str(limit), "1" if force else "0"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    FIGURES["faults injected: disk full"] += 1
    assert proc.returncode == 0, proc.stderr[-3000:]  # a clear error, not a crash
    error = json.loads(proc.stdout.splitlines()[-1])["error"]
    assert error and error.startswith("IndexUnusableError"), error
    assert "disk" in error.lower() or "full" in error.lower() or "large" in error.lower(), error
    # the embedding cache's rows failing to be written is the store's failure, not the provider's
    assert "embedding failed" not in proc.stdout + proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    if force:  # the live index was never touched by the failed rebuild
        assert _index_state(m.db_path)[1] == before
        assert not [p for p in os.listdir(m.db_path.parent) if ".tmp-" in p]
    fresh = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider())
    _check_recovered(fresh, ws)
    anyio.run(fresh.aclose)


# --- the database locked by another process -----------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import apsw, fcntl, os, sys, time
    db, how = sys.argv[1], sys.argv[2]
    if how == "sqlite":
        c = apsw.Connection(db)
        c.execute("BEGIN EXCLUSIVE")
        c.execute("INSERT OR REPLACE INTO meta VALUES('holder', 'x')")
    else:
        fd = os.open(db + ".lock", os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()  # until the test closes stdin
    """
)


@pytest.mark.parametrize("how", ["sqlite", "writer-lock"])
def test_database_locked_by_another_process(tmp_path, monkeypatch, how):
    monkeypatch.setattr(indexer_mod, "WRITE_LOCK_TIMEOUT_S", 1.0)
    ws = _ws(tmp_path, n=3)
    settings = make_settings(tmp_path, ws, {"sync": {"onSearch": False}})
    m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    anyio.run(m.sync)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(m.db_path), how], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        FIGURES[f"faults injected: database locked ({how})"] += 1
        (ws / "memory" / "while-locked.md").write_text("- written while the index was locked: skuas\n")

        async def go():
            answer = await m.search("dark roast coffee", min_score=0)  # reads still answer
            assert answer.results[0].path == "MEMORY.md"
            with pytest.raises(IndexUnusableError, match="locked"):
                await m.sync()

        anyio.run(go)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    _check_recovered(m, ws)
    assert anyio.run(lambda: m.search("skuas", min_score=0)).results[0].path == "memory/while-locked.md"
    anyio.run(m.aclose)


# --- SIGKILL at random points of a sync ------------------------------------------------------------

KILLS = int(os.environ.get("MEMSIFT_SIGKILL_ROUNDS", "20"))


def test_sigkill_at_random_points_of_a_sync(tmp_path):
    rng = random.Random(20261122)
    ws = _ws(tmp_path, n=12)
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider(model="slow-bow"))
    anyio.run(m.sync)
    notes = ws / "memory"
    for round_ in range(KILLS):
        # Change the files: add, rewrite, delete.
        # Distinct lines make distinct chunks, each embedded (slowly), so most kills land mid-sync.
        for i in range(rng.randint(3, 12)):
            lines = rng.randint(50, 400)
            (notes / f"r{round_}-{i}.md").write_text(
                "".join(f"- round {round_} note {i} line {j} about shags\n" for j in range(lines))
            )
        existing = sorted(notes.glob("*.md"))
        for p in rng.sample(existing, k=min(3, len(existing))):
            p.write_text(
                "".join(f"- rewritten in round {round_}, line {j}: cormorants\n" for j in range(rng.randint(20, 200)))
            )
        for p in rng.sample(sorted(notes.glob("r*.md")), k=min(2, len(list(notes.glob("r*.md"))))):
            p.unlink()
        role = "slow-reindex" if round_ % 4 == 3 else "slow-sync"
        proc = subprocess.Popen([sys.executable, str(WORKER), role, str(tmp_path), str(ws), "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        assert '"started": true' in line, line + proc.stderr.read()
        time.sleep(rng.uniform(0.0, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        if proc.returncode == -signal.SIGKILL:
            FIGURES[f"faults injected: SIGKILL during {role.removeprefix('slow-')}"] += 1
        if proc.returncode == 0:
            FIGURES["SIGKILL rounds where the sync finished first"] += 1
        elif proc.returncode != -signal.SIGKILL:
            FIGURES["crashes observed"] += 1  # the worker failed on its own
        assert proc.returncode in (0, -signal.SIGKILL)
        _check_recovered(m, ws)
    anyio.run(m.aclose)
    FIGURES["crashes observed"] += 0
