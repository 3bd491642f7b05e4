"""Table-driven scope decisions over session keys from every chat type and channel."""

from __future__ import annotations

import pytest

from memsift.engine.config.models import QmdConfig, ScopeConfig
from memsift.engine.config.scope import decide_scope, parse_session_key

DEFAULT = QmdConfig().scope  # deny, allow direct, allow channel


@pytest.mark.parametrize(
    "key,channel,chat",
    [
        ("agent:main:main", None, "direct"),
        ("agent:main:telegram:direct:123", "telegram", "direct"),
        ("agent:main:telegram:acct2:direct:123", "telegram", "direct"),  # multi-account keeps its channel
        ("agent:main:discord:group:42", "discord", "group"),
        ("agent:main:slack:channel:C01", "slack", "channel"),
        ("agent:main:whatsapp:dm:+1555", "whatsapp", "direct"),  # dm is direct
        ("whatsapp:+15550001", None, "direct"),
        ("AGENT:Main:Discord:Group:42", "discord", "group"),
        ("agent:main:subagent:task-7", "subagent", "direct"),
        ("subagent:x", "subagent", "direct"),
        ("", None, "direct"),
        (None, None, "direct"),
        (":::", None, "direct"),
        ("agent:main:discord:group", "discord", "group"),
    ],
)
def test_session_key_parsing(key, channel, chat):
    s = parse_session_key(key)
    assert (s.channel, s.chat_type) == (channel, chat)


RULES = ScopeConfig.model_validate(
    {
        "default": "deny",
        "rules": [
            {"action": "deny", "match": {"keyPrefix": "subagent:"}},
            {"action": "allow", "match": {"channel": "Slack"}},  # config values are case-insensitive
            {"action": "allow", "match": {"chatType": "dm"}},  # dm means direct
            {"action": "deny", "match": {"rawKeyPrefix": "agent:ops:"}},
            {"action": "allow", "match": {"keyPrefix": "agent:ops:"}},
        ],
    }
)


@pytest.mark.parametrize(
    "scope,key,allowed,rule",
    [
        (DEFAULT, "agent:main:main", True, "rules[0] allow {chatType: direct}"),
        (DEFAULT, None, True, "rules[0] allow {chatType: direct}"),
        (DEFAULT, "agent:main:discord:group:42", False, "default deny"),
        (DEFAULT, "agent:main:slack:channel:C1", True, "rules[1] allow {chatType: channel}"),
        (DEFAULT, "agent:main:subagent:t1", True, "rules[0] allow {chatType: direct}"),
        (RULES, "agent:main:subagent:t1", False, "rules[0] deny {keyPrefix: subagent:}"),
        (RULES, "agent:main:slack:group:G1", True, "rules[1] allow {channel: Slack}"),
        (RULES, "agent:main:telegram:direct:1", True, "rules[2] allow {chatType: dm}"),
        (RULES, "agent:main:discord:group:2", False, "default deny"),
        (RULES, "agent:ops:discord:group:2", False, "rules[3] deny {rawKeyPrefix: agent:ops:}"),
        (None, "agent:main:discord:group:2", True, "no scope configured"),
        (ScopeConfig(), "agent:main:discord:group:2", True, "default allow"),
    ],
)
def test_decisions_name_the_rule(scope, key, allowed, rule):
    d = decide_scope(scope, key)
    assert (d.allowed, d.rule) == (allowed, rule)
