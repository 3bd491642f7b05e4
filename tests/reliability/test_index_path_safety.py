"""The index path: memsift writes, renames and deletes only its own files there. An index path on
or inside the memory files is refused; a file memsift did not make (another program's database,
a text file, a symlink) is never moved, overwritten or followed; a zero-byte or empty index heals
itself; quarantined damaged indexes stay bounded without deleting anything else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import apsw
import pytest

from figures import FIGURES
from helpers import EXAMPLE_WORKSPACE, make_settings
from memory_guard import assert_untouched, snapshot
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.store import open_db
from memsift.engine.embeddings.fake import FakeEmbeddingProvider


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, w)
    (w / "notes").mkdir()
    (w / "notes" / "runbook.md").write_text("# Runbook\n\n- restart the ledger service with care\n")
    return w


def _cli(tmp_path: Path, ws: Path, cfg: dict, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1"}
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(path), "-w", str(ws), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _cfg(tmp_path: Path, **ms) -> dict:
    return {"stateDir": str(tmp_path / "state"),
            "agents": {"defaults": {"memorySearch": {"provider": "none", "extraPaths": ["notes"], **ms}}}}


def _stat(p: Path) -> tuple:
    st = os.lstat(p)
    return st.st_ino, st.st_size, st.st_mtime_ns, p.read_bytes() if not p.is_symlink() else os.readlink(p)


COMMANDS = (["index"], ["search", "ledger"], ["status"])


@pytest.mark.parametrize("store", ["MEMORY.md", "memory/2026-11-02.md", "memory/index.sqlite", "memory",
                                   "notes/index.sqlite", "{ws}/memory/../MEMORY.md", "state-in-memory"])
def test_an_index_path_on_or_inside_the_memory_files_is_refused(tmp_path, ws, store):
    if store == "state-in-memory":  # the default index path, under a state folder inside memory/
        cfg = _cfg(tmp_path)
        cfg["stateDir"] = str(ws / "memory" / ".state")
        key = "stateDir"
    else:
        cfg = _cfg(tmp_path, store={"path": store.format(ws=ws)})
        key = "store.path"
    before = snapshot(ws)
    listing = sorted(p.name for p in ws.rglob("*"))
    for args in COMMANDS:
        r = _cli(tmp_path, ws, cfg, *args)
        assert r.returncode == 3, (args, r.stdout, r.stderr[-1500:])
        assert key in r.stderr and "memory files" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert_untouched(before, ws)
    assert sorted(p.name for p in ws.rglob("*")) == listing  # nothing created, renamed or moved aside


@pytest.mark.parametrize("store", ["journal/index.sqlite", "journal/deep/index.sqlite", "journal",
                                   "state-in-collection", "extra-collection"])
def test_an_index_path_inside_a_qmd_collection_folder_is_refused(tmp_path, ws, store):
    """The builtin index also covers QMD's collections (memory.qmd.paths, extraCollections), so its
    path may not be inside them either, whichever backend runs."""
    (ws / "journal" / "deep").mkdir(parents=True)
    (ws / "journal" / "deep" / "2026-11-03.md").write_text("# Journal\n\n- the ledger audit moved to Friday\n")
    cfg = _cfg(tmp_path)
    cfg["memory"] = {"backend": "builtin", "qmd": {"paths": [{"path": "journal", "name": "journal"}]}}
    key = "store.path"
    if store == "state-in-collection":  # the default index path, under a state folder inside the collection
        cfg["stateDir"] = str(ws / "journal" / ".state")
        key = "stateDir"
    elif store == "extra-collection":  # the same collection given as memorySearch.qmd.extraCollections
        del cfg["memory"]
        cfg["agents"]["defaults"]["memorySearch"].update(
            qmd={"extraCollections": [{"path": "journal", "name": "journal"}]}, store={"path": "journal/index.sqlite"})
    else:
        cfg["agents"]["defaults"]["memorySearch"]["store"] = {"path": store}
    before = snapshot(ws)
    listing = sorted(p.name for p in ws.rglob("*"))
    for args in COMMANDS:
        r = _cli(tmp_path, ws, cfg, *args)
        assert r.returncode == 3, (args, r.stdout, r.stderr[-1500:])
        assert key in r.stderr and "memory files" in r.stderr and "journal" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
    assert_untouched(before, ws)
    assert sorted(p.name for p in ws.rglob("*")) == listing  # nothing created, renamed or moved aside


def test_an_index_path_beside_a_qmd_collection_is_accepted(tmp_path, ws):
    """Only what the index covers is refused: a collection of .txt files is not indexed by the
    builtin backend, and a folder next to a collection is not inside it."""
    (ws / "journal").mkdir()
    (ws / "journal" / "2026-11-03.md").write_text("# Journal\n\n- the ledger audit moved to Friday\n")
    (ws / "logs").mkdir()
    cfg = _cfg(tmp_path, store={"path": str(tmp_path / "journal-index" / "index.sqlite")})
    cfg["memory"] = {"qmd": {"paths": [{"path": "journal", "name": "journal"},
                                       {"path": "logs", "name": "logs", "pattern": "*.txt"}]}}
    r = _cli(tmp_path, ws, cfg, "search", "ledger audit", "--json")
    assert r.returncode == 0, r.stderr[-1500:]
    assert "journal/2026-11-03.md" in {h["path"] for h in json.loads(r.stdout)["results"]}
    cfg["agents"]["defaults"]["memorySearch"]["store"] = {"path": "logs/index.sqlite"}
    assert _cli(tmp_path, ws, cfg, "index").returncode == 0


def _foreign_sqlite(path: Path) -> None:
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE contacts(name TEXT, phone TEXT); INSERT INTO contacts VALUES ('Lena', '+351 555 0100')")
    conn.close()


@pytest.mark.parametrize("kind", ["sqlite", "text", "sqlite-in-state-folder"])
def test_a_file_memsift_did_not_make_is_never_moved_or_overwritten(tmp_path, ws, kind):
    if kind == "sqlite-in-state-folder":  # another program's database at the default index path
        cfg = _cfg(tmp_path)
        probe = _cli(tmp_path, ws, cfg, "config", "show")
        target = Path(json.loads(probe.stdout)["storePath"])
        target.parent.mkdir(parents=True)
        _foreign_sqlite(target)
    else:
        target = tmp_path / "elsewhere" / ("app.db" if kind == "sqlite" else "diary.txt")
        target.parent.mkdir()
        if kind == "sqlite":
            _foreign_sqlite(target)
        else:
            target.write_text("Dear diary,\n" * 200)
        cfg = _cfg(tmp_path, store={"path": str(target)})
    before, memory = _stat(target), snapshot(ws)
    siblings = sorted(p.name for p in target.parent.iterdir())
    for args in (*COMMANDS, ["index", "--force"]):
        r = _cli(tmp_path, ws, cfg, *args)
        assert r.returncode == 4, (args, r.stdout, r.stderr[-1500:])
        assert "not a memsift index" in r.stderr and "Traceback" not in r.stderr, r.stderr
        FIGURES["foreign files at the index path tried"] += 1
    assert _stat(target) == before  # same inode, size, mtime and bytes
    assert sorted(p.name for p in target.parent.iterdir() if not p.name.endswith(".lock")) == siblings
    assert_untouched(memory, ws)


def test_a_symlink_at_the_index_path_or_its_lock_is_not_followed(tmp_path, ws):
    cfg = _cfg(tmp_path)
    target = Path(json.loads(_cli(tmp_path, ws, cfg, "config", "show").stdout)["storePath"])
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "precious.md"
    victim.write_text("# Not memsift's\n")
    target.parent.mkdir(parents=True)
    target.symlink_to(victim)
    before = (_stat(victim), _stat(target))
    for args in COMMANDS:
        r = _cli(tmp_path, ws, cfg, *args)
        assert r.returncode == 4 and "symlink" in r.stderr and "Traceback" not in r.stderr, (args, r.stderr[-1500:])
    assert (_stat(victim), _stat(target)) == before and sorted(os.listdir(outside)) == ["precious.md"]
    target.unlink()
    lock = Path(f"{target}.lock")
    lock.unlink(missing_ok=True)  # memsift's own lock file, made by the runs above
    lock.symlink_to(victim)
    r = _cli(tmp_path, ws, cfg, "index")
    assert r.returncode == 4 and "symlink" in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]
    assert _stat(victim) == before[0]
    FIGURES["symlinks at the index path tried"] += 2


@pytest.mark.parametrize("how", ["zero-byte", "no-meta"])
def test_an_empty_index_file_heals_itself_instead_of_answering_nothing(tmp_path, how):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    settings = make_settings(tmp_path, ws)
    db = settings.store_path
    db.parent.mkdir(parents=True)
    if how == "zero-byte":
        db.write_bytes(b"")
    else:  # a memsift database whose first build never finished
        open_db(db)[0].close()
    # A build slower than the search's sync budget (as with a real model on a busy machine).
    m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider(delay=0.3))
    m.search_sync_budget_s = 0.05

    async def go():
        try:
            answer = await m.search("Lisbon trip with Lena", min_score=0)
            assert answer.results and answer.mode == "hybrid", answer
            assert not answer.sync_pending
        finally:
            await m.aclose()

    anyio.run(go)


def test_a_zero_byte_index_heals_in_the_cli_without_a_traceback(tmp_path, ws):
    cfg = _cfg(tmp_path)
    target = Path(json.loads(_cli(tmp_path, ws, cfg, "config", "show").stdout)["storePath"])
    target.parent.mkdir(parents=True)
    target.write_bytes(b"")
    r = _cli(tmp_path, ws, cfg, "search", "ledger", "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr and "CancelledError" not in r.stderr, r.stderr[-1500:]
    assert json.loads(r.stdout)["results"]


def test_quarantine_is_bounded_and_never_deletes_what_is_not_memsifts(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    settings = make_settings(tmp_path, ws)
    db = settings.store_path
    db.parent.mkdir(parents=True)
    theirs = [db.with_name(f"{db.name}.corrupt-notes"), db.with_name(f"{db.name}.tmp-notes"),
              db.with_name(f"{db.name}.corrupt-2000-01-01.bak"), db.with_name(f"{db.name}.tmp-0123456789ab")]
    for p in theirs:
        p.write_text("someone else's file\n")
        os.utime(p, (946684800, 946684800))  # old: first in line when old quarantines are pruned
    for round_ in range(5):
        m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
        anyio.run(m.sync)
        anyio.run(m.aclose)
        db.write_bytes(b"not a database " * 100)  # damage memsift's own index (in its state folder)
        m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
        assert anyio.run(lambda: m.search("Lisbon", min_score=0)).results
        anyio.run(m.aclose)
        time.sleep(1.1)  # quarantined names carry the second they were made
    ours = [
        p for p in db.parent.glob(f"{db.name}.corrupt-*") if p not in theirs and not p.name.endswith(("-wal", "-shm"))
    ]
    assert len(ours) == 1  # the last one only: each copy is as large as the index
    assert all(p.read_text() == "someone else's file\n" for p in theirs)
