"""The backend contract: what every memsift backend keeps, as pytest tests a backend's author runs.

    # tests/test_contract.py of a plugin package
    from memsift.engine.testing import BackendContract

    class TestMyBackend(BackendContract):
        backend = "mybackend"

        def memory_config(self, tmp_path):
            return {"backend": "mybackend", "mybackend": {"fallback": "none"}}

Each test writes a small workspace of Markdown notes, opens the backend the way every door does
(`open_manager`: registry, fallback policy, evidence ranker, scope rules) and checks one behaviour:
files are the truth (never written, deletions and edits seen), a sync with nothing changed does
nothing, a forced rebuild never answers from an empty index, every hit reads back through `read`
with its citation, modes and `since`/`until` say what they did, `explain` explains, `status` tells,
scope rules refuse before the backend runs, and reads stay inside memory. memsift runs it against
its own backends (tests/backends/test_contract.py).

A backend that falls back to another one must be configured without its fallback here: the
contract is about the backend's own answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import unicodedata
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import pytest

from ..compose.factory import open_manager, resolve_config
from ..errors import MemsiftError
from ..manager import SearchManager
from ..results import SearchAnswer
from .embedder import LoopbackEmbedder

__all__ = ["BackendContract", "NOTES", "GROUP_CHAT"]

# The workspace every contract test starts from: two dated daily logs, an evergreen file, a topic note.
NOTES = {
    "MEMORY.md": "# Memory\n\n- The staging deploy key lives in the vault under ops/staging.\n"
                 "- Preferred editor: Helix with the catppuccin theme.\n",
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Flew to Lisbon for the zeppelin museum conference.\n"
                            "- Booked a small hotel near Alfama.\n",
    "memory/2026-11-24.md": "# 2026-11-24\n\n- Back from Lisbon; wrote up the zeppelin museum notes.\n"
                            "- Renewed the TLS certificate for the status page.\n",
    "memory/projects/garden.md": "# Garden project\n\nPlanted tomatoes, basil and a fig tree along the south wall.\n\n"
                                 "The drip irrigation runs at dawn for twenty minutes.\n",
}
GROUP_CHAT = "agent:main:discord:group:42"  # a group chat: refused by the default scope rules


def _hashes(workspace: Path) -> dict[str, str]:
    return {str(p.relative_to(workspace)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(workspace.rglob("*")) if p.is_file()}


def _paths(answer: SearchAnswer) -> list[str]:
    return [h.path for h in answer.results]


def _found_by_meaning(answer: SearchAnswer, path: str, provider: str) -> None:
    """A vector search's answer: `path` first, the question embedded by `provider`, nothing degraded."""
    assert answer.provider == provider and answer.degraded.vector is None, (answer.provider, answer.degraded)
    assert _paths(answer)[:1] == [path], _paths(answer)


