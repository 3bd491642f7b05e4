"""What is Qdrant's own: its settings checked by memsift, generations kept and dropped, processes
taking turns at the local folder, a server that does not answer (the builtin fallback, or a clear
error), the API key read from its variable and never shown, and the doors (the kit's `PluginDoors`):
the CLI with its resident helper, `parity --against qdrant`, MCP over stdio."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import anyio
import pytest

from memsift.engine.kit import BackendError, ConfigError
from memsift.engine.kit.testing import NOTES, PluginDoors, backend_of, open_manager, resolve_config, write_notes

pytest.importorskip(
    "memsift_qdrant", reason="the Qdrant plugin is not installed (pip install -e contrib/plugins/memsift-qdrant)"
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "ws")


def _settings(
    tmp_path: Path, ws: Path, qdrant: dict | None = None, provider: str = "none", environ: dict | None = None
):
    overrides = {"stateDir": str(tmp_path / "state"), "memory": {"backend": "qdrant", "qdrant": qdrant or {}},
                 "agents": {"defaults": {"memorySearch": {"provider": provider}}}}
    return resolve_config(overrides=overrides, workspace=ws, environ=environ or {}, cwd=tmp_path)


def _backend(manager):
    return backend_of(manager)  # below scope rules, the evidence ranker and the plugin guard


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


def test_its_own_settings_are_checked_by_memsift(tmp_path, ws):
    with pytest.raises(ConfigError, match=r"memory\.qdrant\.collectionPrefix"):
        open_manager(_settings(tmp_path, ws, {"collectionPrefix": "no spaces allowed"}))


def test_bm25_statistics_and_an_edit_are_a_step_of_the_published_generation(tmp_path, ws):
    manager = open_manager(_settings(tmp_path, ws, {"keepGenerations": 2}))
    store = _backend(manager).store

    async def go():
        try:
            first = await manager.sync()
            assert first.full_reindex and first.files_indexed == len(NOTES) and store.current().number == 1
            # BM25's average length is these short notes' own, not a full chunk's (300 words).
            assert 0 < store.current().meta["averageLength"] < 60
            assert (await manager.search("fig tree", min_score=0)).results[0].path == "memory/projects/garden.md"
            note = ws / "memory/projects/garden.md"
            note.write_text(note.read_text().replace("fig tree", "olive sapling"))
            step = await manager.sync()
            assert not step.full_reindex and step.files_indexed == 1 and step.files_unchanged == len(NOTES) - 1
            assert (await manager.search("fig tree", min_score=0, mode="keyword")).results == []
            found = await manager.search("olive sapling", min_score=0, mode="keyword")
            assert [h.path for h in found.results] == ["memory/projects/garden.md"]
            status = await manager.status()
            assert (
                status.backend == "qdrant" and status.files == len(NOTES) and status.index["qdrant"]["generation"] == 1
            )
        finally:
            await manager.aclose()

    anyio.run(go)
    untouched = [p for p in ws.rglob("*.md") if p.name != "garden.md"]  # the one this test edits
    assert untouched and all(p.read_text() == NOTES[str(p.relative_to(ws))] for p in untouched)


def test_processes_take_turns_at_the_local_folder(tmp_path, ws, monkeypatch):
    import memsift_qdrant.store as store_module

    monkeypatch.setattr(store_module, "LOCAL_LINGER_S", 0.0)  # each hands its turn over at once
    holder, waiter = (open_manager(_settings(tmp_path, ws)) for _ in range(2))  # two processes' managers
    anyio.run(holder.sync)
    held = threading.Event()

    def hold(seconds: float) -> None:
        with _backend(holder).store.client():  # another process at work in the folder
            held.set()
            time.sleep(seconds)

    async def search():
        return await waiter.search("fig tree", min_score=0)

    worker = threading.Thread(target=hold, args=(1.0,))
    worker.start()
    held.wait()
    started = time.monotonic()
    answer = anyio.run(search)  # waits its turn, then answers
    assert time.monotonic() - started >= 0.5 and answer.results[0].path == "memory/projects/garden.md"
    worker.join()
    monkeypatch.setattr(store_module, "LOCAL_WAIT_S", 0.3)
    held.clear()
    worker = threading.Thread(target=hold, args=(2.0,))
    worker.start()
    held.wait()
    with pytest.raises(BackendError, match="stayed in use by another memsift process .* run a Qdrant server"):
        anyio.run(search)
    worker.join()
    for m in (holder, waiter):
        anyio.run(m.aclose)


def test_a_server_that_does_not_answer_falls_back_to_builtin_or_says_so(tmp_path, ws):
    url = f"http://127.0.0.1:{_closed_port()}"
    guarded = open_manager(_settings(tmp_path, ws, {"url": url, "fallback": "builtin", "timeoutS": 2}))

    async def fallback():
        try:
            return await guarded.search("zeppelin museum", min_score=0)
        finally:
            await guarded.aclose()

    answer = anyio.run(fallback)
    assert answer.backend == "builtin" and answer.fallback.from_ == "qdrant"
    assert {h.path for h in answer.results} >= {"memory/2026-11-20.md", "memory/2026-11-24.md"}
    bare = open_manager(_settings(tmp_path / "b", ws, {"url": url, "timeoutS": 2}))

    async def fails():
        try:
            await bare.search("zeppelin museum")
        finally:
            await bare.aclose()

    with pytest.raises(BackendError, match=f"Qdrant at {url} failed"):
        anyio.run(fails)


def test_the_api_key_comes_from_its_variable_and_is_never_shown(tmp_path, ws, monkeypatch):
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.delenv("MEMSIFT_TEST_QDRANT_KEY", raising=False)
    manager = open_manager(_settings(tmp_path, ws, {"url": url, "apiKeyEnv": "MEMSIFT_TEST_QDRANT_KEY"}))
    with pytest.raises(BackendError, match="MEMSIFT_TEST_QDRANT_KEY is not set"):
        anyio.run(manager.sync)
    anyio.run(manager.aclose)
    monkeypatch.setenv("MEMSIFT_TEST_QDRANT_KEY", "qd-secret-canary-0042")
    manager = open_manager(_settings(tmp_path, ws, {"url": url, "apiKeyEnv": "MEMSIFT_TEST_QDRANT_KEY", "timeoutS": 2}))
    with pytest.raises(BackendError) as err:
        anyio.run(manager.sync)
    anyio.run(manager.aclose)
    assert "qd-secret-canary" not in str(err.value) and url in str(err.value)


class TestQdrantDoors(PluginDoors):
    backend = "qdrant"


def test_a_rebuild_never_takes_a_generation_another_writer_made(tmp_path, ws, monkeypatch):
    """Gateways rebuilding one agent at once on a server (a fleet after an upgrade) each looked up the
    next generation number, found the same, and each deleted and made its collections again: one
    emptied the generation the other was filling. A number taken between looking and making is now
    left to its writer; this sync takes the next one."""
    from qdrant_client import models

    manager = open_manager(_settings(tmp_path, ws))
    store = _backend(manager).store
    anyio.run(manager.sync)
    looked_up = store.next_generation

    def another_writer_first() -> int:
        number = looked_up()
        if number == 2:  # another writer makes generation 2 and starts filling it, right after this lookup
            with store.client() as c:
                c.create_collection(store.chunks(2), vectors_config={})
                c.create_collection(store.files(2), vectors_config={})
                c.upsert(store.files(2), points=[models.PointStruct(id=7, vector={}, payload={"path": "theirs.md"})])
        return number

    monkeypatch.setattr(store, "next_generation", another_writer_first)
    report = anyio.run(lambda: manager.sync(force=True))
    assert report.full_reindex and store.current().number == 3, store.current()
    assert [p.payload["path"] for p in store.scroll(store.files(2))] == ["theirs.md"]  # theirs, untouched
    assert (anyio.run(lambda: manager.search("fig tree", min_score=0))).results[0].path == "memory/projects/garden.md"
    anyio.run(manager.aclose)


def test_a_rebuild_published_after_a_later_one_leaves_the_later_one_in_place(tmp_path, ws, monkeypatch):
    """Two writers' rebuilds: the one that claimed its generation later published first. The earlier
    one then moved the pointer back to its own, lower generation; it keeps the later one."""
    from memsift_qdrant.store import Generation

    manager = open_manager(_settings(tmp_path, ws))
    store = _backend(manager).store
    anyio.run(manager.sync)
    claimed = store.claim

    def another_writer_claims_and_publishes_later(dims):
        ours = claimed(dims)
        theirs = claimed(dims)  # the other writer's rebuild, claimed after ours, published before ours ends
        store.publish(Generation(theirs, {**store.current().meta, "writer": "theirs"}))
        return ours

    monkeypatch.setattr(store, "claim", another_writer_claims_and_publishes_later)
    report = anyio.run(lambda: manager.sync(force=True))
    assert report.full_reindex and store.current().number == 3 and store.current().meta["writer"] == "theirs"
    anyio.run(manager.aclose)
