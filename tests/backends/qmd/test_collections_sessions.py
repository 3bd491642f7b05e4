from __future__ import annotations

import json
import os
import time

from helpers import make_settings
from memsift.backends.qmd.collections import resolve_collections, slug_name
from memsift.backends.qmd.sessions import export_sessions
from memsift.engine.files.transcripts import flatten_transcript


def test_collection_names_follow_the_reference(tmp_path):
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    outside = tmp_path / "shared"
    outside.mkdir()
    s = make_settings(
        tmp_path,
        ws,
        {"extraPaths": ["notes", "extra dir"]},
        memory={
            "qmd": {
                "paths": [
                    {"path": "notes", "name": "My Notes"},
                    {"path": str(outside), "name": "Team Wiki"},
                    {"path": "notes"},
                    {"path": "runbooks"},
                ]
            }
        },
    )
    cols = [(c.name, c.path.name, c.pattern, c.kind) for c in resolve_collections(s, tmp_path / "exp")]
    assert cols == [
        ("memory-root-main", "ws", "MEMORY.md", "memory"),
        ("memory-dir-main", "memory", "**/*.md", "memory"),
        ("my-notes-main", "notes", "**/*.md", "custom"),  # inside the workspace: agent suffix
        ("team-wiki", "shared", "**/*.md", "custom"),  # outside: the name verbatim (slugged)
        ("custom-4-main", "runbooks", "**/*.md", "custom"),  # "notes" again is a duplicate, dropped
        ("custom-6-main", "extra dir", "**/*.md", "custom"),
        ("sessions-main", "exp", "**/*.md", "sessions"),
    ]
    assert slug_name("  ") == "collection" and slug_name("A_b C") == "a-b-c"


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\nnot json\n")


def test_session_export_flattens_redacts_and_prunes(tmp_path):
    src, out = tmp_path / "sessions", tmp_path / "export"
    src.mkdir()
    _jsonl(
        src / "s1.jsonl",
        [
            {
                "type": "message",
                "message": {"role": "user", "content": "my key is sk-abcdefghijklmnopqrstuv and\nplease remember"},
            },
            {
                "type": "message",
                "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted."}, {"type": "tool_use"}]},
            },
            {"type": "message", "message": {"role": "system", "content": "hidden"}},
            {"type": "event"},
        ],
    )
    _jsonl(src / "old.jsonl", [{"type": "message", "message": {"role": "user", "content": "ancient"}}])
    old_time = time.time() - 40 * 86400
    os.utime(src / "old.jsonl", (old_time, old_time))
    (out).mkdir()
    manifest = tmp_path / "state" / "manifest.json"
    (out / "user-note.md").write_text("# mine, not exported")
    # A marker in the text proves nothing: only files in memsift's manifest are ever deleted.
    (out / "gone.md").write_text("# Session gone\n<!-- exported by memsift from gone.jsonl -->\n")
    _jsonl(src / "gone2.jsonl", [{"type": "message", "message": {"role": "user", "content": "soon gone"}}])
    stats = export_sessions(src, out, retention_days=30, manifest=manifest)
    assert (out / "gone2.md").exists()
    (src / "gone2.jsonl").unlink()
    stats = export_sessions(src, out, retention_days=30, manifest=manifest)
    text = (out / "s1.md").read_text()
    assert text.startswith("# Session s1\n") and "User: my key is [redacted] and please remember" in text
    assert "Assistant: Noted." in text and "hidden" not in text and "sk-abc" not in text
    assert not (out / "old.md").exists() and not (out / "gone2.md").exists()  # its own export of a gone transcript
    assert (out / "user-note.md").exists() and (out / "gone.md").exists()  # never deletes what it did not write
    assert stats.as_dict() == {"written": 0, "unchanged": 1, "removed": 1}
    assert export_sessions(src, out, retention_days=30, manifest=manifest).unchanged == 1
    assert flatten_transcript("").lines == []
    t = flatten_transcript((src / "s1.jsonl").read_text())
    assert t.line_map == [1, 2]  # each flattened line points at its JSONL line


