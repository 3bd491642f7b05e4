from __future__ import annotations

import glob
import hashlib
import os
import time
from pathlib import Path

import anyio
import pytest

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.store import open_db
from memsift.engine.embeddings import ProviderSelection
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.errors import ProviderError


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nThe user likes dark roast coffee.\n")
    for day in range(1, 6):
        body = "\n".join(f"- note {day}.{i}: topic{day} detail {i} " + "lorem ipsum " * 8 for i in range(30))
        (ws / "memory" / f"2026-11-0{day}.md").write_text(f"# 2026-11-0{day}\n\n{body}\n")
    return ws


def _manager(tmp_path, ws, provider=None, **ms) -> BuiltinSearchManager:
    settings = make_settings(tmp_path, ws, ms)
    return BuiltinSearchManager(settings, provider=provider or FakeEmbeddingProvider())


def _rows(db: Path, sql: str, args=()):
    conn, _ = open_db(db, readonly=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _digest(ws: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in ws.rglob("*") if p.is_file()}


def run(coro_fn, *args, **kw):
    return anyio.run(lambda: coro_fn(*args, **kw))


def test_first_sync_indexes_everything_and_second_does_nothing(tmp_path):
    ws = _ws(tmp_path)
    before = _digest(ws)
    provider = FakeEmbeddingProvider()
    m = _manager(tmp_path, ws, provider)
    r1 = run(m.sync)
    assert r1.full_reindex and r1.files_indexed == 6 and r1.chunks_written > 6
    assert r1.chunks_embedded == r1.chunks_written
    calls = len(provider.calls)
    r2 = run(m.sync)
    assert not r2.full_reindex and r2.files_indexed == 0 and r2.files_unchanged == 6
    assert len(provider.calls) == calls  # nothing embedded
    assert _digest(ws) == before  # indexing never writes to the Markdown files
    run(m.aclose)


def test_editing_one_file_changes_only_its_chunks(tmp_path):
    ws = _ws(tmp_path)
    provider = FakeEmbeddingProvider()
    m = _manager(tmp_path, ws, provider)
    run(m.sync)
    db = m.db_path
    before = {r[0]: r for r in _rows(db, "SELECT rowid, id, path, hash FROM chunks")}
    target = ws / "memory" / "2026-11-03.md"
    lines = target.read_text().split("\n")
    lines[20] = "- a brand new fact about kubernetes upgrades"
    target.write_text("\n".join(lines))
    provider.calls.clear()
    r = run(m.sync)
    assert r.files_indexed == 1 and r.files_unchanged == 5
    after = {r[0]: r for r in _rows(db, "SELECT rowid, id, path, hash FROM chunks")}
    # Every chunk of the other files is untouched (same rowid, same id).
    for rowid, row in before.items():
        if row[2] != "memory/2026-11-03.md":
            assert after[rowid] == row
    # Only the chunks whose text changed were embedded; the rest came from stored vectors.
    new_hashes = {row[3] for row in after.values() if row[2] == "memory/2026-11-03.md"}
    old_hashes = {row[3] for row in before.values() if row[2] == "memory/2026-11-03.md"}
    assert sum(provider.calls) == len(new_hashes - old_hashes) >= 1
    assert r.chunks_from_cache == len(new_hashes & old_hashes) >= 1
    hits = run(m.search, "kubernetes upgrades", min_score=0)
    assert hits.results[0].path == "memory/2026-11-03.md"
    run(m.aclose)


def test_touch_without_change_is_not_reindexed_and_delete_removes_rows(tmp_path):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws)
    run(m.sync)
    p = ws / "memory" / "2026-11-01.md"
    os.utime(p, (time.time() + 5, time.time() + 5))
    r = run(m.sync)
    assert r.files_indexed == 0 and r.chunks_written == 0
    (ws / "memory" / "2026-11-02.md").unlink()
    r = run(m.sync)
    assert r.files_removed == 1
    assert _rows(m.db_path, "SELECT count(*) FROM chunks WHERE path='memory/2026-11-02.md'")[0][0] == 0
    assert _rows(m.db_path, "SELECT count(*) FROM files")[0][0] == 5
    n_chunks = _rows(m.db_path, "SELECT count(*) FROM chunks")[0][0]
    assert _rows(m.db_path, "SELECT count(*) FROM chunks_vec")[0][0] == n_chunks
    run(m.aclose)


