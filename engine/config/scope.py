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
  inside a segment, a lone surrogate, more than 512 characters or 16 segments. Colon look-alikes
  are checked before and after normalisation (NFKC turns `︰` into `..`): Unicode's confusables
  of `:` (the `confusable-homoglyphs` package's data), every character whose Unicode name says
  COLON, and every character NFKC turns into something holding a colon;
- terminal escape sequences (`\x1b[31m`, OSC, C1 controls) are removed whole, not just their ESC;
- a key of channel shape (`<channel>:<type>:<id>`) whose chat type is none memsift knows
  (`discord:grp:42`) may be a group: it is denied whenever the rules deny the same key as a group;
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

import json
import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from .models import ScopeConfig, ScopeRule
from ..logging import get_logger
from ..text import shorten

log = get_logger("memsift.scope")

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
# Characters that look like a colon but do not split a key: a segment holding one is refused. The
# floor below; Unicode's confusables data and character names add the rest (`_colon_like`).
_COLON_LOOKALIKES = frozenset("\u02d0\u02d1\u0589\u05c3\u16ec\u1803\u1809\u2236\ua789\ufe13\ufe30\ufe55\uff1a"
                              "\ua4fd\u02f8\u205a\u0903\u0a83\u0703\u0704\u2e35\u2982\u1365")
# Whole terminal escape sequences: CSI (`ESC [ … final`), OSC/DCS/APC/PM strings (to BEL or ST),
# character-set escapes (`ESC ( B`), and the 8-bit C1 forms. None ever takes a ":" (it would join segments).
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-9;<=>?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x9d\x9e\x9f])[^\x07\x1b\x9c:]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]+[0-9;<=>?@-~]"  # with an intermediate byte (`ESC ( B`); a lone ESC is removed as a control
)


@dataclass(frozen=True)
class SessionScope:
    raw: str  # the normalised key, segments joined by ":" ("" when missing)
    normalised: str  # without the `agent:<id>:` prefix
    channel: str | None
    chat_type: str  # direct | group | channel (| unknown, in a decision)
    malformed: str | None = None  # why the key cannot be read safely (then it is always denied)
    # A key of channel shape (`<channel>:<type>:<id>`…) whose type segment is none memsift knows:
    # it may be a group, so rules that deny groups deny it.
    unknown_type: str | None = None


@dataclass(frozen=True)
class ScopeDecision:
    allowed: bool
    rule: str  # "rules[1] deny {chatType: group}", "default deny", "malformed session key (…)", …
    channel: str | None
    chat_type: str
    session_key: str | None  # as received, shortened for display


@lru_cache(maxsize=1)
def _confusable_colons() -> frozenset[str]:
    """Unicode's confusables of ":" (UTS #39 data, from the confusable-homoglyphs package), with
    the bidi marks some entries carry removed; the floor list when the data cannot be read."""
    try:
        import confusable_homoglyphs  # noqa: PLC0415

        path = Path(confusable_homoglyphs.__file__).with_name("confusables.json")
        entries = json.loads(path.read_text(encoding="utf-8")).get(":", [])
        found = {ch for e in entries for ch in str(e.get("c", "")) if ch not in "\u200e\u200f:"}
    except (ImportError, OSError, ValueError, AttributeError) as exc:
        log.warning(
            "Unicode confusables data unavailable; using memsift's own list of colon look-alikes", error=str(exc)
        )
        found = set()
    return frozenset(found | _COLON_LOOKALIKES)


@lru_cache(maxsize=4096)
def _colon_like(ch: str) -> bool:
    """`ch` reads as a colon (or hides one) without being ":"."""
    if ch == ":" or ch.isascii():
        return False
    if ch in _confusable_colons() or "COLON" in unicodedata.name(ch, ""):
        return True
    folded = unicodedata.normalize("NFKC", ch)
    return ":" in folded and folded != ":"


def _has_colon_lookalike(text: str) -> bool:
    return not text.isascii() and any(_colon_like(ch) for ch in text)


def _strip_invisible(text: str) -> str:
    """Terminal escape sequences, then NFKC, then control, format (zero-width, bidi) and other
    default-ignorable characters out."""
    text = _ESCAPES.sub("", text)
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
    # A lone surrogate (undecodable argv bytes on the CLI), or U+FFFD, what a lone surrogate or a
    # broken byte becomes in JSON (MCP, HTTP): the same key is denied on every door.
    if any("\ud800" <= ch <= "\udfff" or ch == "\ufffd" for ch in key):
        return [], "not valid Unicode"
    # Before normalisation: NFKC turns some look-alikes into other text (`︰` into `..`). A
    # character NFKC makes exactly ":" (the fullwidth colon) splits like one.
    if any(
        _colon_like(ch) and unicodedata.normalize("NFKC", ch) != ":" for ch in _ESCAPES.sub("", key) if not ch.isascii()
    ):
        return [], "a colon look-alike inside a segment"
    # NFKC first over the whole key, so a fullwidth colon splits like a colon.
    parts = [normalise_segment(p) for p in _strip_invisible(key).split(":")]
    if len(parts) > MAX_KEY_SEGMENTS:
        return parts, f"more than {MAX_KEY_SEGMENTS} segments"
    if any(not p for p in parts):
        return parts, "empty segment"
    for p in parts:
        if any(ch.isspace() for ch in p):
            return parts, "whitespace inside a segment"
        if _has_colon_lookalike(p):
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
    unknown = rest[1] if len(rest) >= 3 and rest[0] not in _CHAT_TYPES else None
    return SessionScope(raw, normalised, None, _chat_of(rest), unknown_type=unknown)


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
    if s.unknown_type is not None and s.chat_type == "direct":
        # Deny on doubt: a type segment nobody knows (`grp`, a mangled `group`) may name a group.
        as_group = _first_match(scope, replace(s, chat_type="group"))
        if not as_group[0]:
            return ScopeDecision(
                False,
                f"unknown chat type {shorten(s.unknown_type, 40)!r}: denied as a group would be ({as_group[1]})",
                s.channel,
                "unknown",
                shown,
            )
    allowed, rule = _first_match(scope, s)
    return ScopeDecision(allowed, rule, s.channel, s.chat_type, shown)


def _first_match(scope: ScopeConfig, s: SessionScope) -> tuple[bool, str]:
    """(allowed, the rule that decided): the first matching rule, then the default."""
    for i, rule in enumerate(scope.rules):
        if _matches(rule, s):
            return rule.action == "allow", f"rules[{i}] {rule.action} {_describe(rule)}"
    default = scope.default or "allow"
    return default == "allow", f"default {default}"
