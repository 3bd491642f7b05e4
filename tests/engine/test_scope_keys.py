"""Session keys are read per segment (NFKC, invisible characters out, stripped, lowercased), and a
key that cannot be read safely is denied whatever the rules say."""

from __future__ import annotations

import pytest

from memsift.engine.config.models import QmdConfig, ScopeConfig
from memsift.engine.config.scope import decide_scope, parse_session_key

DEFAULT = QmdConfig().scope  # deny; allow direct; allow channel


@pytest.mark.parametrize("key", [
    "agent:main:discord: group:42",
    "agent:main:discord:group :42",
    "agent:main:discord:group\n:42",
    "agent:main:discord:group\x00:42",
    "agent:main:discord:gr\u200boup:42",  # zero-width space
    "agent:main:discord:\u2060group\ufeff:42",  # word joiner, BOM
    "agent:main:discord:ｇｒｏｕｐ:42",  # fullwidth
    "agent:main:discord:GROUP:42",
    "agent:main:discord:𝐠𝐫𝐨𝐮𝐩:42",  # mathematical bold: NFKC reads it as group
    "agent:main:discord：group：42",  # fullwidth colons split like colons
    "agent:main:discord:\u202egroup:42",  # a bidi override
])
def test_spellings_of_a_group_key_are_group_keys(key):
    s = parse_session_key(key)
    assert s.chat_type == "group" and s.channel == "discord", (key, s)
    d = decide_scope(DEFAULT, key)
    assert not d.allowed and d.rule == "default deny"


@pytest.mark.parametrize("key,why", [
    ("agent:main::discord:direct:1", "empty segment"),
    ("agent:main:discord:direct:1:", "empty segment"),
    (":agent:main:main", "empty segment"),
    ("agent:main:\u200b:direct:1", "empty segment"),  # only invisible characters
    ("agent:main:discord:gr oup:42", "whitespace inside a segment"),
    ("agent:main:discord\u2236group:42", "colon look-alike"),
    ("agent:main:discord:direct:" + "9" * 600, "longer than 512"),
    ("a:" * 20 + "direct", "more than 16 segments"),
    ("agent:main:discord:direct:\ud800", "not valid Unicode"),
])
def test_malformed_keys_are_denied_whatever_the_rules(key, why):
    allow_all = ScopeConfig(default="allow")
    for scope in (DEFAULT, allow_all, None):
        d = decide_scope(scope, key)
        assert not d.allowed and d.rule.startswith("malformed session key") and why in d.rule, (scope, d)


def test_prefix_rules_see_the_normalised_key():
    rules = ScopeConfig.model_validate({"default": "allow", "rules": [
        {"action": "deny", "match": {"rawKeyPrefix": "agent:main:discord"}},
        {"action": "deny", "match": {"keyPrefix": "subagent:"}},
        {"action": "deny", "match": {"channel": " Ｔｅｌｅｇｒａｍ "}},
    ]})
    assert not decide_scope(rules, "agent:main::discord:direct:1").allowed  # malformed
    assert not decide_scope(rules, "Agent:Main: Discord :direct:1").allowed
    assert decide_scope(rules, "agent:main: Discord :direct:1").rule.startswith("rules[0]")
    for key in ("agent:main: subagent:x", "agent:main:sub\u200bagent:x", "agent:main:SUBAGENT :x", " subagent:x"):
        assert decide_scope(rules, key).rule == "rules[1] deny {keyPrefix: subagent:}", key
    assert decide_scope(rules, "agent:main:telegram:direct:7").rule.startswith("rules[2]")
    assert decide_scope(rules, "agent:main:slack:direct:7").allowed


def test_ordinary_keys_keep_their_meaning():
    assert decide_scope(DEFAULT, None).allowed and decide_scope(DEFAULT, "  ").allowed  # a local caller
    assert decide_scope(DEFAULT, "  AGENT:Main:Telegram:Direct:Abc  ").allowed
    assert decide_scope(DEFAULT, "agent:main:slack:channel:C01:thread:1700000000.0001").allowed
    assert decide_scope(DEFAULT, "whatsapp:+15550001").allowed
    assert decide_scope(DEFAULT, "agent:main:telegram:direct:👨\u200d👩\u200d👧").allowed  # ZWJ emoji in an id
    assert parse_session_key("agent:main:subagent:task-7").channel == "subagent"
    # A sub-agent acting in a group chat is a group key (deny on doubt).
    assert not decide_scope(DEFAULT, "agent:main:subagent:discord:group:1").allowed


def test_a_denial_echoes_a_bounded_key():
    key = "agent:main:discord:group:" + "9" * 200_000
    d = decide_scope(DEFAULT, key)
    assert not d.allowed and len(d.session_key) < 200 and "200,025 characters" in d.session_key


def test_a_denial_shows_invisible_characters_as_escapes():
    d = decide_scope(DEFAULT, "agent:main:discord:gr\u200boup:42\x1b[2J")
    assert not d.allowed and d.session_key == "agent:main:discord:gr\\u200boup:42\\x1b[2J"
