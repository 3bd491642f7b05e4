"""The old versions and deleted notes that sync tools and note apps keep beside the notes (Syncthing's
`.stversions`, Obsidian's `.trash`, Logseq's `.recycle`, a drive's `.Trash-1000`), and tools' folders
(`node_modules`, `.venv`), are no memory. Before, every backend but QMD indexed them: "what is the gate
code?" answered with a deleted note's old code first. They are now left out by discovery, the watch and a
search's change check, and refused by reads, through every door and on every backend."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import Watch, backend_memory, tools_over_mcp
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.files.discovery import discover_memory_files, ignored_dir
from memsift.engine.files.rules import MemoryRules
from memsift.engine.testing.doors import cli_env, run_cli

CURRENT = {"memory/2026-11-02.md": "# 2026-11-02\n\n- The gate code changed to zqcurrent today.\n"}
STALE = {  # each with a word of its own: none may be found
    "memory/.stversions/2026-11-02~20261101-101010.md": "- The gate code is zqversioned.\n",
    "memory/.trash/old gate.md": "- The gate code is zqtrashed (deleted note).\n",
    "memory/.recycle/pages/gate.md": "- The gate code is zqrecycled.\n",
    "memory/.Trash-1000/files/gate.md": "- The gate code is zqdrivetrash.\n",
    "memory/.history/2026-11-02_20261101101010.md": "- The gate code is zqlocalhistory.\n",  # VS Code's
    "memory/.dropbox.cache/2026-11-01/gate.md": "- The gate code is zqdropboxcache.\n",
    "memory/tools/node_modules/pkg/README.md": "- The gate code is zqpackaged.\n",
}


def _write(ws: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")


def _apple_double(note: Path) -> None:
    """The `._` companion macOS writes beside a note on a network share or a FAT drive (binary: its magic, NULs)."""
    (note.parent / f"._{note.name}").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + b"\x00" * 64)


def test_discovery_and_reads_leave_out_stale_copies_below_a_root_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(ws, {**CURRENT, **STALE, "memory/.drafts/idea.md": "- a hidden draft is still memory\n"})
    _apple_double(ws / "memory" / "2026-11-02.md")
    _write(tmp_path, {"extra/.trash/named.md": "- an extra path named by the user\n", "extra/.trash/x/y.md": "- y\n"})
    files, skipped = discover_memory_files(ws, [str(tmp_path / "extra" / ".trash")])
    assert sorted(f.rel_path for f in files) == [
        "../extra/.trash/named.md", "../extra/.trash/x/y.md", "memory/.drafts/idea.md", "memory/2026-11-02.md"]
    assert skipped == []
    rules = MemoryRules.plain(ws, [str(tmp_path / "extra")])
    for rel in STALE:
        with pytest.raises(PathNotAllowedError, match="holds no memory"):
            rules.read(rel)
    with pytest.raises(PathNotAllowedError, match=r"in a \.trash/ folder"):
        rules.read(str(tmp_path / "extra" / ".trash" / "named.md"))  # below the extra path named `extra`
    assert "hidden draft" in rules.read("memory/.drafts/idea.md").text
    assert all(ignored_dir(n) for n in (".stversions", ".trash", ".Trash-1000", "node_modules", ".git", ".history"))
    assert not any(ignored_dir(n) for n in (".drafts", "trash", "Trash", "versions", ".Trash"[1:]))


def _found(done) -> list[str]:
    assert done.returncode == 0, done.stderr[-2000:]
    return [h["path"] for h in json.loads(done.stdout)["results"]]


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_stale_copies_are_never_found_through_any_door(tmp_path: Path, backend: str) -> None:
    ws = tmp_path / "ws"
    _write(ws, {**CURRENT, **STALE})
    _apple_double(ws / "memory" / "2026-11-02.md")
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    status = json.loads(run_cli(tmp_path, cfg, "status", "--json").stdout)
    assert not [s for s in status.get("skipped") or [] if "._" in s["path"]], status.get("skipped")
    words = [text.split("is ")[1].split()[0].rstrip(".") for text in STALE.values()]
    for resident in (False, True, True):  # cold, then the resident helper's answers
        for word in words:
            assert _found(run_cli(tmp_path, cfg, "search", word, "--mode", "keyword", "--json",
                                  resident=resident)) == [], word
        assert _found(run_cli(tmp_path, cfg, "search", "zqcurrent", "--json", resident=resident))[:1] == [
            "memory/2026-11-02.md"]
    refused = run_cli(tmp_path, cfg, "get", "memory/.trash/old gate.md")
    assert refused.returncode != 0 and "holds no memory" in refused.stderr, refused.stderr
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    calls = [("memory_search", {"query": word, "mode": "keyword"}) for word in words]
    calls.append(("memory_get", {"path": "memory/.stversions/2026-11-02~20261101-101010.md"}))
    for answers in tools_over_mcp(tmp_path, cfg, calls):
        *found, got = answers
        assert all(a["results"] == [] for a in found), found
        assert "holds no memory" in json.dumps(got), got
    # The watch: a stale copy written while it runs is not indexed, a note beside it is.
    watch = Watch([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg)], cli_env(tmp_path, resident=True))
    try:
        watch.wait_for(lambda e: e["event"] == "ready")
        _write(ws, {"memory/.stversions/2026-11-03~20261103-090000.md": "- The gate code is zqlaterversion.\n",
                    "memory/2026-11-03.md": "- The gate code is zqlaternote.\n"})
        watch.wait_for(lambda e: e["event"] == "synced" and e["reason"] != "start")
        assert _found(run_cli(tmp_path, cfg, "search", "zqlaternote", "--mode", "keyword", "--json",
                              resident=True)) == ["memory/2026-11-03.md"]
        assert _found(run_cli(tmp_path, cfg, "search", "zqlaterversion", "--mode", "keyword", "--json",
                              resident=True)) == []
        assert watch.count("answered") == 2, watch.events[-5:]
    finally:
        assert watch.stop() == 0
        run_cli(tmp_path, cfg, "helpers", "stop", "--all")


# A sync tool's conflict copies are memory (one may hold the only copy of an edit), but the same text twice
# is one hit: before, "ferry to Bornholm" answered with the note and its two copies, the top three filled.
FERRY = "# 2026-11-02\n\n- Booked the zqferry to Bornholm for the 19th, cabin 12.\n"
CONFLICTS = {
    "memory/2026-11-02.md": FERRY,
    "memory/2026-11-02.sync-conflict-20261103-101010-ABCDEFG.md": FERRY,  # Syncthing
    "memory/2026-11-02 (conflicted copy 2026-11-03).md": FERRY,  # Dropbox, Nextcloud
    "memory/2026-11-09.md": "# 2026-11-09\n\n- Booked the zqferry to Bornholm for the 19th, cabin 12.\n",  # another day
    "memory/projects/trip.sync-conflict-20261104-090000-HIJKLMN.md": "# Trip\n\n- Packed the zqzinnia seeds.\n",
    # An undated note's copy: dated by nothing either (not by the conflict's day its name adds).
    "memory/projects/shed.md": "- The shed's zqpadlock code is 4417.\n",
    "memory/projects/shed (conflicted copy 2026-11-03).md": "- The shed's zqpadlock code is 4417.\n",
}


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_a_conflict_copy_of_a_note_is_one_hit_cited_by_the_note_through_every_door(tmp_path: Path,
                                                                                    backend: str) -> None:
    ws = tmp_path / "ws"
    _write(ws, CONFLICTS)
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    same_twice = ["memory/2026-11-02.md", "memory/2026-11-09.md"]  # the other day's note is another memory
    for resident in (False, True, True):  # cold, then the resident helper's answers
        for mode in ("keyword",) if backend == "qmd" else ("keyword", "hybrid"):  # QMD's query: minutes here
            found = _found(run_cli(tmp_path, cfg, "search", "zqferry Bornholm", "--mode", mode, "--json",
                                   resident=resident))
            assert sorted(found) == same_twice, (mode, found)
        assert _found(run_cli(tmp_path, cfg, "search", "zqzinnia", "--mode", "keyword", "--json",
                              resident=resident)) == ["memory/projects/trip.sync-conflict-20261104-090000-HIJKLMN.md"]
        assert _found(run_cli(tmp_path, cfg, "search", "zqpadlock", "--mode", "keyword", "--json",
                              resident=resident)) == ["memory/projects/shed.md"]
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    for answers in tools_over_mcp(tmp_path, cfg, [("memory_search", {"query": "zqferry Bornholm", "mode": "keyword"})]):
        assert sorted(h["path"] for h in answers[0]["results"]) == same_twice, answers
