"""Scope: a table of allow/deny decisions over session keys from every chat type and channel,
including thread/topic keys and malformed keys; a denied search never spawns QMD (nor the builtin
fallback) and never returns a hit, and the denial is visible in the answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from figures import FIGURES
from helpers import QMD_SAMPLES, make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.qmd import QmdSearchManager
from memsift.engine.config.models import QmdConfig, ScopeConfig
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.compose.fallback import FallbackSearchManager
from memsift.engine.compose.scoped import scoped
from memsift.engine.config.scope import decide_scope, parse_session_key

FAKEBIN = Path(__file__).resolve().parents[1] / "backends" / "qmd" / "fakebin"
DEFAULT = QmdConfig().scope  # deny; allow direct; allow channel
CHANNELS = ["telegram", "discord", "slack", "whatsapp", "signal", "imessage", "googlechat", "msteams",
            "matrix", "mattermost", "line", "irc", "webchat", "feishu", "zalo", "nostr", "cli"]
CHAT_TYPES = {"direct": "direct", "dm": "direct", "group": "group", "channel": "channel"}
FORMS = [
    "agent:main:{ch}:{chat}:12345",
    "agent:main:{ch}:acct2:{chat}:12345",  # multi-account
    "agent:ops:{ch}:{chat}:+15550001",
    "{ch}:{chat}:12345",  # without the agent prefix
    "  AGENT:Main:{CH}:{CHAT}:Abc  ",  # case and whitespace
    "agent:main:{ch}:{chat}:12345:thread:1700000000.0001",  # threads
    "agent:main:{ch}:{chat}:-100123:topic:42",  # telegram-style forum topics
]


def _table() -> list[tuple[str, str | None, str]]:
    rows = []
    for ch in CHANNELS:
        for chat, kind in CHAT_TYPES.items():
            for form in FORMS:
                key = form.format(ch=ch, chat=chat, CH=ch.upper(), CHAT=chat.upper())
                rows.append((key, ch, kind))
    return rows


TABLE = _table()


def test_every_channel_and_chat_type_under_the_default_scope():
    for key, channel, kind in TABLE:
        s = parse_session_key(key)
        assert (s.channel, s.chat_type) == (channel, kind), key
        d = decide_scope(DEFAULT, key)
        assert d.allowed == (kind in ("direct", "channel")), key
        assert d.rule == (
            "default deny" if kind == "group" else f"rules[{0 if kind == 'direct' else 1}] allow {{chatType: {kind}}}"
        )
        FIGURES["scope decisions checked"] += 1


CUSTOM = ScopeConfig.model_validate({
    "default": "deny",
    "rules": [
        {"action": "deny", "match": {"channel": "Telegram", "chatType": "group"}},
        {"action": "allow", "match": {"channel": "SLACK"}},
        {"action": "deny", "match": {"keyPrefix": "subagent:"}},
        {"action": "deny", "match": {"rawKeyPrefix": "agent:ops:"}},
        {"action": "allow", "match": {"chatType": "dm"}},
    ],
})


def _custom_expected(key: str, channel: str | None, kind: str) -> bool:
    if channel == "telegram" and kind == "group":
        return False
    if channel == "slack":
        return True
    if key.strip().lower().startswith("agent:ops:"):
        return False
    return kind == "direct"


def test_every_channel_and_chat_type_under_custom_rules():
    for key, channel, kind in TABLE:
        assert decide_scope(CUSTOM, key).allowed == _custom_expected(key, channel, kind), key
        FIGURES["scope decisions checked"] += 1


HUGE = "agent:main:discord:group:" + "9" * 100_000
# (key, allowed under the default scope). Unknown shapes count as direct (the reference's rule);
# any `group` segment makes the key a group key, wherever it is; a key with an empty segment, or
# too long to be real, is malformed and denied (deny on doubt).
MALFORMED = [
    (None, True), ("", True), ("   ", True), ("\t\n", True), (":", False), (":::", False), ("agent", True),
    ("agent:", False), ("agent:main", True), ("agent:main:", False), ("agent:main:main", True),
    ("group", False), (":group:", False), ("agent:main::group::1", False), ("discord:group", False),
    ("agent:main:discord:direct:group", False), ("agent:main:discord:group:direct", False),
    ("agent:main:discord:group:1\nagent:main:main", False), ("agent:main:discord:group:1\x00direct", False),
    (HUGE, False), (("a:" * 50_000) + "group", False), (":" * 100_000, False),
    ("agent:main:télégram:group:１", False), ("agent:main:дискорд:channel:7", True), ("agent:main:💬:group:x", False),
    ("agent:main:discord:GROUP:1", False), ("agent:main:discord:Group:1", False),
    ("agent:main:subagent:task-1", True), ("subagent:x", True), ("agent:main:subagent:discord:group:1", False),
    ("agent:main:discord:channel:1:group", False), ("\u202eagent:main:discord:group:1", False),
]


@pytest.mark.parametrize("key,allowed", MALFORMED, ids=[repr(k)[:40] for k, _ in MALFORMED])
def test_malformed_keys_get_a_decision(key, allowed):
    d = decide_scope(DEFAULT, key)
    FIGURES["scope decisions checked"] += 1
    assert d.allowed is allowed, (key if key is None else key[:80], d)
    assert d.rule  # always names the rule that decided
    # A sub-agent key can still be denied explicitly.
    if key and "subagent" in key:
        assert decide_scope(CUSTOM, key).allowed is False


@pytest.fixture
def qmd_env(tmp_path):
    return {
        "PATH": f"{FAKEBIN}:{os.environ['PATH']}",
        "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
        "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"),
        "FAKE_QMD_PIDS": str(tmp_path / "pids"),
        "HOME": os.environ.get("HOME", "/root"),
    }


def test_a_denied_search_spawns_nothing_and_returns_no_hit(tmp_path, qmd_env):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    settings = make_settings(tmp_path, ws, memory={"backend": "qmd", "qmd": {
        "includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}], "update": {"onBoot": False}}})
    built = {"qmd": 0, "builtin": 0}

    def qmd():
        built["qmd"] += 1
        return QmdSearchManager(settings, environ=qmd_env)

    def builtin():
        built["builtin"] += 1
        return BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())

    m = scoped(FallbackSearchManager(qmd, builtin, name="qmd"), settings)
    log = Path(qmd_env["FAKE_QMD_LOG"])
    denied_keys = [k for k, _c, kind in TABLE if kind == "group"][::7] + [k for k, a in MALFORMED if not a]

    async def go():
        for key in denied_keys:
            answer = await m.search("aurora telemetry", session_key=key, min_score=0)
            FIGURES["denied searches checked"] += 1
            assert answer.results == [] and answer.denied is not None
            assert answer.denied.rule == "default deny" or answer.denied.rule.startswith("malformed session key")
            assert answer.to_json_dict()["denied"]["rule"] == answer.denied.rule
        assert not log.exists() and built == {"qmd": 0, "builtin": 0}  # nothing spawned or built
        # The marker works: an allowed key does reach (the fake) qmd.
        answer = await m.search("aurora telemetry", session_key="agent:main:telegram:direct:1", min_score=0)
        assert answer.denied is None and answer.results and log.exists()
        await m.aclose()

    anyio.run(go)


def test_cli_reports_the_denial_without_spawning_qmd(tmp_path, qmd_env):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state"), "memory": {"backend": "qmd", "qmd": {
        "includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}]}}}))
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "search"]
    env = {**os.environ, **qmd_env}
    out = subprocess.run([*base, "--json", "--session-key", "agent:main:discord:group:42", "aurora"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["results"] == [] and data["denied"]["chatType"] == "group" and data["denied"]["channel"] == "discord"
    human = subprocess.run([*base, "--session-key", "agent:main:discord:group:42", "aurora"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert "denied by scope" in (human.stdout + human.stderr).lower()
    assert not Path(qmd_env["FAKE_QMD_LOG"]).exists()