def test_fingerprint_change_rebuilds_atomically(tmp_path):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws)
    run(m.sync)
    inode = os.stat(m.db_path).st_ino
    run(m.aclose)
    m2 = _manager(tmp_path, ws, chunking={"tokens": 100, "overlap": 10})
    r = run(m2.sync)
    assert r.full_reindex and "chunk" in r.reindex_cause.lower()
    assert os.stat(m2.db_path).st_ino != inode  # a new file was swapped in
    assert glob.glob(f"{m2.db_path}.tmp-*") == []
    meta = _rows(m2.db_path, "SELECT value FROM meta")[0][0]
    assert '"chunkTokens": 100' in meta
    hits = run(m2.search, "topic4 detail", min_score=0)
    assert hits.results and hits.mode == "hybrid"
    run(m2.aclose)


def test_model_change_never_mixes_vector_spaces(tmp_path):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws, FakeEmbeddingProvider(dims=64, model="bow-a"))
    run(m.sync)
    run(m.aclose)
    m2 = _manager(tmp_path, ws, FakeEmbeddingProvider(dims=32, model="bow-b"))
    r = run(m2.sync)
    assert r.full_reindex and "model" in r.reindex_cause
    assert {len(b) for (b,) in _rows(m2.db_path, "SELECT embedding FROM chunks")} == {32 * 4}
    assert {m for (m,) in _rows(m2.db_path, "SELECT DISTINCT model FROM chunks")} == {"bow-b"}
    assert "float[32]" in _rows(m2.db_path, "SELECT sql FROM sqlite_master WHERE name='chunks_vec'")[0][0]
    run(m2.aclose)


def test_switching_back_reuses_the_embedding_cache(tmp_path):
    ws = _ws(tmp_path)
    a1 = FakeEmbeddingProvider(model="bow-a")
    m = _manager(tmp_path, ws, a1)
    run(m.sync)
    run(m.aclose)
    run(_manager(tmp_path, ws, FakeEmbeddingProvider(model="bow-b")).sync)
    a2 = FakeEmbeddingProvider(model="bow-a")
    m3 = _manager(tmp_path, ws, a2)
    r = run(m3.sync)
    assert r.full_reindex and r.chunks_embedded == 0 and r.chunks_from_cache == r.chunks_written
    assert a2.calls == []
    run(m3.aclose)


def test_failed_rebuild_leaves_the_old_index_working(tmp_path):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws, FakeEmbeddingProvider(model="bow-a"))
    run(m.sync)
    run(m.aclose)
    inode = os.stat(m.db_path).st_ino
    failing = FakeEmbeddingProvider(model="bow-b", fail_after=0)
    m2 = _manager(tmp_path, ws, failing)
    with pytest.raises(ProviderError):
        run(m2.sync)
    assert os.stat(m2.db_path).st_ino == inode
    assert glob.glob(f"{m2.db_path}*.tmp-*") == [] and glob.glob(f"{m2.db_path}.tmp-*") == []
    run(m2.aclose)
    m3 = _manager(tmp_path, ws, FakeEmbeddingProvider(model="bow-a"))
    answer = run(m3.search, "dark roast coffee", min_score=0)
    assert answer.results[0].path == "MEMORY.md"
    run(m3.aclose)


def test_search_does_not_rebuild_a_stale_index_but_says_so(tmp_path):
    ws = _ws(tmp_path)
    run(_manager(tmp_path, ws, FakeEmbeddingProvider(model="bow-a")).sync)
    m = _manager(tmp_path, ws, FakeEmbeddingProvider(model="bow-b"))
    answer = run(m.search, "dark roast coffee", min_score=0)
    assert answer.mode == "fts-only" and "memsift index" in answer.degraded.vector
    assert not any("must be rebuilt" in n for n in answer.notes or [])  # no upgrade: no upgrade note
    assert answer.results[0].path == "MEMORY.md"
    status = run(m.status)
    assert status.index["rebuildNeeded"] and status.dirty
    run(m.aclose)


