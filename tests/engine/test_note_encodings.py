"""A note saved as UTF-16 with its byte-order mark (Windows PowerShell 5's `>` and `Out-File` write
notes so) is text: indexed, found and read back as the index shows it, through the cold CLI, the
resident helper and MCP over stdio and HTTP, on every backend that reads the files itself. It was
skipped as "binary content (NUL bytes)". Without its mark a UTF-16 file still is (nothing tells it
from binary), and a note in Latin-1 reads as the reference reads it: U+FFFD where UTF-8 fails.
`status` in a process of its own, cold and through the resident helper, names the skipped file and
counts the notes edited since.

A note saved as UTF-8 with a byte-order mark (PowerShell 5's `Set-Content -Encoding utf8`, old
Notepad) reads as the same note without one: its first line's dated heading dates it, and no
snippet or `memory_get` answer starts with an invisible U+FEFF. Before, the mark was text: the
heading `# 2026-11-02` was no heading, so "what did I do on November 2?" missed the note."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import backend_memory, tools_over_mcp
from memsift.engine.files.discovery import decode_note, read_open_file
from memsift.engine.testing.doors import run_cli

LITTLE = "# Notes\r\n\r\n- The walrus budget for the Zürich office was approved: €1,200.\r\n- Call Anaïs.\r\n"
BIG = "# Later\n\n- The gannet survey moves to Thursday.\n"


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- the user drinks dark roast coffee\n")
    (ws / "memory" / "2026-11-05.md").write_bytes(LITTLE.encode("utf-16"))  # this machine's order, with its mark
    (ws / "memory" / "2026-11-06.md").write_bytes(b"\xfe\xff" + BIG.encode("utf-16-be"))
    (ws / "memory" / "no-mark.md").write_bytes("- the osprey nest\n".encode("utf-16-le"))
    (ws / "memory" / "latin1.md").write_bytes("- the pelican r\xe9sum\xe9\n".encode("latin-1"))
    return ws


def _config(tmp_path: Path, backend: str, ws: Path) -> Path:
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {"workspace": str(ws)}}}))
    return cfg


def _json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _walrus(answer: dict) -> None:
    hit = answer["results"][0]
    assert (hit["path"], hit["startLine"], hit["endLine"]) == ("memory/2026-11-05.md", 1, 4), answer["results"]
    assert "walrus budget for the Zürich office was approved: €1,200." in hit["snippet"], hit["snippet"]


@pytest.mark.parametrize("backend", ["builtin", "lancedb", "qdrant", "postgres"])
def test_a_utf16_note_with_its_mark_is_indexed_found_and_read_through_every_door(tmp_path, backend):
    ws = _workspace(tmp_path)
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}
    cfg = _config(tmp_path, backend, ws)
    report = _json(run_cli(tmp_path, cfg, "index", "--json"))
    assert report["filesSkipped"] == 1, report  # the file without a mark, as binary
    # Status, in a process of its own: the skipped file with its reason, and no change pending for it
    # (LanceDB and Qdrant named no skipped file there and were dirty after every index, as Postgres was;
    # and on those three "Changes: none" stood however many notes were edited).
    status = _json(run_cli(tmp_path, cfg, "status", "--json"))
    assert [s["path"] for s in status["skipped"]] == ["memory/no-mark.md"], status["skipped"]
    assert not status["dirty"] and status["index"]["pendingChanges"] == 0, status["index"]
    (ws / "MEMORY.md").write_text("# Memory\n- the user drinks green tea now\n")
    for resident in (False, True, True):  # cold, then the resident helper's answer
        status = _json(run_cli(tmp_path, cfg, "status", "--json", resident=resident))
        assert status["dirty"] and status["index"]["pendingChanges"] == 1, status["index"]
        assert [s["path"] for s in status["skipped"]] == ["memory/no-mark.md"], status["skipped"]
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    assert "1 file(s) changed since the last sync" in run_cli(tmp_path, cfg, "status").stdout
    assert _json(run_cli(tmp_path, cfg, "index", "--json"))["filesIndexed"] == 1
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}

    _walrus(_json(run_cli(tmp_path, cfg, "search", "walrus budget Zurich", "--json")))
    big = _json(run_cli(tmp_path, cfg, "search", "gannet survey", "--json"))["results"][0]
    assert big["path"] == "memory/2026-11-06.md" and "gannet survey moves to Thursday" in big["snippet"], big
    latin = _json(run_cli(tmp_path, cfg, "search", "pelican", "--json"))["results"][0]
    assert latin["path"] == "memory/latin1.md" and "r\ufffdsum\ufffd" in latin["snippet"], latin

    # Read back at the hit's lines: cold, then through the resident helper (its second call).
    for resident in (False, True, True):
        read = _json(run_cli(tmp_path, cfg, "get", "memory/2026-11-05.md", "--from", "3", "--lines", "2", "--json",
                             resident=resident))
        assert read["text"] == LITTLE.split("\n", 2)[2].rstrip("\n"), read  # lines 3-4, each with its CR
        assert read["totalLines"] == 4, read
    _walrus(_json(run_cli(tmp_path, cfg, "search", "walrus budget Zurich", "--json", resident=True)))
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")

    for found, got in tools_over_mcp(tmp_path, cfg, [("memory_search", {"query": "walrus budget Zurich"}),
                                                    ("memory_get", {"path": "memory/2026-11-06.md", "from": 3})]):
        _walrus(found)
        assert got["text"] == "- The gannet survey moves to Thursday.\n", got
    assert {p: p.read_bytes() for p in ws.rglob("*.md")} == before  # the notes are never rewritten


BOM = "\ufeff"
MARKED = {
    "memory/journal.md": BOM + "# 2026-11-02\n- Walked the dog along the canal, then fixed the bike.\n",
    "memory/2026-11-05.md": "- Walked the dog in the rain; the bike is still broken.\n",
    "MEMORY.md": BOM + "# Memory\n- The spare key is under the blue pot.\n",
}


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_a_utf8_byte_order_mark_is_not_text_through_every_door(tmp_path: Path, backend: str):
    ws = tmp_path / "ws"
    for rel, text in MARKED.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(text.encode("utf-8"))
    cfg = _config(tmp_path, backend, ws)
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    hits = _json(run_cli(tmp_path, cfg, "search", "what did I do on November 2?", "--json",
                         MEMSIFT_NOW="2026-12-07"))["results"]
    assert [h["path"] for h in hits][:1] == ["memory/journal.md"], [(h["path"], h["score"]) for h in hits]
    for question in ("spare key", "dog canal"):
        done = run_cli(tmp_path, cfg, "search", question, "--json")
        snippets = [h["snippet"] for h in _json(done)["results"]]
        assert snippets and not any(BOM in s for s in snippets), (question, done.stdout[-1500:])
    got = _json(run_cli(tmp_path, cfg, "get", "MEMORY.md", "--json"))
    assert got["text"] == MARKED["MEMORY.md"][1:] and got["totalLines"] == 2
    answers = tools_over_mcp(tmp_path, cfg, [("memory_get", {"path": "memory/journal.md", "lines": 1}),
                                            ("memory_search", {"query": "spare key"})])
    for got, found in answers:
        assert got["text"] == "# 2026-11-02"
        assert found["results"] and not any(BOM in h["snippet"] for h in found["results"])
    assert all((ws / rel).read_bytes() == text.encode("utf-8") for rel, text in MARKED.items())  # never changed


def test_the_reader_and_the_index_agree_on_a_marked_first_line(tmp_path: Path):
    def read(data: bytes, *args, **kwargs):
        note = tmp_path / "note.md"
        note.write_bytes(data)
        return read_open_file(os.open(note, os.O_RDONLY), *args, **kwargs)  # takes the descriptor and closes it

    data = (BOM + "# Title é\nsecond\n").encode("utf-8")
    assert decode_note(data) == "# Title é\nsecond\n"
    assert decode_note(b"a\n" + BOM.encode() + b"b\n") == "a\n\ufeffb\n"  # only a file's first bytes are a mark
    assert read(data) == ("# Title é\nsecond\n", 2, False)
    assert read(data, 1, 1, offset=2) == ("Title é", 2, False)  # offsets count from the text, as the index's
    assert read(BOM.encode()) == ("", 0, False)  # as empty as an empty file
