"""Unbounded input never becomes unbounded work or output: a 3.9 MB query is cut once for both
search sides, session keys leave bounded state behind, a denied key or refused path is echoed
shortened, one line of a 200 MB file is read without holding the file, and `~nosuchuser` paths
are refused clearly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import anyio
import pytest

from figures import FIGURES
from helpers import EXAMPLE_WORKSPACE, QMD_SAMPLES, make_settings
from memory_guard import assert_untouched, snapshot
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.compose.factory import open_manager
from memsift.engine.search.fts_query import MAX_QUERY_CHARS
from memsift.engine.mcp.server import MemoryServer

FAKEBIN = Path(__file__).resolve().parents[1] / "backends" / "qmd" / "fakebin"
HUGE_QUERY = "Lisbon trip with Lena " + "padding words about nothing " * 140_000  # 3.9 MB


class _RecordingProvider(FakeEmbeddingProvider):
    """Records the length of every query it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.query_lengths: list[int] = []

    async def embed_query(self, text):
        self.query_lengths.append(len(text))
        return await super().embed_query(text)


def test_a_huge_query_is_cut_once_for_both_sides_and_in_the_answer(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    provider = _RecordingProvider()
    notes = snapshot(ws)
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=provider)

    async def go():
        try:
            answer = await m.search(HUGE_QUERY, min_score=0)
            assert answer.results and answer.results[0].path == "memory/projects/travel.md"
            assert len(answer.query) <= MAX_QUERY_CHARS
        finally:
            await m.aclose()

    anyio.run(go)
    assert provider.query_lengths and max(provider.query_lengths) <= MAX_QUERY_CHARS
    assert_untouched(notes, ws)


