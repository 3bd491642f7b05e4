"""Hostile session keys: over a thousand spellings of keys the scope rules deny (spaces, control,
zero-width and bidi characters, fullwidth and mathematical letters, upper case, empty segments,
colon look-alikes, and pairs of these) go through every tool that reads memory, memory_search,
memory_get and memory_status, on both backends, and through the CLI; none may be allowed."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from figures import FIGURES
from helpers import QMD_SAMPLES, make_settings
from memory_guard import assert_untouched, snapshot
from memsift.engine.compose.factory import open_manager
from memsift.engine.mcp.server import MemoryServer

FAKEBIN = Path(__file__).resolve().parents[1] / "backends" / "qmd" / "fakebin"
SCOPE = {
    "default": "deny",
    "rules": [
        {"action": "deny", "match": {"rawKeyPrefix": "agent:main:discord"}},
        {"action": "deny", "match": {"keyPrefix": "subagent:"}},
        {"action": "allow", "match": {"chatType": "direct"}},
        {"action": "allow", "match": {"chatType": "channel"}},
    ],
}
CHANNELS = ["telegram", "slack", "whatsapp", "signal", "matrix", "msteams", "irc", "line"]
DENIED_BASES = (
    [f"agent:main:{ch}:group:{i}" for i, ch in enumerate(CHANNELS, 40)]
    + [f"agent:main:{ch}:acct2:group:-100{i}" for i, ch in enumerate(CHANNELS[:4])]
    + ["agent:main:slack:group:G1:thread:1700000000.0001", "agent:main:telegram:group:-100123:topic:42"]
    + ["agent:main:discord:direct:1", "agent:main:discord:channel:C7", "agent:main:discord:group:42"]
    + ["agent:main:subagent:task-1", "subagent:x", "agent:main:subagent:discord:direct:9"]
    # A chat type nobody knows may be a group: the rules deny groups, so these are denied too.
    + ["agent:main:telegram:grp:40", "agent:main:slack:guild:7:thread:1"]
)
ALLOWED = ["agent:main:telegram:direct:7", "agent:main:slack:channel:C1", "agent:main:main", None]
INVISIBLE = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u00ad",
    "\u202e",
    "\u2066",
    "\u180e",
    "\u034f",
    "\u3164",
]
CONTROL = ["\n", "\t", "\r", "\x00", "\x0b", "\x1f", "\x7f", "\x85", "\x1b"]
# Whole terminal escape sequences: removing only the ESC used to leave `group[31m`, an unknown
# segment, and the key counted as direct.
ESCAPES = ["\x1b[31m", "\x1b[0m", "\x1b[1;32m", "\x1b]0;title\x07", "\x9b31m", "\x1b(B"]
LOOKALIKE_COLONS = ["\u2236", "\ua789", "\u02d0", "\ufe13", "\u05c3",
                    # NFKC turns U+FE30 into "..": it was allowed on every tool; and ten more confusables
                    "\ufe30", "\ua4fd", "\u02f8", "\u205a", "\u0903", "\u0a83", "\u0703", "\u0704", "\u2e35", "\u2982",
                    "\u1365"]


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) - 0x21 + 0xFF01) if "!" <= c <= "~" else c for c in s)


def _math_bold(s: str) -> str:
    return "".join(chr(0x1D41A + ord(c) - 97) if "a" <= c <= "z" else c for c in s)


def _segment_mutations(seg: str) -> list[str]:
    out = [f" {seg}", f"{seg} ", f"  {seg}\t", seg.upper(), seg.title(), _fullwidth(seg), _math_bold(seg)]
    mid = max(1, len(seg) // 2)
    for ch in INVISIBLE + CONTROL + ESCAPES:
        out += [ch + seg, seg + ch, seg[:mid] + ch + seg[mid:]]
    out.append(seg[:mid] + " " + seg[mid:])  # a space inside: malformed
    return out


def _key_mutations(key: str) -> list[str]:
    parts = key.split(":")
    out = []
    for i, seg in enumerate(parts):
        for m in _segment_mutations(seg):
            out.append(":".join(parts[:i] + [m] + parts[i + 1 :]))
    for i in range(1, len(parts)):
        out.append(":".join(parts[:i]) + "::" + ":".join(parts[i:]))  # an empty segment
        out.append(":".join(parts[:i]) + "：" + ":".join(parts[i:]))  # a fullwidth colon
        out += [":".join(parts[:i]) + c + ":".join(parts[i:]) for c in LOOKALIKE_COLONS]
    out += [":" + key, key + ":", f"  {key.upper()}  ", "\u202e" + key, key + "\n" + "agent:main:main"]
    return out


def hostile_keys() -> list[str]:
    keys: list[str] = []
    for base in DENIED_BASES:
        singles = _key_mutations(base)
        keys += singles
        rng = random.Random(base)
        for _ in range(12):  # pairs of mutations: mutate an already mutated key again
            keys.append(rng.choice(_key_mutations(rng.choice(singles))))
    return list(dict.fromkeys(keys))


KEYS = hostile_keys()


def test_the_generator_makes_over_a_thousand_hostile_keys():
    assert len(KEYS) >= 1000
    kinds = " ".join(KEYS)
    assert "\u200b" in kinds and "\x00" in kinds and "ｇｒｏｕｐ" in kinds and "::" in kinds and "\u2236" in kinds
    assert "\ufe30" in kinds and "group\x1b[31m" in kinds and ":grp:" in kinds


@pytest.fixture
def fake_qmd(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKEBIN}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_QMD_SAMPLES", str(QMD_SAMPLES))
    monkeypatch.setenv("FAKE_QMD_LOG", str(tmp_path / "qmd-calls.jsonl"))


def _settings(tmp_path, ws, backend):
    return make_settings(
        tmp_path,
        ws,
        {"provider": "none"},
        memory={
            "backend": backend,
            "qmd": {
                "scope": SCOPE,
                "includeDefaultMemory": False,
                "paths": [{"path": ".", "name": "notes"}],
                "update": {"onBoot": False},
            },
        },
    )


@pytest.mark.parametrize("backend", ["builtin", "qmd"])
def test_no_hostile_key_is_allowed_by_any_tool(tmp_path, fake_qmd, backend):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    settings = _settings(tmp_path, ws, backend)
    before = snapshot(ws)
    manager = open_manager(settings)
    memory = MemoryServer(manager, settings)
    wrongly = {"memory_search": [], "memory_get": [], "memory_status": []}

    async def go():
        try:
            for key in KEYS:
                found = await memory.search("aurora telemetry", session_key=key, min_score=0)
                if found.denied is None or found.results:
                    wrongly["memory_search"].append(key)
                got = await memory.get("MEMORY.md", session_key=key)
                if got.denied is None or got.text:
                    wrongly["memory_get"].append(key)
                st = await memory.status(session_key=key)
                if st.denied is None or st.status is not None:
                    wrongly["memory_status"].append(key)
            # The rules still let the chats they allow in (the test would pass on "deny all").
            for key in ALLOWED:
                assert (await memory.get("MEMORY.md", session_key=key)).text, key
        finally:
            await manager.aclose()

    anyio.run(go)
    for tool, keys in wrongly.items():
        FIGURES[f"hostile session keys tried ({tool}, {backend})"] += len(KEYS)
        FIGURES[f"hostile session keys wrongly allowed ({tool}, {backend})"] += len(keys)
        assert not keys, (tool, [repr(k) for k in keys[:10]])
    assert not (tmp_path / "qmd-calls.jsonl").exists()  # no denied call ran qmd
    assert_untouched(before, ws)


def _cli_setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A workspace, a config with the scope rules and an environment for the CLI (no helper)."""
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {
                "stateDir": str(tmp_path / "state"),
                "agents": {"defaults": {"memorySearch": {"provider": "none"}}},
                "memory": {"qmd": {"scope": SCOPE}},
            }
        )
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1"}
    return ws, cfg, env


