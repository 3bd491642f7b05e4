"""With QMD down, the builtin fallback searches and reads the same files QMD indexes
(`memory.qmd.paths`, `memorySearch.qmd.extraCollections`, `extraPaths`), and names what it cannot
cover instead of losing it silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest

from helpers import backend_memory, make_settings
from memsift.engine.compose.factory import open_manager


@pytest.fixture
def layout(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- prefers tea\n")
    (ws / "notes" / "deep").mkdir(parents=True)
    (ws / "notes" / "deep" / "boat.md").write_text("# Boat\n\nThe catamaran mooring fee is due in March.\n")
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "page.md").write_text("# Wiki\n\nThe heliograph protocol uses mirrors.\n")
    shared = tmp_path / "family" / "sessions"
    shared.mkdir(parents=True)
    (shared / "s1.md").write_text("# Session\n\nUser: book the zeppelin tour\n")
    (ws / "single.md").write_text("# Single\n\nThe quokka photo is on the desk.\n")
    (ws / "logs").mkdir()
    (ws / "logs" / "today.txt").write_text("a text file QMD indexes with its pattern\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("# A\n\nThe ocelot sketch.\n")
    return ws, wiki, shared


def _settings(tmp_path, ws, wiki, shared, **extra_qmd):
    qmd = {
        "command": str(tmp_path / "no-such-qmd"),  # QMD is down: every search falls back
        "paths": [{"path": "notes"}, {"path": str(wiki), "name": "wiki"}, {"path": ".", "pattern": "single.md"},
                  *extra_qmd.pop("paths", [])],
        **extra_qmd,
    }
    return make_settings(
        tmp_path,
        ws,
        {"provider": "none", "qmd": {"extraCollections": [{"path": str(shared), "name": "family"}]}},
        memory={"backend": "qmd", "qmd": qmd},
    )


def _search_and_read(settings, queries, *, sync_first=False):
    async def go():
        m = open_manager(settings)
        try:
            if sync_first:
                await m.sync()
            out = {}
            for q in queries:
                answer = await m.search(q, min_score=0)
                top = answer.results[0] if answer.results else None
                text = (await m.read(top.path)).text if top else None
                out[q] = (answer, top.path if top else None, text)
            return out
        finally:
            await m.aclose()

    return anyio.run(go)


def test_the_fallback_covers_qmd_paths_and_extra_collections(tmp_path, layout):
    ws, wiki, shared = layout
    got = _search_and_read(_settings(tmp_path, ws, wiki, shared), ["catamaran", "heliograph", "zeppelin", "quokka"])
    expected = {
        "catamaran": "notes/deep/boat.md",
        "heliograph": "../wiki/page.md",
        "zeppelin": "../family/sessions/s1.md",
        "quokka": "single.md",
    }
    for query, (answer, path, text) in got.items():
        assert answer.backend == "builtin" and answer.fallback.from_ == "qmd", query
        assert path == expected[query], (query, [h.path for h in answer.results])
        assert query in text.lower()  # readable through the same manager
        assert answer.fallback.not_covered is None  # everything QMD indexes is covered


def test_what_the_fallback_cannot_cover_is_named(tmp_path, layout):
    ws, wiki, shared = layout
    settings = _settings(
        tmp_path,
        ws,
        wiki,
        shared,
        paths=[{"path": "logs", "pattern": "**/*.txt"}, {"path": "docs", "pattern": "*.md"}],
        sessions={"enabled": True},
    )
    answer = _search_and_read(settings, ["catamaran"])["catamaran"][0]
    assert answer.results and answer.fallback is not None
    assert answer.fallback.not_covered == [
        f"{ws / 'logs'} (pattern **/*.txt): the builtin index reads .md files only",
        f"{ws / 'docs'} (pattern *.md): the builtin index takes a whole folder's .md files, one .md file, or "
        f"<folder>/**/*.md",
        "QMD's exported session transcripts (memory.qmd.sessions): the builtin index searches transcripts only with "
        'experimental.sessionMemory and sources ["memory", "sessions"]',
    ]


def test_the_cli_states_what_the_fallback_does_not_cover(tmp_path, layout):
    ws, wiki, shared = layout
    config = tmp_path / "c.json5"
    config.write_text(
        json.dumps(
            {
                "memory": {
                    "backend": "qmd",
                    "qmd": {
                        "command": str(tmp_path / "no-such-qmd"),
                        "paths": [{"path": "logs", "pattern": "**/*.txt"}, {"path": "notes"}],
                    },
                },
                "agents": {"defaults": {"workspace": str(ws), "memorySearch": {"provider": "none"}}},
            }
        )
    )
    env = {
        **os.environ,
        "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "MEMSIFT_NO_RESIDENT": "1",
    }
    done = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(config), "search", "catamaran"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "notes/deep/boat.md" in done.stdout
    assert (
        f"not covered by the builtin index: {ws / 'logs'} (pattern **/*.txt): the builtin index reads .md files only"
        in done.stdout
    )
    got = subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(config), "get", "notes/deep/boat.md"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0 and "catamaran" in got.stdout


def test_a_watching_host_sees_changes_in_qmd_collections_too(tmp_path, layout):
    from memsift.engine.compose.host import serve_freshness

    ws, wiki, shared = layout
    settings = make_settings(
        tmp_path,
        ws,
        {"provider": "none", "sync": {"watchDebounceMs": 200}},
        memory={"qmd": {"paths": [{"path": "notes"}]}},
    )  # the builtin backend, with QMD paths configured
    events: list[tuple[str, dict]] = []

    async def go():
        m = open_manager(settings)
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(
                    lambda task_status: serve_freshness(
                        m, settings, on_event=lambda k, p: events.append((k, p)), task_status=task_status
                    )
                )
                await anyio.sleep(0.3)  # the watches are armed
                (ws / "notes" / "deep" / "new.md").write_text("# New\n\nThe axolotl tank needs a filter.\n")
                with anyio.fail_after(15):
                    while not any(k == "synced" and p["reason"] == "watch" for k, p in events):
                        await anyio.sleep(0.05)
                found = await m.search("axolotl", min_score=0)
                tg.cancel_scope.cancel()
            return found
        finally:
            await m.aclose()

    found = anyio.run(go)
    assert [h.path for h in found.results] == ["notes/deep/new.md"]


@pytest.mark.parametrize("backend", ["builtin", "qmd"])
def test_a_file_outside_the_workspace_has_one_citation_on_every_backend(tmp_path, layout, backend):
    """QMD up cites an outside collection's file as the builtin backend (and its fallback) does,
    `../wiki/page.md`, not `qmd/wiki/page.md`: parity and an agent's stored citations see one file."""
    ws, wiki, shared = layout
    # extraPaths: the builtin backend indexes them, QMD makes them collections (custom-<n>-main)
    settings = make_settings(tmp_path, ws, {"provider": "none", "extraPaths": ["notes", str(wiki), str(shared)]},
                             memory=backend_memory(backend))
    got = _search_and_read(settings, ["catamaran", "heliograph", "zeppelin"], sync_first=True)
    expected = {
        "catamaran": "notes/deep/boat.md",
        "heliograph": "../wiki/page.md",
        "zeppelin": "../family/sessions/s1.md",
    }
    for query, (answer, path, text) in got.items():
        assert answer.backend == backend and answer.fallback is None, query
        assert path == expected[query], (query, [h.path for h in answer.results])
        assert query in text.lower()  # and read back by that citation