def test_a_huge_query_reaches_qmd_cut_too(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    log = tmp_path / "qmd-calls.jsonl"
    for k, v in {
        "PATH": f"{FAKEBIN}:{os.environ['PATH']}",
        "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
        "FAKE_QMD_LOG": str(log),
    }.items():
        monkeypatch.setenv(k, v)
    settings = make_settings(tmp_path, ws, {"provider": "none"}, memory={"backend": "qmd", "qmd": {
        "includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}], "update": {"onBoot": False}}})
    m = open_manager(settings)
    answer = anyio.run(lambda: m.search("aurora telemetry " + "x" * 2_000_000, min_score=0))
    anyio.run(m.aclose)
    assert len(answer.query) <= MAX_QUERY_CHARS
    searches = [
        json.loads(line)["argv"] for line in log.read_text().splitlines() if "search" in json.loads(line)["argv"]
    ]
    assert searches and all(len(argv[-1]) <= MAX_QUERY_CHARS for argv in searches)


def test_session_keys_leave_bounded_state(tmp_path):
    """300 chats with 1 MB keys used to add 350 MB to the MCP server; now they are refused before
    any state is kept, and the keys that are kept are bounded in number and size."""
    from memsift.backends.builtin.recent_keys import RecentKeys

    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    settings = make_settings(tmp_path, ws, {"provider": "none"}, memory={"qmd": {"scope": {"default": "allow"}}})
    manager = open_manager(settings)
    memory = MemoryServer(manager, settings)

    async def go():
        await memory.search("ledger")
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(300):
            out = await memory.search("ledger", session_key=f"agent:main:telegram:direct:{i}:" + "k" * 2**20)
            assert out.denied is not None and len(out.model_dump_json()) < 4000
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        await manager.aclose()
        return grown

    grown = anyio.run(go)
    assert grown < 20 * 2**20, grown  # no megabyte per key kept
    seen = RecentKeys(limit=100)
    for i in range(10_000):
        assert seen.is_new(f"agent:main:telegram:direct:{i}:" + "k" * 400)
    assert len(seen) == 100 and not seen.is_new("agent:main:telegram:direct:9999:" + "k" * 400)
    FIGURES["session keys of 1 MB sent to the MCP tools (memory kept: bounded)"] += 300


def test_refused_paths_are_echoed_shortened_once(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    settings = make_settings(tmp_path, ws)
    manager = open_manager(settings)
    memory = MemoryServer(manager, settings)
    long_path = "../" + "a" * 6000 + ".md"
    out = anyio.run(lambda: memory.get(long_path))
    anyio.run(manager.aclose)
    body = out.model_dump_json()
    assert out.disabled and len(body) < 1000, len(body)


@pytest.mark.parametrize("where", ["mcp", "cli"])
def test_an_unknown_users_home_is_a_refused_path_not_a_crash(tmp_path, where):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    if where == "mcp":
        settings = make_settings(tmp_path, ws)
        manager = open_manager(settings)
        out = anyio.run(lambda: MemoryServer(manager, settings).get("~nosuchuser/x.md"))
        anyio.run(manager.aclose)
        assert out.disabled and "nosuchuser" in out.error and "home" in out.error
        return
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
        "MEMSIFT_NO_RESIDENT": "1",
        "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
    }
    r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "get", "~nosuchuser/x.md"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 6 and "Traceback" not in r.stderr and "nosuchuser" in r.stderr, r.stderr[-1500:]
    cfg = tmp_path / "cfg.json"
    collection = {"path": "~nosuchuser/notes", "name": "notes"}
    for key, memory in (
        ({"extraPaths": ["~nosuchuser/notes"]}, {}),
        ({"store": {"path": "~nosuchuser/index.sqlite"}}, {}),
        ({}, {"qmd": {"paths": [collection]}}),
        ({"qmd": {"extraCollections": [collection]}}, {}),
    ):
        cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": key}}, "memory": memory}))
        r = subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "search", "x"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert r.returncode == 3 and "Traceback" not in r.stderr and "nosuchuser" in r.stderr, r.stderr[-1500:]


def _with_peak_memory(code: str, arg: Path) -> dict:
    """`code` run in a new Python with `sys.argv[1] = arg`: the dict it leaves in `out`, plus
    `peak_mb`, its peak resident memory (VmHWM, not ru_maxrss: a child forked from pytest inherits
    the parent's ru_maxrss)."""
    probe = ("import json, re, sys\n" + code +
             "out['peak_mb'] = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024\n"
             "print(json.dumps(out))\n")
    r = subprocess.run([sys.executable, "-c", probe, str(arg)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_one_line_of_a_200_mb_file_is_read_without_holding_the_file(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    big = ws / "memory" / "huge.md"
    line = b"- a line of a very long log, padded to make the file big " + b"x" * 60 + b"\n"
    with open(big, "wb") as fh:
        block = line * 8192
        for _ in range(200 * 2**20 // len(block)):
            fh.write(block)
        fh.write(b"- the last line\n")
    out = _with_peak_memory(
        "from pathlib import Path\n"
        "from memsift.engine.files.rules import read_memory_file\n"
        "rel, text, total, missing = read_memory_file(Path(sys.argv[1]), (), 'memory/huge.md', 3, 1)\n"
        "last = read_memory_file(Path(sys.argv[1]), (), 'memory/huge.md', total, 1)[1]\n"
        "out = {'text': text, 'total': total, 'last': last}\n", ws)
    assert out["text"] == line.decode().rstrip("\n") and out["last"] == "- the last line"
    assert out["total"] == big.read_bytes().count(b"\n")  # the final newline ends the last line
    FIGURES["peak RSS MB reading one line of a 200 MB file"] = out["peak_mb"]
    assert out["peak_mb"] < 200, out  # it used to hold the file, decoded and split: 780 MB


def test_a_200_mb_transcript_is_indexed_without_holding_the_file(tmp_path):
    """An agent's transcript with images inline (4 MB of base64 a message) grows to hundreds of MB:
    it was read whole, decoded and split (a 315 MB one peaked at 622 MB), on a gateway's small
    machine. It is read line by line, for the builtin index and QMD's export alike."""
    transcript = tmp_path / "t.jsonl"
    image = "A" * (4 * 2**20)
    with open(transcript, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "session", "id": "t"}) + "\n")
        for i in range(50):
            fh.write(json.dumps({"type": "message", "message": {"role": "user", "content": f"walrus question {i}",
                                                                "timestamp": 1_700_000_000_000}}) + "\n")
            fh.write(json.dumps({"type": "message", "message": {"role": "assistant", "content": [
                {"type": "text", "text": f"walrus picture {i}"}, {"type": "image", "data": image}]}}) + "\n")
    out = _with_peak_memory(
        "from memsift.engine.files.discovery import MemoryFile\n"
        "from memsift.engine.files.sync import read_transcript\n"
        "got = read_transcript(MemoryFile(sys.argv[1], 'sessions/t.jsonl', source='sessions'), [],\n"
        "                      strategy='evidence', tokens=400, overlap=0)\n"
        "text = ' '.join(c.text for c in got.chunks)\n"
        "out = {'users': text.count('User: walrus question'), 'pictures': text.count('walrus picture'),\n"
        "       'last': got.chunks[-1].end_line}\n", transcript)
    assert out["users"] == 50 and out["pictures"] == 50 and out["last"] == 101, out  # every message, JSONL lines
    FIGURES["peak RSS MB indexing a 200 MB transcript"] = out["peak_mb"]
    assert out["peak_mb"] < 150, out  # it used to hold the file, decoded and split


def test_a_200_mb_one_line_note_is_read_in_bounded_pages_with_any_offset(tmp_path):
    """memory_get with `offset` 150,000,000 into a 200 MB line, and the CLI's `get --lines 1` of it:
    the skipped characters are streamed past and one read returns a bounded page that says where
    the rest starts (the MCP server peaked at 502 MB and the CLI printed all 200 MB)."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    with open(ws / "memory" / "one-line.md", "wb") as fh:
        unit = b"0123456789" * 1024
        for _ in range(200 * 2**20 // len(unit)):
            fh.write(unit)
        fh.write(b"\xf0\x9f\x98\x80 tail\n")  # an emoji at the very end: counted as 2 UTF-16 units
    probe = (
        "import anyio, json, re, sys\n"
        "from pathlib import Path\n"
        "from helpers import make_settings\n"
        "from memsift.engine.compose.factory import open_manager\n"
        "from memsift.engine.mcp.server import MemoryServer\n"
        "ws, tmp = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "settings = make_settings(tmp, ws, {'provider': 'none'})\n"
        "async def go():\n"
        "    server = MemoryServer(open_manager(settings), settings)\n"
        "    page = await server.get('memory/one-line.md', offset=150_000_000)\n"
        "    end = await server.get('memory/one-line.md', offset=200 * 2**20 - 4)\n"
        "    return page, end\n"
        "page, end = anyio.run(go)\n"
        "peak = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024\n"
        "print(json.dumps({'page': page.model_dump(by_alias=True), 'end': end.model_dump(by_alias=True), 'peak_mb': peak}))\n"  # noqa: E501
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run(
        [sys.executable, "-c", probe, str(ws), str(tmp_path)], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    page, end = out["page"], out["end"]
    assert page["truncated"] and page["text"].startswith("0123456789") and page["nextFrom"] == 1
    assert page["nextOffset"] == 150_000_000 + len(page["text"]) and len(page["text"]) <= 4000
    assert end["text"] == "6789\U0001f600 tail\n" and not end["truncated"]
    FIGURES["peak RSS MB of memory_get at offset 150,000,000 of a 200 MB line"] = out["peak_mb"]
    assert out["peak_mb"] < 200, out
    cli = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "get", "memory/one-line.md",
                          "--lines", "1"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state")})
    assert cli.returncode == 0 and len(cli.stdout) <= 1_000_001, len(cli.stdout)
    assert "cut at 1,000,000 characters" in cli.stderr and "--from 1 --offset 1000000" in cli.stderr, cli.stderr
