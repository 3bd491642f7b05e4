"""Scope rules (`memory.qmd.scope`): which chats may read memory, decided per session key.

Session keys look like `agent:<agentId>:<channel>:<chatType>:<id>` (`agent:main:discord:group:42`,
`agent:main:telegram:acct2:direct:7`, `whatsapp:+1555…`, `agent:main:main`). The reference's
parsing is kept, without its defects:

- each `:`-separated segment is normalised before anything is compared: Unicode NFKC (fullwidth
  `ｇｒｏｕｐ` and a fullwidth colon read as `group` and `:`), control and invisible characters
  (zero-width spaces, joiners, bidi marks, NUL, newlines) removed, surrounding whitespace
  stripped, lowercased. `agent:main:discord: group\u200b:42` is the group key it looks like;
- **a key that cannot be read safely is malformed and denied whatever the rules say** (deny on
  doubt): an empty segment (`agent:main::discord:direct:1`), whitespace or a colon look-alike
  inside a segment, a lone surrogate, more than 512 characters or 16 segments;
- config values (`channel`, `chatType`, prefixes) are normalised the same way;
- `dm` means `direct`, in keys and in rules;
- the channel is the part before the chat-type segment wherever that segment is, so
  multi-account keys (`telegram:acct2:direct:7`) still have channel `telegram`;
- any `group` segment makes a key a group key (else any `channel` segment a channel key);
- **a missing or empty key is a local caller (the CLI, the Python API) and counts as `direct`;**
- **a sub-agent key (`subagent:…`, also behind `agent:<id>:`) has channel `subagent` and counts
  as `direct`** (it acts for its parent agent) unless it names a group or channel. Deny sub-agents
  with a rule `{action: "deny", match: {keyPrefix: "subagent:"}}` (or `channel: "subagent"`).

Every decision names the rule that made it, so a denial is visible, never a bare empty list.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .config.models import ScopeConfig, ScopeRule
from .text import shorten

__all__ = [
    "SessionScope",
    "ScopeDecision",
    "parse_session_key",
    "decide_scope",
    "normalise_segment",
    "MAX_KEY_CHARS",
    "MAX_KEY_SEGMENTS",
]

MAX_KEY_CHARS = 512  # real keys are far shorter; longer ones are refused before any work
MAX_KEY_SEGMENTS = 16
SHOWN_KEY_CHARS = 120  # a denial echoes at most this much of the key
_CHAT_TYPES = ("group", "channel", "direct", "dm")
# Unicode "default ignorable" code points that are not in category Cf (Hangul fillers, variation
# selectors, the combining grapheme joiner…): invisible, so removed like zero-width spaces.
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
# Characters that look like a colon but do not split a key: a segment holding one is refused.
_COLON_LOOKALIKES = frozenset("\u02d0\u02d1\u0589\u05c3\u16ec\u1803\u1809\u2236\ua789\ufe13\ufe30\ufe55\uff1a")


@dataclass(frozen=True)
class SessionScope:
    raw: str  # the normalised key, segments joined by ":" ("" when missing)
    normalised: str  # without the `agent:<id>:` prefix
    channel: str | None
    chat_type: str  # direct | group | channel
    malformed: str | None = None  # why the key cannot be read safely (then it is always denied)


@dataclass(frozen=True)
class ScopeDecision:
    allowed: bool
    rule: str  # "rules[1] deny {chatType: group}", "default deny", "malformed session key (…)", …
    channel: str | None
    chat_type: str
    session_key: str | None  # as received, shortened for display


def _strip_invisible(text: str) -> str:
    """NFKC, then control, format (zero-width, bidi) and other default-ignorable characters out."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"))
    return _IGNORABLE.sub("", text)


def normalise_segment(segment: str) -> str:
    """One key segment (or config value) as it is compared: NFKC, invisible characters out,
    stripped, lowercased."""
    return _strip_invisible(segment).strip().lower()


def _segments(key: str) -> tuple[list[str], str | None]:
    """The key's normalised segments, and why it is malformed (None when it is not)."""
    if len(key) > MAX_KEY_CHARS:
        return [], f"longer than {MAX_KEY_CHARS} characters"
    if any("\ud800" <= ch <= "\udfff" for ch in key):
        return [], "not valid Unicode"
    # NFKC first over the whole key, so a fullwidth colon splits like a colon.
    parts = [normalise_segment(p) for p in _strip_invisible(key).split(":")]
    if len(parts) > MAX_KEY_SEGMENTS:
        return parts, f"more than {MAX_KEY_SEGMENTS} segments"
    if any(not p for p in parts):
        return parts, "empty segment"
    for p in parts:
        if any(ch.isspace() for ch in p):
            return parts, "whitespace inside a segment"
        if any(ch in _COLON_LOOKALIKES for ch in p):
            return parts, "a colon look-alike inside a segment"
    return parts, None


def _chat_of(parts: list[str]) -> str:
    return "group" if "group" in parts else "channel" if "channel" in parts else "direct"


def parse_session_key(key: str | None) -> SessionScope:
    if key is None or not isinstance(key, str) or not key.strip():
        return SessionScope("", "", None, "direct")
    parts, malformed = _segments(key.strip())
    raw = ":".join(parts)
    rest = parts[2:] if len(parts) >= 3 and parts[0] == "agent" else parts
    normalised = ":".join(rest)
    if malformed:
        return SessionScope(raw, normalised, None, _chat_of(parts), malformed)
    if rest and rest[0] == "subagent":
        return SessionScope(raw, normalised, "subagent", _chat_of(rest))
    for i, part in enumerate(rest):
        if part in _CHAT_TYPES and i > 0:
            return SessionScope(raw, normalised, rest[0], _chat_of(rest))
    return SessionScope(raw, normalised, None, _chat_of(rest))


def _shown(key: str | None) -> str | None:
    """The key as a denial shows it: bounded, and with invisible characters written as escapes
    (a key may carry terminal control sequences or zero-width characters)."""
    if not isinstance(key, str) or not key.strip():
        return None
    key = shorten(key.strip(), SHOWN_KEY_CHARS)
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in key)


def _norm_chat(value: str | None) -> str | None:
    if value is None:
        return None
    v = normalise_segment(value)
    return "direct" if v == "dm" else v


def _norm_prefix(prefix: str) -> str:
    return ":".join(normalise_segment(p) for p in prefix.split(":"))


def _matches(rule: ScopeRule, s: SessionScope) -> bool:
    m = rule.match
    if m is None:
        return True
    if m.channel is not None and (s.channel or "") != normalise_segment(m.channel):
        return False
    if m.chat_type is not None and s.chat_type != _norm_chat(m.chat_type):
        return False
    if m.raw_key_prefix is not None and not s.raw.startswith(_norm_prefix(m.raw_key_prefix)):
        return False
    if m.key_prefix is not None:
        prefix = _norm_prefix(m.key_prefix)
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
    """A malformed key is denied; otherwise the first matching rule wins, then the default
    (allow when not given)."""
    s = parse_session_key(session_key)
    shown = _shown(session_key)
    if s.malformed:
        return ScopeDecision(False, f"malformed session key ({s.malformed})", s.channel, s.chat_type, shown)
    if scope is None:
        return ScopeDecision(True, "no scope configured", s.channel, s.chat_type, shown)
    for i, rule in enumerate(scope.rules):
        if _matches(rule, s):
            return ScopeDecision(rule.action == "allow", f"rules[{i}] {rule.action} {_describe(rule)}", s.channel, s.chat_type, shown)
    default = scope.default or "allow"
    return ScopeDecision(default == "allow", f"default {default}", s.channel, s.chat_type, shown)