def test_notes_written_while_a_rebuild_is_due_are_found_by_keyword_before_it(tmp_path):
    """A search does not rebuild, but it brings in what changed since, by keyword: before, a note
    written after an upgrade or a settings change was not found until `memsift index` ran."""
    ws = _ws(tmp_path)
    run(_manager(tmp_path, ws, FakeEmbeddingProvider(model="bow-a")).sync)
    (ws / "memory" / "2026-11-06.md").write_text("# 2026-11-06\n\n- Booked the ferry to Bornholm, cabin 12.\n")
    (ws / "memory" / "2026-11-02.md").unlink()
    before = _digest(ws)
    provider = FakeEmbeddingProvider(model="bow-b")
    m = _manager(tmp_path, ws, provider)
    answer = run(m.search, "ferry Bornholm", min_score=0)
    assert answer.mode == "fts-only" and "memsift index" in answer.degraded.vector
    assert [h.path for h in answer.results][:1] == ["memory/2026-11-06.md"]
    assert not run(m.search, "topic2", mode="keyword", min_score=0).results  # the deleted note's rows are gone
    vectors = _rows(m.db_path, "SELECT count(*) FROM chunks WHERE path = ? AND embedding IS NOT NULL",
                    ("memory/2026-11-06.md",))
    assert vectors == [(0,)], "no vectors are made for a rebuild to throw away"
    status = run(m.status)
    assert status.index["rebuildNeeded"] and status.index["meta"]["model"] == "bow-a"  # the rebuild stays due
    assert status.index["pendingChanges"] == 0 and status.files == 6
    rebuilt = run(m.sync)
    assert rebuilt.full_reindex and run(m.search, "ferry Bornholm", min_score=0).mode == "hybrid"
    assert _digest(ws) == before
    run(m.aclose)


def test_an_upgrade_that_needs_a_rebuild_says_so_in_the_answer(tmp_path):
    """A new memsift whose provider key differs (its build of the local model changed) answers the
    first searches by keywords and says why in words, naming both versions; not after `index`."""
    from memsift.backends.builtin.store import read_meta, write_meta
    from memsift.engine.files.fingerprint import memsift_version

    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws)
    run(m.sync)
    conn, _ = open_db(m.db_path)
    try:  # as the release before left it: its own version, another key for the same model
        write_meta(conn, {**read_meta(conn), "updatedBy": "0.9.0", "builtBy": "0.9.0", "providerKey": "older-build"})
    finally:
        conn.close()
    run(m.aclose)
    m = _manager(tmp_path, ws)
    answer = run(m.search, "dark roast coffee", min_score=0)
    assert answer.mode == "fts-only" and answer.results[0].path == "MEMORY.md"
    assert answer.notes == [
        f"the index built by memsift 0.9.0 must be rebuilt for memsift {memsift_version()} (the embedding "
        f"model's settings, or this memsift's build of it, changed (built by memsift 0.9.0; this is memsift "
        f"{memsift_version()})); until then searches use keywords only: run `memsift index`"
    ]
    assert run(m.sync).full_reindex
    again = run(m.search, "dark roast coffee", min_score=0)
    assert again.mode != "fts-only" and not again.notes
    run(m.aclose)


def test_leftover_temp_databases_are_cleaned_up(tmp_path):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws)
    run(m.sync)
    orphan = Path(f"{m.db_path}.tmp-deadbeef0000")
    open_db(orphan)[0].close()  # a rebuild killed half-way: memsift's mark is in its header
    Path(f"{orphan}-wal").write_bytes(b"")
    empty = Path(f"{m.db_path}.tmp-deadbeef0001")
    empty.write_bytes(b"")  # killed before its first write
    run(m.sync)
    assert not orphan.exists() and not Path(f"{orphan}-wal").exists() and not empty.exists()
    run(m.aclose)


def test_embedding_failure_keeps_text_searchable_and_backfills_later(tmp_path):
    ws = _ws(tmp_path)
    provider = FakeEmbeddingProvider()
    m = _manager(tmp_path, ws, provider)
    run(m.sync)
    (ws / "memory" / "2026-11-09.md").write_text("# 2026-11-09\n\n- zebra migration notes\n")
    provider.fail_after = len(provider.calls)  # the next embed call fails
    r = run(m.sync)
    assert r.files_indexed == 1
    assert _rows(m.db_path, "SELECT count(*) FROM chunks WHERE embedding IS NULL")[0][0] == 1
    assert run(m.status).index["lastEmbedError"]
    provider.fail_after = None
    run(m.sync)
    assert _rows(m.db_path, "SELECT count(*) FROM chunks WHERE embedding IS NULL")[0][0] == 0
    answer = run(m.search, "zebra migration", min_score=0)
    assert answer.results[0].path == "memory/2026-11-09.md" and answer.results[0].explain is None
    run(m.aclose)


