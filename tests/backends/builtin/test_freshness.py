"""Freshness and safety of the builtin index: stale hits, search-time sync, corruption, sessions."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from helpers import make_settings, write_transcript
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.store import open_db
from memsift.engine.embeddings.fake import FakeEmbeddingProvider


def run(fn, *args, **kw):
    return anyio.run(lambda: fn(*args, **kw))


def _ws(tmp_path: Path, n: int = 40) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- the user likes dark roast coffee\n")
    for i in range(n):
        body = "\n".join(f"- entry {i}.{j} about topic{i} and item{j} " + "filler words " * 10 for j in range(40))
        (ws / "memory" / f"2026-10-{i % 28 + 1:02d}-{i}.md").write_text(f"# day {i}\n\n{body}\n")
    return ws


def _manager(tmp_path, ws, **ms) -> BuiltinSearchManager:
    return BuiltinSearchManager(make_settings(tmp_path, ws, ms), provider=FakeEmbeddingProvider())


@pytest.mark.parametrize("damage", ["garbage", "truncate", "zero-pages"])
def test_a_damaged_index_is_moved_aside_and_rebuilt(tmp_path, damage, capfd):
    ws = _ws(tmp_path)
    m = _manager(tmp_path, ws)
    run(m.sync)
    run(m.aclose)
    db = m.db_path
    size = db.stat().st_size
    if damage == "garbage":
        db.write_bytes(b"not a database at all " * 500)
    elif damage == "truncate":
        with open(db, "r+b") as fh:
            fh.truncate(size // 3)
    else:
        with open(db, "r+b") as fh:  # wipe pages in the middle, keep the header
            fh.seek(8192)
            fh.write(b"\x00" * (size // 2))
    m2 = _manager(tmp_path, ws)
    answer = run(m2.search, "dark roast coffee", min_score=0)
    assert answer.results and answer.results[0].path == "MEMORY.md"
    assert list(db.parent.glob(f"{db.name}.corrupt-*"))  # the damaged file is kept for inspection
    assert "index damaged; moved aside" in capfd.readouterr().err
    # Said once in the answer too (an agent behind MCP or OpenClaw sees no log), then no more.
    assert any("the index was damaged" in n and "rebuilt from the Markdown files" in n for n in answer.notes or []), (
        answer.notes
    )
    assert not any("damaged" in n for n in run(m2.search, "dark roast coffee", min_score=0).notes or [])
    conn, _ = open_db(db, readonly=True)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 41
    conn.close()
    run(m2.aclose)


def test_status_recovers_a_damaged_index_too(tmp_path):
    ws = _ws(tmp_path, 3)
    m = _manager(tmp_path, ws)
    run(m.sync)
    run(m.aclose)
    m.db_path.write_bytes(b"\x00garbage" * 100)
    st = run(_manager(tmp_path, ws).status)
    assert st.files == 4 and st.index["exists"]


def test_hits_from_files_changed_after_indexing_are_flagged_stale(tmp_path):
    ws = _ws(tmp_path, 3)
    m = _manager(tmp_path, ws, sync={"onSearch": False})
    run(m.sync)
    answer = run(m.search, "dark roast coffee", min_score=0)
    assert answer.results[0].stale is None
    (ws / "MEMORY.md").write_text("# Memory\n\n- the user likes dark roast coffee, and now tea too\n")
    answer = run(m.search, "dark roast coffee", min_score=0)
    assert answer.results[0].path == "MEMORY.md" and answer.results[0].stale is True
    run(m.aclose)


def test_search_reads_its_own_writes_and_respects_a_time_budget(tmp_path):
    ws = _ws(tmp_path, 3)

    class SlowProvider(FakeEmbeddingProvider):
        delay = 0.0

        async def embed_documents(self, texts):
            await anyio.sleep(self.delay)  # indexing is slow; queries (embed_query) are not
            return await super().embed_documents(texts)

        async def embed_query(self, text):
            return (await FakeEmbeddingProvider.embed_documents(self, [text]))[0]

    provider = SlowProvider()
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=provider)
    run(m.sync)
    (ws / "memory" / "2026-11-21.md").write_text("- decided to adopt Renovate for dependency updates\n")
    m.mark_dirty()  # what the watcher does on a change
    answer = run(m.search, "Renovate dependency updates", min_score=0)
    assert answer.results[0].path == "memory/2026-11-21.md" and not answer.sync_pending

    provider.delay = 3.0
    m.search_sync_budget_s = 0.3
    (ws / "memory" / "2026-11-22.md").write_text("- a note that takes long to embed: zeppelin\n")
    m.mark_dirty()

    async def search_then_wait():
        answer = await m.search("zeppelin", min_score=0)
        await anyio.sleep(3.5)  # the sync goes on in its thread and lands
        return answer, await m.search("zeppelin", min_score=0)

    first, later = anyio.run(search_then_wait)
    # Answered before the slow sync finished, and said so; the note arrives once it lands.
    assert first.sync_pending and "memory/2026-11-22.md" not in [h.path for h in first.results]
    assert later.results and later.results[0].path == "memory/2026-11-22.md"
    run(m.aclose)




def test_session_transcripts_are_searchable_with_jsonl_line_numbers(tmp_path):
    ws = _ws(tmp_path, 2)
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    write_transcript(
        sessions / "abc.jsonl",
        [
            ("user", "what is the wifi password for the cabin"),
            ("assistant", "It is on the fridge, token: sk-abcdefghijklmnopqrstuvwx"),
        ],
    )
    (sessions / "abc.jsonl.bak.1").write_text("ignored")
    settings = make_settings(tmp_path, ws, {"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}})
    m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    run(m.sync)
    answer = run(m.search, "wifi password cabin", min_score=0)
    hit = answer.results[0]
    assert (hit.path, hit.source, hit.start_line, hit.end_line) == ("sessions/abc.jsonl", "sessions", 2, 4)
    assert "sk-abc" not in hit.snippet and "[redacted]" in hit.snippet
    st = run(m.status)
    assert st.source_counts["sessions"]["files"] == 1
    read = run(m.read, "sessions/abc.jsonl", 2, 3)  # memory_get of the hit: its messages, redacted
    assert read.text.startswith("User: what is the wifi password") and "sk-abc" not in read.text, read
    with pytest.raises(Exception, match="not allowed"):
        run(m.read, "sessions/abc.jsonl.bak.1")  # a backup is no transcript

    # A search-time sync never waits on transcripts; an explicit sync picks up their growth.
    write_transcript(
        sessions / "abc.jsonl",
        [
            ("user", "what is the wifi password for the cabin"),
            ("assistant", "fridge"),
            ("user", "and the boat key? under the mat"),
        ],
    )
    m.mark_dirty()
    assert "boat" not in " ".join(h.snippet for h in run(m.search, "boat key mat", min_score=0).results)
    run(m.sync)
    assert run(m.search, "boat key mat", min_score=0).results[0].path == "sessions/abc.jsonl"
    run(m.aclose)


def test_a_search_during_the_first_build_waits_for_it(tmp_path):
    # The index file exists (schema, no meta) while its first build runs: a search then answered
    # "none" with syncPending after its budget, as if there were nothing to find (seen over MCP,
    # whose first search races the server's start sync).
    ws = _ws(tmp_path, 3)

    class SlowProvider(FakeEmbeddingProvider):
        async def embed_documents(self, texts):
            await anyio.sleep(1.5)
            return await super().embed_documents(texts)

    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=SlowProvider())
    m.search_sync_budget_s = 0.3

    async def go():
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: m.sync(reason="start"))
            while not m.db_path.exists():
                await anyio.sleep(0.02)
            return await m.search("dark roast coffee", min_score=0)

    answer = anyio.run(go)
    assert answer.mode != "none" and answer.results and answer.results[0].path == "MEMORY.md"
    run(m.aclose)
