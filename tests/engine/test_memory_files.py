from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import backend_memory, tools_over_mcp
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.files.discovery import discover_memory_files
from memsift.engine.files.rules import read_memory_file
from memsift.engine.testing.doors import run_cli


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    (w / "memory" / "deep" / "er").mkdir(parents=True)
    (w / "MEMORY.md").write_text("root fact\nsecond\nthird\n")
    (w / "memory" / "2026-11-02.md").write_text("daily\n")
    (w / "memory" / "deep" / "er" / "nested.md").write_text("nested\n")
    (w / "memory" / "image.png").write_bytes(b"\x89PNG")
    (w / "memory" / "notes.txt").write_text("not markdown")
    (w / "README.md").write_text("not memory")
    (w / "DREAMS.md").write_text("dreams")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("SECRET")
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "runbook.md").write_text("runbook\n")
    return w


def test_discovery_finds_memory_files_only(ws, tmp_path):
    files, skipped = discover_memory_files(
        ws, [str(tmp_path / "extra"), "../extra", str(tmp_path / "extra" / "runbook.md")]
    )
    rels = [f.rel_path for f in files]
    assert rels == ["../extra/runbook.md", "MEMORY.md", "memory/2026-11-02.md", "memory/deep/er/nested.md"]
    assert skipped == []


def test_discovery_never_follows_symlinks(ws, tmp_path):
    os.symlink(tmp_path / "outside" / "secret.md", ws / "memory" / "link.md")
    os.symlink(tmp_path / "outside", ws / "memory" / "linkdir")
    os.symlink(tmp_path / "outside", tmp_path / "extra-link")
    files, skipped = discover_memory_files(ws, [str(tmp_path / "extra-link")])
    assert all("secret" not in f.rel_path and "link" not in f.rel_path for f in files)
    reasons = {s.path: s.reason for s in skipped}
    assert reasons["memory/link.md"].startswith("symlink")
    assert reasons["memory/linkdir"].startswith("symlink")
    assert reasons["../extra-link"].startswith("symlink")


def test_symlinked_memory_dir_and_root_file_are_skipped(tmp_path):
    w = tmp_path / "w2"
    w.mkdir()
    real = tmp_path / "realmem"
    real.mkdir()
    (real / "a.md").write_text("x")
    os.symlink(real, w / "memory")
    os.symlink(real / "a.md", w / "MEMORY.md")
    files, skipped = discover_memory_files(w)
    assert files == []
    assert {s.path for s in skipped} == {"memory", "MEMORY.md"}


