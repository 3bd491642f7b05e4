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
