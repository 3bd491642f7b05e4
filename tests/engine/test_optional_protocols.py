"""What the runtime uses beyond `SearchManager` is declared (engine/manager.py), not probed: the
builtin backend declares it, the host finds it below the stages above it (which pass on only the
`SearchManager` calls, each by name), and a backend with none of it (a plugin's minimal manager)
is served without it."""

from __future__ import annotations

import anyio

from helpers import make_settings
from memsift.engine.compose.factory import open_manager
from memsift.engine.compose.host import _accepts_sessions, _install_probe, _search_syncs
from memsift.engine.compose.wrapped import WrappedManager, declaring
from memsift.engine.manager import (CountsSearchSyncs, HasPrimary, IndexesSessions, MarksDirty, RunsInBackground,
                                    SearchManager, WatchesChanges)


class Minimal:
    """Only the SearchManager protocol."""

    backend = "minimal"
    query_config = None

    async def answer(self, request): ...
    async def search(self, query, **kw): ...
    async def read(self, path, from_line=None, lines=None, **kw): ...
    async def status(self, **kw): ...
    async def sync(self, *, force=False, reason="manual"): ...
    async def aclose(self): ...


def test_the_composed_builtin_manager_declares_what_the_host_uses(tmp_path, example_workspace):
    settings = make_settings(tmp_path, example_workspace, {"provider": "none"})

    async def run():
        async with open_manager(settings) as manager:  # scope rules and the ranker stage above builtin
            assert isinstance(manager, SearchManager) and isinstance(manager, WrappedManager)
            backend = declaring(manager, WatchesChanges)
            assert backend is not None and backend.backend == "builtin" and not isinstance(backend, WrappedManager)
            for protocol in (WatchesChanges, MarksDirty, IndexesSessions, CountsSearchSyncs):
                assert not isinstance(manager, protocol), protocol.__name__  # the stage does not pretend
                assert declaring(manager, protocol) is backend, protocol.__name__
            assert declaring(manager, HasPrimary) is None and declaring(manager, RunsInBackground) is None  # no QMD
            assert _accepts_sessions(manager)
            probe = _install_probe(manager, settings)
            assert probe is not None and backend.freshness.probe is probe  # handed to the backend itself
            await manager.sync()
            (example_workspace / "memory" / "2026-11-27.md").write_text("- the pelican ledger note\n")
            answer = await manager.search("pelican")
            assert answer.results  # the probe saw the new note and the search synced it, counted below
            assert _search_syncs(manager) == backend.search_syncs == 1
            backend.watch_changes(None)
            probe.close()

    anyio.run(run)


def test_a_backend_with_none_of_it_is_served_without_it(tmp_path, example_workspace):
    settings = make_settings(tmp_path, example_workspace, {"provider": "none"})
    m = Minimal()
    assert isinstance(m, SearchManager)
    for protocol in (WatchesChanges, MarksDirty, IndexesSessions, CountsSearchSyncs, RunsInBackground, HasPrimary):
        assert not isinstance(m, protocol), protocol.__name__
    assert not _accepts_sessions(m)
    assert _install_probe(m, settings) is None