def test_the_cli_denies_hostile_keys_too(tmp_path):
    ws, cfg, env = _cli_setup(tmp_path)
    sample = [k for k in random.Random(7).sample(KEYS, 40) if "\x00" not in k][:8]  # argv cannot hold NUL
    wrongly = []
    for key, command in itertools.product(sample, (["search", "aurora"], ["get", "MEMORY.md"], ["status"])):
        r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), *command,
                            "--json", "--session-key", key], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-1000:]
        body = json.loads(r.stdout)
        if not body.get("denied") or body.get("results") or body.get("text") or body.get("files"):
            wrongly.append((command[0], key))
        FIGURES["hostile session keys tried (CLI search/get/status)"] += 1
    FIGURES["hostile session keys wrongly allowed (CLI search/get/status)"] += len(wrongly)
    assert not wrongly


@pytest.mark.parametrize("command", [["mcp"], ["search", "aurora"], ["get", "MEMORY.md"], ["status"]])
def test_an_empty_session_key_is_refused_at_start(tmp_path, command):
    """`--session-key ""` (an unset shell variable) is not a key: it used to fix MCP's key to "local
    caller" and then allow every per-call key, group keys included."""
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
           "MEMSIFT_STATE_DIR": str(tmp_path / "state")}
    for empty in ("", "  "):
        r = subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), *command, "--session-key", empty],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == 2 and "--session-key" in r.stderr and "empty" in r.stderr, (command, r.stderr)
        assert r.stdout == "" and "Traceback" not in r.stderr
    settings = _settings(tmp_path, ws, "builtin")
    with pytest.raises(ValueError, match="session key"):
        MemoryServer(open_manager(settings), settings, session_key=" ")


