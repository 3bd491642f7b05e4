"""A session transcript is read as it is found: a torn line, JSON nested past the parser's depth, a
text block that is no text, a timestamp that is no moment. Each such line is skipped (or its time
left unknown); the rest of the transcript is indexed, through every backend that reads transcripts
(the builtin index, QMD's export) and the CLI. A line of arrays nested 200,000 deep made every sync
end in a RecursionError traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.qmd.sessions import export_sessions
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.files.transcripts import flatten_transcript


def _message(role: str, content, **extra) -> bytes:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}, **extra}).encode()


HOSTILE = b"\n".join([
    _message("user", [{"type": "text", "text": "what should the giraffe eat?"}], timestamp="2026-12-01T10:00:00Z"),
    b"{torn line",
    b"[" * 200_000 + b"]" * 200_000,  # past the JSON parser's recursion limit
    b'{"type": "message", "message": {"role": "assistant", "content": "caf\xe9 \xff undecodable bytes"}}',
    _message("assistant", [{"type": "text", "text": 5}, {"type": "text", "text": "giraffe food budget 40 EUR"}]),
    _message("assistant", {"nested": [1, 2, {"text": 5}]}),
    json.dumps({"type": "message", "message": "a string"}).encode(),
    json.dumps([1, 2, 3]).encode(),
    _message("user", "a timestamp far past 9999", timestamp=1e300),
    b'{"type": "message", "timestamp": NaN, "message": {"role": "user", "content": "a timestamp of NaN"}}',
    _message("user", "a timestamp in year 1", timestamp="0001-01-01T00:00:00+14:00"),
]) + b"\n"


def test_hostile_lines_are_skipped_and_the_rest_is_read():
    t = flatten_transcript(HOSTILE.decode("utf-8", "replace"))
    assert t.lines == [
        "User: what should the giraffe eat?",
        "Assistant: caf\ufffd \ufffd undecodable bytes",
        "Assistant: giraffe food budget 40 EUR",
        "User: a timestamp far past 9999",
        "User: a timestamp of NaN",
        "User: a timestamp in year 1",
    ]
    assert t.line_map == [1, 4, 5, 9, 10, 11]
    assert t.timestamps[0] > 0 and t.timestamps[1:] == [0.0] * 5  # unknown, not a crash or year 1e297


def _sessions(tmp_path: Path) -> Path:
    folder = tmp_path / "state" / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    (folder / "hostile.jsonl").write_bytes(HOSTILE)
    return folder


def test_the_builtin_index_and_the_qmd_export_read_the_rest(tmp_path, example_workspace):
    sessions = _sessions(tmp_path)
    settings = make_settings(tmp_path, example_workspace,
                             {"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}})

    async def search():
        m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
        try:
            await m.sync(reason="search")
            return (await m.search("giraffe food budget", min_score=0)).results
        finally:
            await m.aclose()

    hits = anyio.run(search)
    assert hits and hits[0].path == "sessions/hostile.jsonl" and "giraffe food budget" in hits[0].snippet
    exported = tmp_path / "export"
    report = export_sessions(sessions, exported, None, manifest=tmp_path / "manifest.json")
    assert report.written == 1 and "Assistant: giraffe food budget 40 EUR" in (exported / "hostile.md").read_text()


def test_the_cli_indexes_and_searches_a_hostile_transcript(tmp_path, example_workspace):
    _sessions(tmp_path)
    config = tmp_path / "memsift.json5"
    config.write_text(json.dumps({"memorySearch": {"sources": ["memory", "sessions"],
                                                   "experimental": {"sessionMemory": True}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update(MEMSIFT_NO_RESIDENT="1", MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "x"))
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(example_workspace), "-c", str(config)]
    r = subprocess.run([*base, "index"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run([*base, "search", "giraffe food budget", "--json"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["path"] == "sessions/hostile.jsonl"
