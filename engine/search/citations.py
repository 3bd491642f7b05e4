"""Citations (`memory.citations` auto/on/off): `Source: path#L5-L7` on each hit, and reading them back."""

from __future__ import annotations

import re

from ..config.scope import parse_session_key

__all__ = ["citation_for", "citations_enabled", "chat_type_for_citations", "decorate_snippet", "parse_memory_ref"]

# What search prints, so it can be passed back to get/memory_get: the citation `path#L5-L7`
# (or `#L5`), the hit header `path:5-7`, and the CLI's `path:FROM[:COUNT]`.
_CITATION_RE = re.compile(r"^(?P<path>.+?)#L(?P<start>\d{1,9})(?:-L?(?P<end>\d{1,9}))?$")
_RANGE_RE = re.compile(r"^(?P<path>.+?):(?P<start>\d{1,9})(?:(?P<sep>[-:])(?P<n>\d{1,9}))?$")


def citation_for(path: str, start_line: int, end_line: int) -> str:
    return f"{path}#L{start_line}" if start_line == end_line else f"{path}#L{start_line}-L{end_line}"


def chat_type_for_citations(session_key: str | None) -> str:
    """Chat type as the reference's citation helper sees it: channel before group, else direct.
    Segments are read as the scope rules read them (`scope.parse_session_key`)."""
    if not session_key or not session_key.strip():
        return "direct"
    parts = [p for p in parse_session_key(session_key).raw.split(":") if p]
    if len(parts) >= 3 and parts[0] == "agent":
        parts = parts[2:]
    if "channel" in parts:
        return "channel"
    if "group" in parts:
        return "group"
    return "direct"


def citations_enabled(mode: str, session_key: str | None) -> bool:
    if mode == "on":
        return True
    if mode == "off":
        return False
    return chat_type_for_citations(session_key) == "direct"


def decorate_snippet(snippet: str, citation: str) -> str:
    """The snippet as an agent tool shows it: trimmed, then a `Source:` line."""
    return f"{snippet.strip()}\n\nSource: {citation}"


def parse_memory_ref(ref: str) -> tuple[str, int | None, int | None]:
    """`(path, from_line, lines)` from a citation (`path#L5-L7`), a hit header (`path:5-7`),
    `path:FROM[:COUNT]`, or a plain path (no range). A range ending before it starts is one line."""
    text = (ref or "").strip()
    m = _CITATION_RE.match(text)
    if m:
        start = int(m.group("start"))
        end = int(m.group("end")) if m.group("end") else start
        return m.group("path"), start, max(1, end - start + 1)
    m = _RANGE_RE.match(text)
    if m:
        start = int(m.group("start"))
        if m.group("sep") == "-":
            return m.group("path"), start, max(1, int(m.group("n")) - start + 1)
        return m.group("path"), start, int(m.group("n")) if m.group("n") else None
    return ref, None, None
