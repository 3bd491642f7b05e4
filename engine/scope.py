"""Scope rules (`memory.qmd.scope`): which chats may search memory, decided per session key.

Session keys look like `agent:<agentId>:<channel>:<chatType>:<id>` (`agent:main:discord:group:42`,
`agent:main:telegram:acct2:direct:7`, `whatsapp:+1555…`, `agent:main:main`). The reference's
parsing is kept, without its defects:

- config values (`channel`, `chatType`, prefixes) are compared case-insensitively;
- `dm` means `direct`, in keys and in rules;
- the channel is the part before the chat-type segment wherever that segment is, so
  multi-account keys (`telegram:acct2:direct:7`) still have channel `telegram`;
- **a missing or empty key is a local caller (the CLI, the Python API) and counts as `direct`;**
- **a sub-agent key (`subagent:…`, also behind `agent:<id>:`) counts as `direct` with channel
  `subagent`**: it acts for its parent agent. Deny sub-agents with a rule
  `{action: "deny", match: {keyPrefix: "subagent:"}}` (or `channel: "subagent"`).

Every decision names the rule that made it, so a denial is visible, never a bare empty list.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config.models import ScopeConfig, ScopeRule

__all__ = ["SessionScope", "ScopeDecision", "parse_session_key", "decide_scope"]

_CHAT_TYPES = ("group", "channel", "direct", "dm")


@dataclass(frozen=True)
class SessionScope:
    raw: str  # the trimmed, lowercased key ("" when missing)
    normalised: str  # without the `agent:<id>:` prefix
    channel: str | None
    chat_type: str  # direct | group | channel


@dataclass(frozen=True)
class ScopeDecision:
    allowed: bool
    rule: str  # "rules[1] deny {chatType: group}" or "default deny" or "no scope configured"
    channel: str | None
    chat_type: str
    session_key: str | None


def parse_session_key(key: str | None) -> SessionScope:
    raw = (key or "").strip().lower()
    if not raw:
        return SessionScope("", "", None, "direct")
    parts = [p for p in raw.split(":") if p]
    if len(parts) >= 3 and parts[0] == "agent":
        parts = parts[2:]
    normalised = ":".join(parts)
    if parts and parts[0] == "subagent":
        return SessionScope(raw, normalised, "subagent", "direct")
    for i, part in enumerate(parts):
        if part in _CHAT_TYPES and i > 0:
            chat = "group" if "group" in parts else "channel" if "channel" in parts else "direct"
            return SessionScope(raw, normalised, parts[0], chat)
    chat = "group" if "group" in parts else "channel" if "channel" in parts else "direct"
    return SessionScope(raw, normalised, None, chat)


def _norm_chat(value: str | None) -> str | None:
    if value is None:
        return None
    v = value.lower()
    return "direct" if v == "dm" else v


def _matches(rule: ScopeRule, s: SessionScope) -> bool:
    m = rule.match
    if m is None:
        return True
    if m.channel is not None and (s.channel or "") != m.channel.lower():
        return False
    if m.chat_type is not None and s.chat_type != _norm_chat(m.chat_type):
        return False
    if m.raw_key_prefix is not None and not s.raw.startswith(m.raw_key_prefix.lower()):
        return False
    if m.key_prefix is not None:
        prefix = m.key_prefix.lower()
        target = s.raw if prefix.startswith("agent:") else s.normalised  # the reference's legacy rule
        if not target.startswith(prefix):
            return False
    return True


def _describe(rule: ScopeRule) -> str:
    if rule.match is None:
        return "{}"
    fields = rule.match.model_dump(by_alias=True, exclude_none=True)
    return "{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}"


def decide_scope(scope: ScopeConfig | None, session_key: str | None) -> ScopeDecision:
    """First matching rule wins; otherwise the default (allow when not given)."""
    s = parse_session_key(session_key)
    shown = session_key.strip() if session_key and session_key.strip() else None
    if scope is None:
        return ScopeDecision(True, "no scope configured", s.channel, s.chat_type, shown)
    for i, rule in enumerate(scope.rules):
        if _matches(rule, s):
            return ScopeDecision(rule.action == "allow", f"rules[{i}] {rule.action} {_describe(rule)}", s.channel, s.chat_type, shown)
    default = scope.default or "allow"
    return ScopeDecision(default == "allow", f"default {default}", s.channel, s.chat_type, shown)