def test_a_key_that_is_not_valid_unicode_is_denied_alike_on_every_door(tmp_path):
    """A lone surrogate reaches the CLI as undecodable argv bytes, MCP as a JSON escape (made U+FFFD
    on the way in) and the Python API as it is: one decision, denied on all three."""
    ws, cfg, env = _cli_setup(tmp_path)
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws)]
    for raw in (b"agent:main:telegram:direct:\xed\xa0\x80", b"agent:main:telegram:direct:\xff"):
        r = subprocess.run(
            [*base, "search", "aurora", "--json", "--session-key", raw], capture_output=True, env=env, timeout=120
        )
        body = json.loads(r.stdout)
        assert r.returncode == 0 and body["denied"]["rule"].startswith("malformed session key (not valid Unicode)"), (
            body
        )
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    keys = [
        "agent:main:telegram:direct:\\ud800",
        "agent:main:telegram:direct:\\udfff",
        "agent:main:telegram:direct:\\ufffd",
    ]
    calls = [json.dumps(r) for r in requests] + [
        '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_search","arguments":'
        '{"query":"aurora","sessionKey":"%s"}}}' % (i, key) for i, key in enumerate(keys, 2)]
    server = subprocess.Popen([*base, "mcp", "--no-watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env)
    answers = []
    try:
        for line in calls:  # one at a time, each answered before the next (stdin stays open)
            server.stdin.write(line.encode() + b"\n")
            server.stdin.flush()
            if '"id"' in line:
                answers.append(json.loads(server.stdout.readline()))
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    found = [a["result"]["structuredContent"] for a in answers if a["id"] >= 2]
    assert len(found) == len(keys) and all(c["denied"]["rule"].startswith("malformed session key") for c in found), (
        found
    )
    settings = _settings(tmp_path, ws, "builtin")
    manager = open_manager(settings)

    async def api() -> list:
        try:
            return [
                await manager.search("aurora", session_key=f"agent:main:telegram:direct:{ch}")
                for ch in ("\ud800", "\ufffd")
            ]
        finally:
            await manager.aclose()

    assert all(a.denied and "not valid Unicode" in a.denied.rule and not a.results for a in anyio.run(api))
    FIGURES["session keys that are not valid Unicode denied alike (CLI, MCP, API)"] += 7