def test_a_symlinked_memory_folder_says_what_to_do_through_every_door(tmp_path):
    """A `memory/` linked to a synced folder is skipped, as the reference skips it: every door says
    so with the folder to name as an extra path, and named so it is searched."""
    ws, real = tmp_path / "ws", tmp_path / "synced" / "memory"
    real.mkdir(parents=True)
    ws.mkdir()
    (real / "2026-11-01.md").write_text("# Notes\n\nThe zqkayak is in the blue shed.\n")
    os.symlink(real, ws / "memory")
    os.symlink(tmp_path / "gone.md", ws / "MEMORY.md")
    reasons = {s.path: s.reason for s in discover_memory_files(ws)[1]}
    assert f"add what it points to, {real}, to memorySearch.extraPaths" in reasons["memory"], reasons
    assert "gone.md, which does not exist" in reasons["MEMORY.md"], reasons
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws)}}}))
    for resident in (False, True, True):  # cold, then the resident helper's answers
        done = run_cli(tmp_path, cfg, "search", "zqkayak", "--mode", "keyword", "--json", resident=resident)
        assert json.loads(done.stdout)["results"] == [], done.stdout
        assert "MEMORY.md and memory/ are symlinks" in done.stderr, done.stderr
        assert f"add {real} to memorySearch.extraPaths" in done.stderr, done.stderr
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    status = json.loads(run_cli(tmp_path, cfg, "status", "--json").stdout)
    assert {s["path"]: s["reason"] for s in status["skipped"]} == reasons
    for (answer,) in tools_over_mcp(tmp_path, cfg, [("memory_status", {})]):
        assert {s["path"]: s["reason"] for s in answer["status"]["skipped"]} == reasons, answer
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws), "memorySearch": {
        "extraPaths": [str(real)]}}}}))
    done = run_cli(tmp_path, cfg, "search", "zqkayak", "--mode", "keyword", "--json")
    assert [h["path"] for h in json.loads(done.stdout)["results"]] == ["../synced/memory/2026-11-01.md"]
    assert "are symlinks" not in done.stderr and "is a symlink" not in done.stderr, done.stderr


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_a_note_left_in_icloud_is_named_with_what_to_do_through_every_door(tmp_path, backend):
    """iCloud Drive's "Optimize Mac Storage" leaves a hidden placeholder (`.2026-11-01.md.icloud`)
    where a note was: no search finds the note, and nothing said so. Status names it, on every
    backend (QMD's status listed none of memsift's own skips), cold and through MCP."""
    if backend in ("lancedb", "qdrant"):
        pytest.importorskip(f"memsift_{backend}", reason=f"the {backend} plugin is not installed")
    ws = tmp_path / "ws"
    (ws / "memory" / "trips").mkdir(parents=True)
    (ws / "memory" / "2026-11-02.md").write_text("- The zqkayak is in the blue shed.\n")
    (ws / "memory" / "trips" / ".rome.md.icloud").write_bytes(b"bplist00\xd1\x01\x02")
    (ws / ".MEMORY.md.icloud").write_bytes(b"bplist00")
    (ws / "memory" / ".notes.icloud").write_bytes(b"bplist00")  # not a note's placeholder
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    expected = {"MEMORY.md": ".MEMORY.md.icloud", "memory/trips/rome.md": ".rome.md.icloud"}

    def check(skipped: list[dict]) -> None:
        got = {s["path"]: s["reason"] for s in skipped}
        assert set(got) == set(expected), got
        for path, placeholder in expected.items():
            assert f"not downloaded to this Mac (only its placeholder {placeholder}" in got[path], got[path]

    check(json.loads(run_cli(tmp_path, cfg, "status", "--json").stdout)["skipped"])
    assert "brctl download" in run_cli(tmp_path, cfg, "status").stdout
    for (answer,) in tools_over_mcp(tmp_path, cfg, [("memory_status", {})]):
        check(answer["status"]["skipped"])
    found = run_cli(tmp_path, cfg, "search", "zqkayak", "--mode", "keyword", "--json")
    assert [h["path"] for h in json.loads(found.stdout)["results"]] == ["memory/2026-11-02.md"]


def _read(ws, path, *args, extra=()):
    return read_memory_file(ws, tuple(extra), path, *args)


def test_read_whole_file_and_ranges(ws):
    assert _read(ws, "MEMORY.md") == (
        "MEMORY.md",
        "root fact\nsecond\nthird\n",
        3,
        False,
    )  # the final newline ends line 3
    assert _read(ws, "MEMORY.md", 2, 1)[1] == "second"
    assert _read(ws, "MEMORY.md", 2)[1] == "second\nthird\n"
    assert _read(ws, "MEMORY.md", 50, 3)[1] == ""  # past EOF
    assert _read(ws, "MEMORY.md", 0, 0)[1] == "root fact"  # from and lines are at least 1
    assert _read(ws, "memory/deep/er/nested.md")[1] == "nested\n"
    assert _read(ws, "./memory/2026-11-02.md")[0] == "memory/2026-11-02.md"
    assert _read(ws, str(ws / "MEMORY.md"))[0] == "MEMORY.md"  # absolute inside the workspace
    assert _read(ws, "DREAMS.md")[1] == "dreams"


def test_missing_memory_file_reads_as_empty(ws):
    assert _read(ws, "memory/2030-01-01.md") == ("memory/2030-01-01.md", "", 0, True)
    assert _read(ws, "memory/nope/deeper.md")[3] is True


