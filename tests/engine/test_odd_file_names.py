"""Notes whose file names hold characters a URL or a Windows path gives a meaning to (`%20`, `?`, a
backslash), spaces or accents are found and read under their own names, through the cold CLI, the
resident helper and MCP over stdio and HTTP, on every backend. Before, on QMD a hit in
`memory/q?.md` was cut to `memory/q` and dropped, and one in `memory/50%20 off.md` was cited as
`memory/50  off.md`, a file that does not exist; on every backend `memory_get` of
`memory/back\\slash.md` read `memory/back/slash.md` and answered nothing. The notes QMD itself leaves
out (hidden names, `.MD`) are named in QMD's status, where before it said "Changes none"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import Watch, backend_memory, tools_over_mcp
from memsift.backends.qmd.parse import parse_file_uri, parse_ls, spelled_on_disk
from memsift.engine.files.rules import MemoryRules
from memsift.engine.testing.doors import cli_env, run_cli

NOTES = {  # file → a word found in it only
    "memory/50%20 off.md": "zqpercent",
    "memory/what?.md": "zqquestion",
    "memory/back\\slash.md": "zqbackslash",
    "memory/with space.md": "zqspaced",
    "memory/ümlaut ünd café.md": "zqaccented",
}
QMD_LEAVES_OUT = {"memory/.drafts/idea.md": "zqhiddendir", "memory/SHOUT.MD": "zqcapital",
                  "memory/back\\slash.md": "zqbackslash"}


def test_qmd_file_names_are_kept_as_printed_then_matched_on_disk(tmp_path: Path) -> None:
    assert parse_file_uri("qmd://c/what?.md?index=memsift") == ("c", "what?.md")
    assert parse_file_uri("qmd://c/50%20 off.md") == ("c", "50%20 off.md")
    (tmp_path / "50%20 off.md").write_text("x")
    (tmp_path / "a b.md").write_text("x")
    assert spelled_on_disk(tmp_path, "50%20 off.md") == "50%20 off.md"  # a file named so
    assert spelled_on_disk(tmp_path, "a%20b.md") == "a b.md"  # an encoded name: only its decoded form exists
    listing = "44 B  Dec  7 14:18  qmd://c/new\nline.md\n1.2 KB  Dec  7 14:18  qmd://c/q?.md\n"
    assert parse_ls(listing, "c") == ["new\nline.md", "q?.md"]


def test_a_backslash_in_a_name_is_read_as_named_else_as_a_folder(tmp_path: Path) -> None:
    (tmp_path / "memory" / "day").mkdir(parents=True)
    (tmp_path / "memory" / "back\\slash.md").write_text("named with a backslash\n")
    (tmp_path / "memory" / "day" / "note.md").write_text("in a folder\n")
    rules = MemoryRules.plain(tmp_path, [])
    assert rules.read("memory/back\\slash.md").text == "named with a backslash\n"
    assert rules.read("memory\\day\\note.md").text == "in a folder\n"  # a Windows-style path still reads


def _json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_odd_file_names_are_found_and_read_through_every_door(tmp_path: Path, backend: str) -> None:
    ws = tmp_path / "ws"
    notes = dict(NOTES, **(QMD_LEAVES_OUT if backend == "qmd" else {}))
    for rel, word in notes.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(f"# A note\n\n- remember {word} here\n", encoding="utf-8")
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    searched = {rel: word for rel, word in NOTES.items() if backend != "qmd" or rel not in QMD_LEAVES_OUT}
    for resident in (False, True, True):  # cold, then the resident helper's answers
        for rel, word in searched.items():
            found = _json(run_cli(tmp_path, cfg, "search", word, "--mode", "keyword", "--json", resident=resident))
            assert [h["path"] for h in found["results"]][:1] == [rel], (word, found["results"])
            got = _json(run_cli(tmp_path, cfg, "get", rel, "--json", resident=resident))
            assert word in got["text"], (rel, got)
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    calls = [(tool, args) for rel, word in searched.items()
             for tool, args in (("memory_search", {"query": word}), ("memory_get", {"path": rel}))]
    calls.append(("memory_status", {}))
    for answers in tools_over_mcp(tmp_path, cfg, calls):
        *pairs, status = answers
        for (rel, word), found, got in zip(searched.items(), pairs[::2], pairs[1::2]):
            assert [h["path"] for h in found["results"]][:1] == [rel], (word, found["results"])
            assert word in got["text"], (rel, got)
        if backend == "qmd":
            assert {s["path"] for s in status["status"]["skipped"]} == set(QMD_LEAVES_OUT), status["status"]["skipped"]
    _through_a_watch(tmp_path, cfg, ws, searched)
    if backend == "qmd":  # what QMD did not index is named, with what to do
        skipped = {s["path"]: s["reason"] for s in _json(run_cli(tmp_path, cfg, "status", "--json"))["skipped"]}
        assert set(skipped) == set(QMD_LEAVES_OUT), skipped
        assert "hidden folders" in skipped["memory/.drafts/idea.md"] and ".MD" in skipped["memory/SHOUT.MD"]
        assert all("rename it" in why for why in skipped.values())


def _through_a_watch(tmp_path: Path, cfg: Path, ws: Path, searched: dict[str, str]) -> None:
    """`memsift watch` indexes a note with an odd name written while it runs, and answers the CLI's
    searches and reads of every note under its own name."""
    watch = Watch([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg)], cli_env(tmp_path, resident=True))
    try:
        watch.wait_for(lambda e: e["event"] == "ready")
        later = {"memory/later? 50%20 #2.md": "zqlater"}
        (ws / "memory" / "later? 50%20 #2.md").write_text("# Later\n\n- remember zqlater here\n", encoding="utf-8")
        watch.wait_for(lambda e: e["event"] == "synced" and e["report"]["filesIndexed"] >= 1)
        for rel, word in {**searched, **later}.items():
            found = _json(run_cli(tmp_path, cfg, "search", word, "--mode", "keyword", "--json", resident=True))
            assert [h["path"] for h in found["results"]][:1] == [rel], (word, found["results"])
            got = _json(run_cli(tmp_path, cfg, "get", rel, "--json", resident=True))
            assert word in got["text"], (rel, got)
        assert watch.count("answered") >= len(searched) + 1, watch.events[-5:]  # the watch answered, no other helper
    finally:
        assert watch.stop() == 0
        run_cli(tmp_path, cfg, "helpers", "stop", "--all")
