"""What the runtime uses beyond `SearchManager` is declared (engine/manager.py), not probed: the
builtin backend declares it through every wrapper above it, and a backend with none of it (a
plugin's minimal manager) is served without it."""

from __future__ import annotations

import anyio

from helpers import make_settings
from memsift.engine.compose.factory import open_manager
from memsift.engine.compose.host import _accepts_sessions, _install_probe
from memsift.engine.manager import (CountsSearchSyncs, HasPrimary, IndexesSessions, MarksDirty, RunsInBackground,
                                    SearchManager, WatchesChanges)


class Minimal:
    """Only the SearchManager protocol."""

    backend = "minimal"

    async def search(self, query, **kw): ...
    async def read(self, path, from_line=None, lines=None, **kw): ...
    async def status(self, **kw): ...
    async def sync(self, *, force=False, reason="manual"): ...
    async def aclose(self): ...


def test_the_composed_builtin_manager_declares_what_the_host_uses(tmp_path, example_workspace):
    settings = make_settings(tmp_path, example_workspace, {"provider": "none"})

    async def run():
        async with open_manager(settings) as manager:  # scope rules and the ranker stage above builtin
            assert isinstance(manager, SearchManager)
            for protocol in (WatchesChanges, MarksDirty, IndexesSessions, CountsSearchSyncs):
                assert isinstance(manager, protocol), protocol.__name__
            assert not isinstance(manager, (HasPrimary, RunsInBackground))  # no fallback guard, no QMD
            assert _accepts_sessions(manager)
            probe = _install_probe(manager, settings)
            assert probe is not None
            manager.watch_changes(None)
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