@pytest.mark.parametrize(
    "path",
    [
        "",
        "   ",
        "../outside/secret.md",
        "memory/../../outside/secret.md",
        "memory/../README.md",
        "README.md",
        "memory/notes.txt",
        "memory/image.png",
        "/etc/passwd",
        "memory/a\x00b.md",
        "memory",
        "memory/",
    ],
)
def test_paths_outside_memory_are_refused(ws, tmp_path, path):
    with pytest.raises(PathNotAllowedError):
        _read(ws, path)


def test_absolute_path_outside_is_refused(ws, tmp_path):
    with pytest.raises(PathNotAllowedError):
        _read(ws, str(tmp_path / "outside" / "secret.md"))


def test_symlinks_are_refused_even_when_created_later(ws, tmp_path):
    os.symlink(tmp_path / "outside" / "secret.md", ws / "memory" / "evil.md")
    with pytest.raises(PathNotAllowedError, match="symlink"):
        _read(ws, "memory/evil.md")
    os.symlink(tmp_path / "outside", ws / "memory" / "evildir")
    with pytest.raises(PathNotAllowedError, match="symlink"):
        _read(ws, "memory/evildir/secret.md")


def test_extra_paths_are_readable_but_nothing_beside_them(ws, tmp_path):
    extra = [str(tmp_path / "extra")]
    assert _read(ws, "../extra/runbook.md", extra=extra)[1] == "runbook\n"
    assert _read(ws, str(tmp_path / "extra" / "runbook.md"), extra=extra)[1] == "runbook\n"
    with pytest.raises(PathNotAllowedError):
        _read(ws, "../outside/secret.md", extra=extra)
    with pytest.raises(PathNotAllowedError):
        _read(ws, "../extra/../outside/secret.md", extra=extra)


def test_fifo_is_refused(ws):
    os.mkfifo(ws / "memory" / "pipe.md")
    with pytest.raises(PathNotAllowedError, match="regular file"):
        _read(ws, "memory/pipe.md")


def test_a_name_typed_in_another_unicode_form_reads_the_file_on_disk(ws, tmp_path):
    """macOS writes "Zürich/café" decomposed; a model types it composed (and the other way round)."""
    import unicodedata

    nfd, nfc = (unicodedata.normalize(form, "memory/Zürich/café.md") for form in ("NFD", "NFC"))
    (ws / nfd).parent.mkdir(parents=True)
    (ws / nfd).write_text("the café by the lake\n")
    (ws / unicodedata.normalize("NFC", "memory/résumé.md")).write_text("composed on disk\n")
    assert _read(ws, nfc)[:3] == (nfd, "the café by the lake\n", 1)
    assert _read(ws, nfd)[:2] == (nfd, "the café by the lake\n")
    assert _read(ws, unicodedata.normalize("NFD", "memory/résumé.md"))[1] == "composed on disk\n"
    # Two spellings side by side: the one typed is read, none is guessed for a third.
    (ws / unicodedata.normalize("NFD", "memory/Zürich") / unicodedata.normalize("NFC", "café.md")).write_text(
        "the other café\n")
    assert _read(ws, nfc)[1] == "the other café\n" and _read(ws, nfd)[1] == "the café by the lake\n"
    # Normalisation never leads outside: the rules judge the name found on disk.
    (tmp_path / "outside" / unicodedata.normalize("NFD", "café.md")).write_text("SECRET")
    with pytest.raises(PathNotAllowedError):
        _read(ws, f"../outside/{unicodedata.normalize('NFC', 'café.md')}")


def test_a_qmd_collection_alias_typed_in_another_unicode_form_reads_the_file_on_disk(tmp_path):
    import unicodedata

    from memsift.engine.files.rules import MemoryCollection, MemoryRules

    notes = tmp_path / "notes"
    notes.mkdir()
    on_disk = unicodedata.normalize("NFD", "Zürich café.md")
    (notes / on_disk).write_text("by the lake\n")
    rules = MemoryRules(workspace=tmp_path / "ws", collections=(MemoryCollection("notes", notes, "**/*.md", "custom"),))
    path, shown = rules.resolve(f"qmd/notes/{unicodedata.normalize('NFC', on_disk)}")
    assert path == notes / on_disk and shown == f"qmd/notes/{on_disk}"
