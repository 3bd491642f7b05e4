"""The exact change check searches use in a long-running memsift: real files, real inotify."""

from __future__ import annotations

import os

import pytest

from helpers import make_settings
from memsift.engine.files.change_probe import ChangeProbe


@pytest.fixture
def ws(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory" / "projects").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")
    (ws / "memory" / "2026-11-01.md").write_text("- a note\n")
    return ws


def _probe(tmp_path, ws, **ms) -> ChangeProbe:
    probe = ChangeProbe(make_settings(tmp_path, ws, ms))
    if not probe.exact:
        pytest.skip("inotify is not available here")
    assert probe.changed() is False  # nothing yet
    return probe


def test_every_kind_of_memory_change_is_seen_at_once(tmp_path, ws):
    probe = _probe(tmp_path, ws)
    changes = [
        lambda: open(ws / "memory" / "2026-11-01.md", "a").write("- appended\n"),
        lambda: (ws / "memory" / "projects" / "new.md").write_text("x"),
        lambda: (ws / "MEMORY.md").write_text("# Memory\n- edited\n"),
        lambda: os.rename(ws / "memory" / "projects" / "new.md", ws / "memory" / "moved.md"),
        lambda: (ws / "memory" / "moved.md").unlink(),
        lambda: (ws / "memory.md").write_text("lower-case root file"),
    ]
    for change in changes:
        change()
        assert probe.changed() is True  # no waiting: the kernel queued the event before the write returned
        assert probe.changed() is False  # drained
    probe.close()


def test_other_files_and_ignored_folders_are_not_changes(tmp_path, ws):
    probe = _probe(tmp_path, ws)
    (ws / "README.txt").write_text("not memory")
    (ws / "notes.md").write_text("not a memory file: outside memory/")
    (ws / "memory" / "draft.txt").write_text("not Markdown")
    assert probe.changed() is False
    (ws / "memory" / "node_modules").mkdir()
    (ws / "memory" / "node_modules" / "pkg.md").write_text("x")
    assert probe.changed() is False
    probe.close()


def test_new_folders_and_a_later_memory_folder_are_watched(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    probe = _probe(tmp_path, ws)
    (ws / "memory").mkdir()
    assert probe.changed() is True
    (ws / "memory" / "deep" / "er").mkdir(parents=True)
    assert probe.changed() is True
    (ws / "memory" / "deep" / "er" / "note.md").write_text("x")
    assert probe.changed() is True
    probe.close()


def test_extra_paths_are_watched(tmp_path, ws):
    shared = tmp_path / "runbooks"
    shared.mkdir()
    single = tmp_path / "one.md"
    single.write_text("x")
    probe = _probe(tmp_path, ws, extraPaths=[str(shared), str(single)])
    (shared / "deploy.md").write_text("x")
    assert probe.changed() is True
    single.write_text("y")
    assert probe.changed() is True
    (tmp_path / "unrelated.md").write_text("z")
    assert probe.changed() is False
    probe.close()


def test_a_closed_probe_always_answers_changed(tmp_path, ws):
    probe = _probe(tmp_path, ws)
    probe.close()
    assert probe.changed() is True  # without the queue nothing can be ruled out: sync to be safe


def test_a_workspace_deleted_and_made_again_or_swapped_is_watched_again(tmp_path, ws):
    """The probe's watches follow folders: after `rm -rf ws; mkdir ws` or `mv ws.new ws` it heard
    nothing more, so searches trusted an index that missed every later note."""
    import shutil

    probe = _probe(tmp_path, ws)
    shutil.rmtree(ws)
    assert probe.changed() is True
    assert probe.changed() is False  # gone, and nothing there to change
    (ws / "memory").mkdir(parents=True)
    assert probe.changed() is True  # it is back
    (ws / "memory" / "2026-12-06.md").write_text("- rebuilt the shed\n")
    assert probe.changed() is True  # a write in the new folder is heard
    assert probe.changed() is False
    swapped = tmp_path / "ws.new"
    (swapped / "memory").mkdir(parents=True)
    ws.rename(tmp_path / "ws.old")
    swapped.rename(ws)
    assert probe.changed() is True
    assert probe.changed() is False
    (ws / "memory" / "2026-12-07.md").write_text("- planted tulips\n")
    assert probe.changed() is True
    (tmp_path / "ws.old" / "memory" / "2026-12-06.md").write_text("- elsewhere now\n")
    assert probe.changed() is False  # the old folder is no longer memory
    probe.close()


def _inotify_queues() -> int:
    fds = os.listdir("/proc/self/fd")
    return sum(1 for fd in fds if os.path.exists(f"/proc/self/fd/{fd}")
               and os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify")


def test_a_manager_kept_open_makes_its_own_check_once_and_gives_it_back(tmp_path, ws):
    """The Python API's manager (no host hands it a check): a one-shot search opens no inotify queue,
    the second search opens one, `aclose` closes it; a host's check replaces it."""
    import anyio

    from memsift.engine import open_manager
    from memsift.engine.compose.wrapped import declaring
    from memsift.engine.manager import WatchesChanges

    if not ChangeProbe(make_settings(tmp_path, ws, {})).exact:
        pytest.skip("inotify is not available here")
    before = _inotify_queues()

    async def main() -> None:
        m = open_manager(make_settings(tmp_path, ws, {"provider": "none"}))
        try:
            await m.search("note", mode="keyword")
            assert _inotify_queues() == before, "one search: no change check of its own"
            await m.search("note", mode="keyword")
            assert _inotify_queues() == before + 1
            (ws / "memory" / "2026-11-02.md").write_text("- a quince by the shed\n")
            assert [h.path for h in (await m.search("quince", mode="keyword")).results] == ["memory/2026-11-02.md"]
            host = ChangeProbe(make_settings(tmp_path, ws, {}))
            declaring(m, WatchesChanges).watch_changes(host)
            assert _inotify_queues() == before + 1, "the host's check replaced the manager's own"
            declaring(m, WatchesChanges).watch_changes(None)
            host.close()
        finally:
            await m.aclose()
        assert _inotify_queues() == before

    anyio.run(main)


def test_each_view_sees_every_change_whoever_asked_first(tmp_path, ws):
    """QMD and its builtin fallback ask one host probe: the probe drains its queue for whoever asks
    first, so each backend gets a view that counts the changes it has not seen yet."""
    probe = _probe(tmp_path, ws)
    qmd, builtin = probe.view(), probe.view()
    assert not qmd.changed() and not builtin.changed()
    (ws / "memory" / "2026-11-02.md").write_text("- new\n")
    assert qmd.changed()  # drains the queue
    assert builtin.changed(), "the other view still sees the change"
    assert not qmd.changed() and not builtin.changed()
    (ws / "MEMORY.md").write_text("# Memory\n- edited\n")
    assert builtin.changed() and qmd.changed()
    probe.close()
