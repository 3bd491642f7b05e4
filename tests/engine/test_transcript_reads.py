"""memory_get of a session transcript a search cited (`sessions/<name>.jsonl`, archives included),
judged and read once for every backend (`MemoryRules`): its messages as the index shows them, at
the JSONL's line numbers, secrets redacted, paged like a Markdown file; refused with what to do
when sessions are no source; never a path out of the sessions folder, a symlink or a `.bak.`
archive. Before, every read of a transcript hit failed ("only .md memory files can be read") and
the hits of reset or deleted chats' archives were dropped. The doors: test_session_doors.py and the
backend contract."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from helpers import make_settings
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.files.rules import MemoryRules, read_memory

SESSIONS = {"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}}


def _line(role: str, content: str) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}})


@pytest.fixture
def rules(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = make_settings(tmp_path, ws, SESSIONS)
    folder = tmp_path / "state" / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    lines = [json.dumps({"type": "session", "id": "abc"}), _line("user", "where is the boat key?"),
             json.dumps({"type": "tool", "name": "search"}), "{torn line",
             _line("assistant", "Under the mat; the alarm code is password: hunter2-hunter2"),
             _line("user", "é" * 50)]
    (folder / "abc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "abc.jsonl.deleted.2026-11-30T08-00-00.000Z").write_text(_line("user", "archived words") + "\n")
    (folder / "abc.jsonl.bak.1").write_text(_line("user", "a backup") + "\n")
    (tmp_path / "secret.jsonl").write_text(_line("user", "outside") + "\n")
    os.symlink(tmp_path / "secret.jsonl", folder / "linked.jsonl")
    return MemoryRules.from_settings(settings)


def _read(rules: MemoryRules, path: str, start=None, lines=None, **kw):
    return anyio.run(lambda: read_memory(rules, path, start, lines, **kw))


def test_a_transcript_reads_as_its_messages_at_its_line_numbers(rules):
    whole = _read(rules, "sessions/abc.jsonl")
    shown = whole.text.split("\n")
    assert whole.total_lines == 6 and len(shown) == 6, whole
    assert shown[1] == "User: where is the boat key?" and shown[0] == shown[2] == shown[3] == ""
    assert shown[4] == "Assistant: Under the mat; the alarm code is [redacted]"  # as the index holds it
    assert _read(rules, "sessions/abc.jsonl", 5, 1).text == shown[4]
    assert _read(rules, "sessions/abc.jsonl", 2, 1).text == "User: where is the boat key?"
    assert _read(rules, "sessions/abc.jsonl.deleted.2026-11-30T08-00-00.000Z").text == "User: archived words"
    assert _read(rules, "sessions/gone.jsonl").missing


def test_a_long_read_comes_in_pages_that_join_up(rules):
    first = _read(rules, "sessions/abc.jsonl", 5, None, max_chars=40)
    assert first.truncated and first.next_from == 5 and first.next_offset == 40, first
    rest = _read(rules, "sessions/abc.jsonl", first.next_from, None, offset=first.next_offset)
    assert first.text + rest.text == _read(rules, "sessions/abc.jsonl", 5).text


@pytest.mark.parametrize("path", ["sessions/../secret.jsonl", "sessions/linked.jsonl", "sessions/abc.jsonl.bak.1",
                                  "sessions/sub/abc.jsonl", "sessions/abc.json", "sessions/a\x00b.jsonl",
                                  "sessions/" + "x" * 300 + ".jsonl"])
def test_nothing_else_is_read_through_the_sessions_prefix(rules, path):
    with pytest.raises(PathNotAllowedError):
        _read(rules, path)


def test_without_sessions_a_source_a_read_says_what_to_set(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    plain = MemoryRules.from_settings(make_settings(tmp_path, ws))
    with pytest.raises(PathNotAllowedError, match="memorySearch.sources"):
        _read(plain, "sessions/abc.jsonl")
    assert not plain.admits_hit("sessions/abc.jsonl.bak.1", "sessions")
    assert plain.admits_hit("sessions/abc.jsonl.reset.2026-11-01T10-00-00.000Z", "sessions")