def test_session_export_never_replaces_or_deletes_a_file_it_did_not_write(tmp_path):
    src, out, manifest = tmp_path / "sessions", tmp_path / "export", tmp_path / "state" / "manifest.json"
    src.mkdir()
    out.mkdir()
    for name in ("2026-01-05", "edited", "linked", "fresh"):
        _jsonl(src / f"{name}.jsonl", [{"type": "message", "message": {"role": "user", "content": f"talk of {name}"}}])
    (out / "2026-01-05.md").write_text("- the user's own note of that day\n")  # same name as a transcript
    (tmp_path / "victim.md").write_text("- outside the export folder\n")
    os.symlink(tmp_path / "victim.md", out / "linked.md")
    first = export_sessions(src, out, None, manifest=manifest)
    assert (out / "2026-01-05.md").read_text() == "- the user's own note of that day\n"
    assert (tmp_path / "victim.md").read_text() == "- outside the export folder\n" and (out / "linked.md").is_symlink()
    assert sorted(first.kept) == ["2026-01-05.md", "linked.md"] and first.written == 2
    assert "left 2 file(s) alone" in first.notes()[0]
    # An export the user edited afterwards is theirs now: neither rewritten nor deleted.
    (out / "edited.md").write_text("# Session edited\n- with my own remark\n")
    _jsonl(src / "edited.jsonl", [{"type": "message", "message": {"role": "user", "content": "changed talk"}}])
    (src / "fresh.jsonl").unlink()
    second = export_sessions(src, out, None, manifest=manifest)
    assert "my own remark" in (out / "edited.md").read_text() and "edited.md" in second.kept
    assert not (out / "fresh.md").exists() and second.removed == 1  # its own untouched export of a gone transcript
    (src / "edited.jsonl").unlink()
    export_sessions(src, out, None, manifest=manifest)
    assert (out / "edited.md").exists() and (out / "2026-01-05.md").exists()
    assert not list(out.glob(".memsift-export-*"))  # no temp file left behind


def test_a_tampered_manifest_never_deletes_a_file_outside_the_export_folder(tmp_path):
    """Entries naming notes outside the folder, with their real hashes, are ignored; the folder's own
    exports are still pruned."""
    import hashlib

    ws, src, manifest = tmp_path / "ws", tmp_path / "sessions", tmp_path / "state" / "manifest.json"
    out = ws / "sessions-export"
    (ws / "memory" / "projects").mkdir(parents=True)
    notes = {"MEMORY.md": "# Memory\n- the ledger runs on Postgres\n", "memory/2026-01-07.md": "- a day\n",
             "memory/projects/travel.md": "- Lisbon in May\n"}
    for rel, text in notes.items():
        (ws / rel).write_text(text)
    src.mkdir()
    _jsonl(src / "gone.jsonl", [{"type": "message", "message": {"role": "user", "content": "soon gone"}}])
    export_sessions(src, out, None, manifest=manifest)
    (src / "gone.jsonl").unlink()
    doc = json.loads(manifest.read_text())
    digest = {rel: hashlib.sha256((ws / rel).read_bytes()).hexdigest() for rel in notes}
    doc["files"].update({"../memory/2026-01-07.md": digest["memory/2026-01-07.md"],
                         str(ws / "MEMORY.md"): digest["MEMORY.md"],
                         "../memory/projects/travel.md": digest["memory/projects/travel.md"],
                         "..": "x", "sub/dir.md": "y"})
    manifest.write_text(json.dumps(doc))
    report = export_sessions(src, out, None, manifest=manifest)
    assert report.removed == 1 and not (out / "gone.md").exists()  # its own export, still pruned
    for rel, text in notes.items():
        assert (ws / rel).read_text() == text
    assert set(json.loads(manifest.read_text())["files"]) == set()