class BackendContract:
    """Subclass as `Test…` and set `backend`; override `memory_config` for the backend's settings
    (a DSN, a command, `fallback: "none"`) and `memory_search` for the agent's (the embedding
    provider: the bundled local model by default, offline)."""

    backend: str = ""
    provider: str = "local"
    # False for a backend that does not embed with memsift's provider: QMD's own models, keyword only
    uses_memsift_embeddings: bool = True
    # True: the backend must index session transcripts; None: checked where it declares it does
    indexes_sessions: bool | None = None
    # False for a backend whose keyword index is not memsift's text (QMD's): "tromso" does not find "Tromsø"
    # there, nor a question about open tasks a note's "- [ ]" boxes
    indexes_memsift_text: bool = True

    # --- what a backend's test module may override ----------------------------------------------

    def memory_config(self, tmp_path: Path) -> dict[str, Any]:
        """The config's `memory` section for this backend."""
        return {"backend": self.backend}

    def memory_search(self, tmp_path: Path) -> dict[str, Any]:
        return {"provider": self.provider}

    # --- plumbing -------------------------------------------------------------------------------

    @pytest.fixture
    def workspace(self, tmp_path: Path) -> Path:
        ws = tmp_path / "workspace"
        for rel, text in NOTES.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text, encoding="utf-8")
        return ws

    def open(self, tmp_path: Path, workspace: Path, memory_search: dict[str, Any] | None = None,
             memory: dict[str, Any] | None = None) -> SearchManager:
        if not self.backend:
            raise TypeError(f"{type(self).__name__} must set `backend` (the registered backend's name)")
        overrides = {"stateDir": str(tmp_path / "state"), "memory": memory or self.memory_config(tmp_path),
                     "agents": {"defaults": {"memorySearch": memory_search or self.memory_search(tmp_path)}}}
        settings = resolve_config(overrides=overrides, workspace=workspace, environ={}, cwd=tmp_path)
        return open_manager(settings)

    def run(self, tmp_path: Path, workspace: Path, body: Callable[[SearchManager], Awaitable[None]]) -> None:
        """Open the backend, sync it, run `body` with it, close it: all in one event loop."""

        async def main() -> None:
            manager = self.open(tmp_path, workspace)
            try:
                await manager.sync(reason="contract")
                await body(manager)
            finally:
                await manager.aclose()

        anyio.run(main)

    def assert_own_answer(self, answer: SearchAnswer) -> None:
        assert answer.fallback is None, f"{self.backend} fell back: {answer.fallback}; configure it without a fallback"
        assert answer.unavailable is None, answer.unavailable
        assert answer.backend == self.backend

    async def keyword(self, manager: SearchManager, query: str, **kw: Any) -> SearchAnswer:
        answer = await manager.search(query, mode="keyword", min_score=0, **kw)
        self.assert_own_answer(answer)
        return answer

    # --- the contract ---------------------------------------------------------------------------

    def test_finds_a_note_and_never_writes_one(self, tmp_path: Path, workspace: Path) -> None:
        before = _hashes(workspace)

        async def body(m: SearchManager) -> None:
            answer = await self.keyword(m, "fig tree irrigation")
            assert answer.results, "a word of one note finds it"
            assert answer.results[0].path == "memory/projects/garden.md"
            assert (await m.search("fig tree", min_score=0)).results  # the configured mode as well

        self.run(tmp_path, workspace, body)
        assert _hashes(workspace) == before, "indexing and searching left the workspace's files as they were"

    def test_a_deleted_note_leaves_the_index(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            assert "memory/projects/garden.md" in _paths(await self.keyword(m, "fig tree"))
            files = (await m.status()).files
            assert files is not None, "status() must count the indexed files"
            (workspace / "memory/projects/garden.md").unlink()
            await m.sync(reason="contract")
            assert "memory/projects/garden.md" not in _paths(await self.keyword(m, "fig tree"))
            assert (await m.status()).files == files - 1

        self.run(tmp_path, workspace, body)

    def test_an_edited_note_is_found_as_it_is_now_and_an_idle_sync_does_nothing(self, tmp_path: Path,
                                                                               workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            note = workspace / "memory/projects/garden.md"
            note.write_text(note.read_text().replace("fig tree", "olive sapling"), encoding="utf-8")
            await m.sync(reason="contract")
            assert _paths(await self.keyword(m, "olive sapling"))[:1] == ["memory/projects/garden.md"]
            assert "memory/projects/garden.md" not in _paths(await self.keyword(m, "fig"))
            idle = await m.sync(reason="contract")
            assert idle.files_indexed == 0 and idle.files_removed == 0, f"nothing changed, yet: {idle}"

        self.run(tmp_path, workspace, body)

    def test_a_note_saved_again_unchanged_keeps_its_chunks(self, tmp_path: Path, workspace: Path) -> None:
        """An editor's save, `touch` or a sync tool gives a note a new time, not new text; a note
        deleted in the same sync must not take the other's chunks with it."""
        async def body(m: SearchManager) -> None:
            before = await m.status()
            note = workspace / "memory/projects/garden.md"
            st = note.stat()
            os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
            await m.sync(reason="contract")
            assert _paths(await self.keyword(m, "fig tree"))[:1] == ["memory/projects/garden.md"], "touched"
            after = await m.status()
            assert (after.files, after.chunks) == (before.files, before.chunks), (before, after)
            os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns + 9_000_000_000))
            (workspace / "memory/2026-11-20.md").unlink()
            await m.sync(reason="contract")
            assert _paths(await self.keyword(m, "fig tree"))[:1] == ["memory/projects/garden.md"], "touched + deleted"
            assert "memory/2026-11-20.md" not in _paths(await self.keyword(m, "Alfama hotel"))
            idle = await m.sync(reason="contract")
            assert idle.files_indexed == 0 and idle.files_removed == 0, f"nothing changed, yet: {idle}"

        self.run(tmp_path, workspace, body)

    def test_a_same_size_edit_in_the_same_clock_tick_is_indexed(self, tmp_path: Path, workspace: Path) -> None:
        """Where a filesystem's clock ticks coarsely (FAT: 2 s, HFS+: 1 s), a note rewritten to the same
        size within the tick in which a sync read it keeps its mtime and size: the next sync must
        still index the new text (`files.sync.sort_files` reads such a note again)."""
        async def body(m: SearchManager) -> None:
            note = workspace / "memory/projects/garden.md"
            tick = time.time_ns() + 60_000_000_000  # a tick not over yet, however loaded the machine is
            os.utime(note, ns=(tick, tick))
            await m.sync(reason="contract")
            note.write_text(note.read_text(encoding="utf-8").replace("fig tree", "elm bush"), encoding="utf-8")
            os.utime(note, ns=(tick, tick))  # the same size, and the same mtime as the coarse clock gives
            await m.sync(reason="contract")
            assert _paths(await self.keyword(m, "elm bush"))[:1] == ["memory/projects/garden.md"], "rewritten"
            assert "memory/projects/garden.md" not in _paths(await self.keyword(m, "fig tree")), "the old text"

        self.run(tmp_path, workspace, body)

    def test_a_manager_kept_open_finds_what_was_written_after_its_first_search(self, tmp_path: Path,
                                                                                workspace: Path) -> None:
        """A gateway keeps one manager (the Python API) and never calls sync: each search sees the
        notes as they are when it starts, however soon after they were written."""
        async def main() -> None:
            m = self.open(tmp_path, workspace)
            try:
                assert _paths(await self.keyword(m, "fig tree"))[:1] == ["memory/projects/garden.md"]
                new = workspace / "memory/2026-11-26.md"
                new.write_text("# 2026-11-26\n\n- Planted a quince by the shed.\n", encoding="utf-8")
                assert _paths(await self.keyword(m, "quince"))[:1] == ["memory/2026-11-26.md"], "a new note"
                garden = workspace / "memory/projects/garden.md"
                garden.write_text(garden.read_text().replace("fig tree", "olive sapling"), encoding="utf-8")
                assert _paths(await self.keyword(m, "olive sapling"))[:1] == ["memory/projects/garden.md"], "an edit"
                new.unlink()
                assert "memory/2026-11-26.md" not in _paths(await self.keyword(m, "quince")), "a deleted note"
            finally:
                await m.aclose()

        anyio.run(main)

    def test_a_forced_rebuild_never_answers_from_an_empty_index(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            answers: list[SearchAnswer] = []
            done = anyio.Event()

            async def rebuild() -> None:
                try:
                    await m.sync(force=True, reason="contract")
                finally:
                    done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(rebuild)
                while not done.is_set() or not answers:
                    answers.append(await self.keyword(m, "zeppelin museum"))
                    await anyio.sleep(0)
            for answer in answers:
                assert {"memory/2026-11-20.md", "memory/2026-11-24.md"} <= set(_paths(answer)), \
                    "a search during a rebuild answers from the old index or the new one, never from half of one"
            assert set(_paths(await self.keyword(m, "zeppelin museum"))) >= {
                "memory/2026-11-20.md",
                "memory/2026-11-24.md",
            }

        self.run(tmp_path, workspace, body)

    def test_every_hit_reads_back_through_read_with_its_citation(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            answer = await self.keyword(m, "Lisbon zeppelin")
            assert answer.results
            for hit in answer.results:
                lines = (workspace / hit.path).read_text(encoding="utf-8").split("\n")
                assert 1 <= hit.start_line <= hit.end_line <= len(lines), (
                    f"{hit.path}#L{hit.start_line}-L{hit.end_line}"
                )
                got = await m.read(hit.path, hit.start_line, hit.end_line - hit.start_line + 1)
                assert got.text == "\n".join(lines[hit.start_line - 1 : hit.end_line])
                shown = [ln.strip() for ln in hit.snippet.split("\n") if ln.strip() and not ln.startswith("Source: ")]
                assert all(ln.rstrip(".…") in got.text or ln.strip("…") in got.text for ln in shown), \
                    f"the snippet {hit.snippet!r} is text of the lines it cites"
                if hit.citation:
                    want = f"{hit.path}#L{hit.start_line}" + (
                        f"-L{hit.end_line}" if hit.end_line != hit.start_line else ""
                    )
                    assert hit.citation == want

        self.run(tmp_path, workspace, body)

    def test_each_mode_says_what_ran(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            assert (await self.keyword(m, "fig tree")).results
            for mode in ("vector", "hybrid"):
                answer = await m.search("plants along the garden wall", mode=mode, min_score=0)
                # A backend that cannot search vectors here (QMD without its models) says so.
                said = (
                    answer.mode != "none"
                    or answer.degraded.vector
                    or answer.fallback
                    or answer.notes
                    or answer.unavailable
                )
                assert said, f"mode {mode}: the answer says neither what ran nor why nothing did"
            with pytest.raises((ValueError, MemsiftError)):
                await m.search("fig", mode="telepathy")

        self.run(tmp_path, workspace, body)

    def test_since_and_until_keep_only_those_days(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            assert set(_paths(await self.keyword(m, "Lisbon zeppelin"))) >= {
                "memory/2026-11-20.md",
                "memory/2026-11-24.md",
            }
            later = await self.keyword(m, "Lisbon zeppelin", since="2026-11-22")
            assert set(_paths(later)) == {"memory/2026-11-24.md"} and later.time_filter
            earlier = await self.keyword(m, "Lisbon zeppelin", until="2026-11-21")
            assert set(_paths(earlier)) == {"memory/2026-11-20.md"}
            assert not (await self.keyword(m, "Lisbon zeppelin", since="2026-11-21", until="2026-11-23")).results
            # The open bounds scripts send: every day kept, and no overflow of the modification-time range.
            wide = await self.keyword(m, "Lisbon zeppelin", since="0001-01-01", until="9999-12-31")
            assert set(_paths(wide)) == set(_paths(await self.keyword(m, "Lisbon zeppelin")))
            with pytest.raises((ValueError, MemsiftError)):
                await m.search("Lisbon", since="the day after never")

        self.run(tmp_path, workspace, body)

    def test_explain_says_why_each_hit_is_there(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            plain = await self.keyword(m, "zeppelin museum")
            assert plain.results and all(h.explain is None and h.details is None for h in plain.results)
            explained = await self.keyword(m, "zeppelin museum", explain=True)
            assert [h.path for h in explained.results] == [h.path for h in plain.results]
            for hit in explained.results:
                assert hit.explain is not None or hit.details is not None, f"{hit.path}: no explanation"
                if hit.explain is not None:
                    assert hit.explain.final_score == pytest.approx(hit.score, abs=1e-3) or hit.ranker is not None
                    assert hit.explain.keyword_score is not None, "a keyword search's hit has its keyword score"

        self.run(tmp_path, workspace, body)

    def test_vectors_a_provider_outage_left_out_are_made_by_the_next_sync(self, tmp_path: Path,
                                                                          workspace: Path) -> None:
        """The provider fails while new notes are indexed: each is found by keyword at once and
        the sync's report says why it has no vector; the first sync after the provider is back makes
        them, no file changed, also for a note only touched meanwhile (a new time, the same text; a
        backend that never did would not find the notes by meaning)."""
        if not self.uses_memsift_embeddings:
            pytest.skip(f"{self.backend} does not embed with memsift's provider")
        note, touched = workspace / "memory/2026-11-26.md", workspace / "memory/2026-11-27.md"

        async def main() -> None:
            with LoopbackEmbedder() as embedder:
                m = self.open(tmp_path, workspace, {"provider": "openai", "fallback": "none", "remote": {
                    "baseUrl": embedder.base_url, "apiKey": "contract-key"}})
                try:
                    assert (await m.sync(reason="contract")).vectors_error is None
                    note.write_text("# 2026-11-26\n\n- Adopted a greyhound named Pixel from the shelter.\n",
                                    encoding="utf-8")
                    touched.write_text("# 2026-11-27\n\n- Repotted the lemon tree on the balcony.\n",
                                       encoding="utf-8")
                    embedder.down = True
                    failed = await m.sync(reason="contract")
                    assert failed.files_indexed == 2 and "embedder is down" in (failed.vectors_error or ""), failed
                    assert _paths(await self.keyword(m, "greyhound Pixel"))[:1] == ["memory/2026-11-26.md"]
                    embedder.down = False
                    st = touched.stat()
                    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
                    healed = await m.sync(reason="contract")
                    assert healed.files_indexed == 0 and healed.chunks_embedded >= 2, healed
                    assert healed.vectors_error is None, healed
                    for question, path in (("adopted greyhound pixel shelter", "memory/2026-11-26.md"),
                                           ("repotted lemon tree balcony", "memory/2026-11-27.md")):
                        answer = await m.search(question, mode="vector", min_score=0)
                        self.assert_own_answer(answer)
                        assert _paths(answer)[:1] == [path], (answer.degraded, _paths(answer))
                finally:
                    await m.aclose()

        anyio.run(main)

    def test_an_index_of_a_remote_provider_serves_the_next_process_as_built(self, tmp_path: Path,
                                                                            workspace: Path) -> None:
        """A remote provider tells its vectors' size only once it answers: the index is built with
        room for them, and a later process (a new manager, whose provider knows nothing yet) syncs
        nothing and answers by vector, no rebuild (LanceDB once dropped every vector of such a build
        and rebuilt it at the next sync; Qdrant's build failed). Its forced rebuild asks the provider
        for nothing: the chunks did not change, their vectors are kept (a paid API is not paid twice)."""
        if not self.uses_memsift_embeddings:
            pytest.skip(f"{self.backend} does not embed with memsift's provider")

        async def main() -> None:
            with LoopbackEmbedder() as embedder:
                remote = {"provider": "openai", "fallback": "none", "remote": {
                    "baseUrl": embedder.base_url, "apiKey": "contract-key"}}
                memory = self.memory_config(tmp_path)  # one store for both (a test's Postgres makes a database)
                for process in ("first", "second"):
                    m = self.open(tmp_path, workspace, remote, memory)
                    try:
                        report = await m.sync(reason="contract")
                        if process == "second":
                            assert not report.full_reindex and report.chunks_embedded == 0, report
                            assert (await m.status()).index.get("rebuildNeeded") is None
                            asked = embedder.requests
                            forced = await m.sync(force=True, reason="contract")
                            assert forced.full_reindex and forced.chunks_embedded == 0, forced
                            assert embedder.requests == asked, "a forced rebuild embedded unchanged chunks again"
                        answer = await m.search("drip irrigation at dawn", mode="vector", min_score=0)
                        self.assert_own_answer(answer)
                        assert answer.degraded.vector is None, answer.degraded
                        assert _paths(answer)[:1] == ["memory/projects/garden.md"], (process, _paths(answer))
                    finally:
                        await m.aclose()

        anyio.run(main)

    def test_a_first_index_while_the_provider_is_down_answers_by_keyword(self, tmp_path: Path,
                                                                        workspace: Path) -> None:
        """No index yet and the provider down (no fallback): the notes are indexed for keyword search
        at once, the report says why they have no vectors, status counts them, and the first sync
        after the provider is back makes them (Postgres once built nothing, and every search failed)."""
        if not self.uses_memsift_embeddings:
            pytest.skip(f"{self.backend} does not embed with memsift's provider")

        async def main() -> None:
            with LoopbackEmbedder() as embedder:
                embedder.down = True
                asked = {"provider": "openai", "fallback": "none", "remote": {
                    "baseUrl": embedder.base_url, "apiKey": "contract-key"}}
                memory = self.memory_config(tmp_path)  # one store for every process

                async def error_said_elsewhere() -> str | None:  # `memsift status` after a gateway's sync
                    other = self.open(tmp_path, workspace, asked, memory)
                    try:
                        return (await other.status()).index.get("lastEmbedError")
                    finally:
                        await other.aclose()

                m = self.open(tmp_path, workspace, asked, memory)
                try:
                    first = await m.sync(reason="contract")
                    assert first.files_indexed == len(NOTES), first
                    assert "embedder is down" in (first.vectors_error or ""), first
                    assert _paths(await self.keyword(m, "drip irrigation"))[:1] == ["memory/projects/garden.md"]
                    st = await m.status()
                    assert st.files == len(NOTES) and "embedder is down" in (st.index.get("lastEmbedError") or "")
                    assert "embedder is down" in (await error_said_elsewhere() or "")
                    embedder.down = False
                    healed = await m.sync(reason="contract")
                    assert healed.vectors_error is None and healed.chunks_embedded >= len(NOTES), healed
                    answer = await m.search("drip irrigation at dawn", mode="vector", min_score=0)
                    self.assert_own_answer(answer)
                    assert answer.degraded.vector is None, answer.degraded
                    assert _paths(answer)[:1] == ["memory/projects/garden.md"], _paths(answer)
                    assert await error_said_elsewhere() is None
                    embedder.down = True  # and an incremental sync's failure, said the same way
                    (workspace / "memory/2026-11-27.md").write_text("# Nov 27\n\nThe hives need a new frame.\n")
                    later = await m.sync(reason="contract")
                    assert not later.full_reindex and "embedder is down" in (later.vectors_error or ""), later
                    assert "embedder is down" in (await error_said_elsewhere() or "")
                    embedder.down = False
                    assert (await m.sync(reason="contract")).vectors_error is None
                    assert await error_said_elsewhere() is None
                finally:
                    await m.aclose()

        anyio.run(main)

    def test_the_configured_fallback_embeds_when_the_provider_fails(self, tmp_path: Path, workspace: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
        """`memorySearch.fallback` as OpenClaw keeps it: the provider fails during a sync, the index
        is built with the fallback, and status and answers say so. Another process keeps answering
        with the fallback's vectors (no rebuild; a watcher's sync while the provider is still down
        rebuilds nothing either), and the first watcher's sync once it answers again returns to it
        (LanceDB, Qdrant and Postgres once left every chunk without a vector instead)."""
        if not self.uses_memsift_embeddings:
            pytest.skip(f"{self.backend} does not embed with memsift's provider")
        from ..compose.provider_choice import ProviderChoice

        monkeypatch.setattr(ProviderChoice, "retry_configured_s", 0.0)  # a host asks at every sync here

        async def main() -> None:
            with LoopbackEmbedder() as embedder:
                embedder.down = True
                asked = {"provider": "openai", "fallback": "local", "remote": {
                    "baseUrl": embedder.base_url, "apiKey": "contract-key"}}
                memory = self.memory_config(tmp_path)  # one store for both processes
                m = self.open(tmp_path, workspace, asked, memory)
                try:
                    report = await m.sync(reason="contract")
                    assert report.vectors_error is None and report.chunks_embedded >= len(NOTES), report
                    # built once, with the fallback (an index without vectors was published first)
                    assert "provider" not in (report.reindex_cause or ""), report.reindex_cause
                    st = await m.status()
                    assert st.provider == "local" and st.requested_provider == "openai", (st.provider, st.fallback)
                    assert st.fallback is not None and st.fallback.from_ == "openai", st.fallback
                    assert "embedder is down" in st.fallback.reason
                    again = await m.sync(reason="contract")  # `memsift index` again, the provider still down
                    assert not again.full_reindex and again.chunks_embedded == 0, again  # each rebuilt it all
                    assert again.fallback is not None and again.vectors_error is None, again
                finally:
                    await m.aclose()
                later = self.open(tmp_path, workspace, asked, memory)  # the provider still down
                try:
                    answer = await later.search("drip irrigation at dawn", mode="vector", min_score=0)
                    assert answer.backend == self.backend and answer.provider == "local", answer.provider
                    assert answer.fallback is not None and answer.fallback.from_ == "openai", answer.fallback
                    assert answer.degraded.vector is None, answer.degraded
                    assert _paths(answer)[:1] == ["memory/projects/garden.md"], _paths(answer)
                    assert (await later.status()).index.get("rebuildNeeded") is None
                    still = await later.sync(reason="watch")  # asks the provider, which still fails
                    assert not still.full_reindex and (await later.status()).fallback is not None, still
                    embedder.down = False
                    back = await later.sync(reason="watch")
                    assert back.full_reindex and back.vectors_error is None, back
                    answer = await later.search("drip irrigation at dawn", mode="vector", min_score=0)
                    self.assert_own_answer(answer)
                    _found_by_meaning(answer, "memory/projects/garden.md", "openai")
                finally:
                    await later.aclose()

        anyio.run(main)

    def test_a_running_process_follows_the_index_another_rebuilt_with_the_fallback(self, tmp_path: Path,
                                                                                  workspace: Path) -> None:
        """Two processes on one index (a gateway's helper and `memsift index`, a fleet on one
        database): when the other one rebuilds it with the fallback, the running one searches it
        with the fallback at once (its next question embedded by the fallback, the new note found
        by meaning), and follows it back once the other returns to the configured provider."""
        if not self.uses_memsift_embeddings:
            pytest.skip(f"{self.backend} does not embed with memsift's provider")
        note = workspace / "memory/2026-11-26.md"

        async def main() -> None:
            with LoopbackEmbedder() as embedder:
                asked = {"provider": "openai", "fallback": "local", "remote": {
                    "baseUrl": embedder.base_url, "apiKey": "contract-key"}}
                memory = self.memory_config(tmp_path)
                running = self.open(tmp_path, workspace, asked, memory)

                async def synced_elsewhere() -> Any:  # `memsift index` run beside the running process
                    other = self.open(tmp_path, workspace, asked, memory)
                    try:
                        return await other.sync(reason="contract")
                    finally:
                        await other.aclose()

                try:
                    await running.sync(reason="contract")
                    assert (await running.search("drip irrigation", mode="vector", min_score=0)).provider == "openai"
                    embedder.down = True
                    note.write_text("# 2026-11-26\n\n- Adopted a greyhound named Pixel from the shelter.\n",
                                    encoding="utf-8")
                    assert (await synced_elsewhere()).vectors_error is None  # with the fallback
                    answer = await running.search("adopted greyhound pixel shelter", mode="vector", min_score=0)
                    assert answer.fallback is not None, answer.provider
                    _found_by_meaning(answer, "memory/2026-11-26.md", "local")
                    embedder.down = False
                    assert (await synced_elsewhere()).full_reindex  # back to the configured provider
                    answer = await running.search("adopted greyhound pixel shelter", mode="vector", min_score=0)
                    self.assert_own_answer(answer)
                    _found_by_meaning(answer, "memory/2026-11-26.md", "openai")
                finally:
                    await running.aclose()

        anyio.run(main)

    def test_session_transcripts_are_searched_as_on_builtin(self, tmp_path: Path, workspace: Path) -> None:
        """A backend that indexes session transcripts (`IndexesSessions`; with `sources: ["memory",
        "sessions"]`): a hit is `sessions/<name>.jsonl` at its JSONL lines, secrets redacted; a
        search's sync never waits on a transcript's growth (nor drops it), a transcript sync reads
        it; with sessions no longer a source the next sync removes them (LanceDB and Qdrant
        indexed Markdown only), each dated on the user's day (`query.time.timezone`: it was this
        machine's)."""
        from ..compose.wrapped import declaring
        from ..manager import IndexesSessions

        sessions = tmp_path / "state" / "agents" / "main" / "sessions"
        sessions.mkdir(parents=True)
        transcript = sessions / "abc.jsonl"

        def write(turns: list[tuple[str, str]]) -> None:
            lines = [json.dumps({"type": "session", "id": "abc"})]
            for role, text in turns:
                lines.append(json.dumps({"type": "message", "message": {"role": role, "content": text,
                                                                        "timestamp": 1_700_000_000_000}}))
                lines.append(json.dumps({"type": "tool", "name": "noise"}))
            transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")

        write([("user", "what is the wifi password for the cabin"),
               ("assistant", "It is on the fridge, token: sk-abcdefghijklmnopqrstuvwx")])
        archived = "old.jsonl.reset.2026-11-01T10-00-00.000Z"  # a reset chat's archive (its hits were dropped)
        (sessions / archived).write_text(json.dumps({"type": "message", "message": {
            "role": "user", "content": "where did we park the red kayak"}}) + "\n", encoding="utf-8")
        # The user's zone, UTC+14: the transcript's moment (2023-11-14 22:13 UTC) is the user's 15 November
        with_sessions = {**self.memory_search(tmp_path), "sources": ["memory", "sessions"],
                         "experimental": {"sessionMemory": True}, "query": {"time": {"timezone": "Pacific/Kiritimati"}}}

        async def main() -> None:
            m = self.open(tmp_path, workspace, with_sessions)
            try:
                indexing = declaring(m, IndexesSessions)
                if indexing is None or not indexing.indexes_sessions:
                    assert not self.indexes_sessions, f"{self.backend} does not declare IndexesSessions"
                    pytest.skip(f"{self.backend} does not index session transcripts itself")
                report = await m.sync(reason="contract")
                assert report.files_indexed == len(NOTES) + 2, report
                hit = (await self.keyword(m, "wifi password cabin")).results[0]
                assert (hit.path, hit.source, hit.start_line, hit.end_line) == ("sessions/abc.jsonl", "sessions", 2, 4)
                assert "sk-abc" not in hit.snippet and "[redacted]" in hit.snippet, hit.snippet
                # memory_get of the hit: its messages at the JSONL's line numbers (line 3, a tool record, empty)
                got = await m.read(hit.path, hit.start_line, hit.end_line - hit.start_line + 1)
                assert got.text == ("User: what is the wifi password for the cabin\n\n"
                                    "Assistant: It is on the fridge, [redacted]") and got.total_lines == 5, got
                assert _paths(await self.keyword(m, "red kayak park"))[:1] == [f"sessions/{archived}"]
                status = await m.status()
                assert "sessions" in status.sources
                # Just synced: nothing pending (builtin counted every transcript as a memory file removed)
                assert not status.dirty and not status.index.get("pendingChanges"), status.index
                counts = status.source_counts  # `status --json` sourceCounts, as builtin's
                assert counts["sessions"] == {"files": 2, "chunks": 2}, counts
                assert counts["memory"]["files"] == len(NOTES) and counts["memory"]["chunks"] >= len(NOTES), counts
                that_day = await self.keyword(m, "wifi password cabin", since="2023-11-15", until="2023-11-15")
                assert _paths(that_day)[:1] == ["sessions/abc.jsonl"], _paths(that_day)  # dated on the user's day
                assert not (await self.keyword(m, "wifi password cabin", until="2023-11-14")).results
                write([("user", "what is the wifi password for the cabin"), ("assistant", "fridge"),
                       ("user", "and the boat key? under the mat")])
                mark = getattr(m, "mark_dirty", None)
                if mark is not None:
                    mark()
                before = await self.keyword(m, "boat key mat")  # its sync leaves transcripts as they were
                assert "boat" not in " ".join(h.snippet for h in before.results), _paths(before)
                assert _paths(await self.keyword(m, "wifi password cabin"))[:1] == ["sessions/abc.jsonl"]
                grown = await m.sync(reason="session-delta", include_sessions=True)  # type: ignore[call-arg]
                assert grown.files_indexed == 1, grown
                assert _paths(await self.keyword(m, "boat key mat"))[:1] == ["sessions/abc.jsonl"]
            finally:
                await m.aclose()
            m = self.open(tmp_path, workspace)  # sessions no longer a source
            try:
                await m.sync(reason="contract")
                assert all(h.source != "sessions" for h in (await self.keyword(m, "wifi password cabin")).results)
                status = await m.status()
                assert status.files == len(NOTES) and list(status.source_counts) == ["memory"], status.source_counts
            finally:
                await m.aclose()

        anyio.run(main)

    def test_status_tells_what_is_indexed(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            st = await m.status()
            assert st.backend == self.backend and st.agent_id == "main"
            assert Path(st.workspace_dir) == workspace
            assert st.files == len(NOTES), f"{st.files} files indexed, {len(NOTES)} notes on disk"
            assert st.unavailable is None and st.denied is None

        self.run(tmp_path, workspace, body)

    def test_scope_rules_refuse_before_the_backend_runs(self, tmp_path: Path, workspace: Path) -> None:
        async def body(m: SearchManager) -> None:
            denied = await m.search("fig tree", session_key=GROUP_CHAT, min_score=0)
            assert denied.denied is not None and denied.results == []
            assert (await m.read("MEMORY.md", session_key=GROUP_CHAT)).text == ""
            assert (await m.status(session_key=GROUP_CHAT)).denied is not None

        self.run(tmp_path, workspace, body)

    def test_a_name_in_another_unicode_form_is_found_and_reads_back(self, tmp_path: Path, workspace: Path) -> None:
        """macOS (and what is synced from it) writes "café" decomposed, a model or a keyboard types
        it composed: a hit names the file as it is on disk, and a read finds it typed either way."""
        on_disk = unicodedata.normalize("NFD", "memory/projects/café-ledger.md")
        (workspace / on_disk).parent.mkdir(parents=True, exist_ok=True)
        (workspace / on_disk).write_text("# Café\n\nThe café ledger moved to PostgreSQL 16.\n", encoding="utf-8")

        async def body(m: SearchManager) -> None:
            assert on_disk in _paths(await self.keyword(m, "ledger moved to PostgreSQL"))
            for typed in (unicodedata.normalize("NFC", on_disk), on_disk):
                got = await m.read(typed)
                assert (got.path, got.missing) == (on_disk, False) and "PostgreSQL 16" in got.text, (typed, got)

        self.run(tmp_path, workspace, body)

    def test_a_word_typed_without_its_special_letters_is_found(self, tmp_path: Path, workspace: Path) -> None:
        """ø, ł, ß, æ do not decompose, so no accent-stripping folds them: a keyboard without them types
        "tromso", "lodz", "strasse". The index holds such words folded too (`text.folded_words`)."""
        if not self.indexes_memsift_text:
            pytest.skip(f"{self.backend}'s keyword index is its own: it matches these letters as it does")
        (workspace / "memory/projects/trip.md").write_text(
            "# Trip\n\nMałgorzata rented the cabin in Tromsø; keys at Hauptstraße 9, Łódź. Ferry from Ærø.\n",
            encoding="utf-8")

        async def body(m: SearchManager) -> None:
            for plain, typed in (("tromso", "Tromsø"), ("lodz", "Łódź"), ("hauptstrasse", "Hauptstraße"),
                                 ("aero ferry", "Ærø"), ("malgorzata", "Małgorzata")):
                assert _paths(await self.keyword(m, plain))[:1] == ["memory/projects/trip.md"], plain
                assert _paths(await self.keyword(m, typed))[:1] == ["memory/projects/trip.md"], typed

        self.run(tmp_path, workspace, body)

    def test_a_word_copied_with_soft_hyphens_is_found_by_its_plain_spelling(self, tmp_path: Path,
                                                                              workspace: Path) -> None:
        """Text copied from a web page or an e-book holds invisible soft hyphens inside words
        (`Born\u00adholm`); a keyword index holds them as letters unless the text is cleaned of them
        (`text.compat_form`), and "Bornholm" did not find the note."""
        if not self.indexes_memsift_text:
            pytest.skip(f"{self.backend}'s keyword index is its own: it keeps soft hyphens inside words")
        (workspace / "memory/projects/ferry.md").write_text(
            "# Ferry\n\nBooked the Born\u00adholm crossing; the se\u00admi\u00adnar on "
            "in\u00adter\u00adna\u00adtion\u00adal shipping is on board.\n", encoding="utf-8")

        async def body(m: SearchManager) -> None:
            for typed in ("Bornholm", "seminar international", "Born\u00adholm"):
                assert _paths(await self.keyword(m, typed))[:1] == ["memory/projects/ferry.md"], typed

        self.run(tmp_path, workspace, body)

    def test_a_question_about_open_or_finished_tasks_finds_the_checklist(self, tmp_path: Path,
                                                                          workspace: Path) -> None:
        """Checklist boxes are punctuation no keyword index holds: the index holds a word for each
        (`fts_query.box_words`), which "what tasks are still open?" looks up."""
        if not self.indexes_memsift_text:
            pytest.skip(f"{self.backend}'s keyword index is its own: it holds no word for a checklist box")
        (workspace / "memory/projects/errands.md").write_text(
            "# Errands\n\n- [ ] renew the passport\n- [ ] book flights to Porto\n", encoding="utf-8")
        (workspace / "memory/projects/done.md").write_text(
            "# Errands\n\n- [x] paid the electricity bill\n- [x] called the plumber\n", encoding="utf-8")

        async def body(m: SearchManager) -> None:
            for question, path in (("what tasks are still open?", "memory/projects/errands.md"),
                                   ("what's on my to-do list?", "memory/projects/errands.md"),
                                   ("which tasks did I complete?", "memory/projects/done.md")):
                answer = await m.search(question)
                self.assert_own_answer(answer)
                assert _paths(answer)[:1] == [path], (question, _paths(answer))

        self.run(tmp_path, workspace, body)

    def test_reads_stay_inside_memory(self, tmp_path: Path, workspace: Path) -> None:
        (tmp_path / "outside.md").write_text("not memory\n", encoding="utf-8")

        async def body(m: SearchManager) -> None:
            assert "Helix" in (await m.read("MEMORY.md")).text
            assert (
                await m.read("memory/2026-11-20.md", 3, 1)
            ).text == "- Flew to Lisbon for the zeppelin museum conference."
            for bad in ("../outside.md", str(tmp_path / "outside.md"), "memory/../../outside.md"):
                with pytest.raises(MemsiftError):
                    await m.read(bad)

        self.run(tmp_path, workspace, body)