def test_binary_and_symlinked_files_are_skipped_with_a_reason(tmp_path):
    ws = _ws(tmp_path)
    (ws / "memory" / "blob.md").write_bytes(b"\x00\x01binary\x00" * 100)
    os.symlink(ws / "MEMORY.md", ws / "memory" / "alias.md")
    m = _manager(tmp_path, ws)
    run(m.sync)
    skipped = {s["path"]: s["reason"] for s in run(m.status).skipped}
    assert "binary" in skipped["memory/blob.md"] and "symlink" in skipped["memory/alias.md"]
    assert _rows(m.db_path, "SELECT count(*) FROM files WHERE path IN ('memory/blob.md','memory/alias.md')")[0][0] == 0
    run(m.aclose)


def test_cache_max_entries_bounds_the_cache(tmp_path):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws, cache={"maxEntries": 5})
    run(m.sync)
    assert _rows(m.db_path, "SELECT count(*) FROM embedding_cache")[0][0] == 5
    run(m.aclose)


def test_index_files_are_private(tmp_path):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws)
    run(m.sync)
    assert os.stat(m.db_path).st_mode & 0o077 == 0
    run(m.aclose)


def test_fts_only_mode_without_a_provider(tmp_path):
    ws = _ws(tmp_path)
    settings = make_settings(tmp_path, ws)
    m = BuiltinSearchManager(settings, selection=ProviderSelection(None, "auto", unavailable_reason="no model here"))
    answer = run(m.search, "dark roast coffee")
    assert answer.mode == "fts-only" and answer.provider == "none"
    assert "no model here" in answer.degraded.vector
    assert answer.results[0].path == "MEMORY.md"
    meta = _rows(m.db_path, "SELECT value FROM meta")[0][0]
    assert '"model": "fts-only"' in meta
    run(m.aclose)


def test_progress_reports_files_then_chunks_in_small_steps(tmp_path):
    # Issue 17: `memsift index` showed "0/?" for minutes, then jumped by 256 chunks.
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(60):
        body = "\n".join(f"- {i}.{j} " + "words about the weekly planning meeting " * 12 for j in range(12))
        (ws / "memory" / f"2026-10-{i % 28 + 1:02d}-{i}.md").write_text(body + "\n")
    events: list[tuple[str, int, int]] = []
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider(),
                             progress=lambda stage, done, total: events.append((stage, done, total)))
    report = run(m.sync)
    files = [e for e in events if e[0] == "files"]
    chunks = [e for e in events if e[0] == "embed"]
    assert files and files[-1] == ("files", 60, 60)
    assert events.index(files[-1]) < events.index(chunks[0])  # files first, then chunks
    assert chunks[-1] == ("embed", report.chunks_written, report.chunks_written) and report.chunks_written > 256
    assert all(total == report.chunks_written for _s, _d, total in chunks)
    dones = [d for _s, d, _t in chunks]
    assert dones == sorted(dones) and max(b - a for a, b in zip([0] + dones, dones)) <= 64  # never a jump of 256
    run(m.aclose)


def test_a_rebuild_cause_says_what_changed_in_words(tmp_path):
    # Issue 17: "scopeHash changed ('8ff9…' → '8823…')" told the user nothing.
    ws = _ws(tmp_path)
    (ws / "notes").mkdir()
    store = {"store": {"path": str(tmp_path / "shared.sqlite")}}  # one index shared by both settings
    run(_manager(tmp_path, ws, **store).sync)
    st = run(_manager(tmp_path, ws, extraPaths=["notes"], **store).status)
    cause = st.index["rebuildNeeded"]
    assert cause == "the files it covers changed (workspace, extraPaths or multimodal settings)", cause
    assert "memsift index" in st.search_now and "scopeHash" not in st.search_now
