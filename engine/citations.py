"""Citations (`memory.citations` auto/on/off): `Source: path#L5-L7` on each hit."""

from __future__ import annotations

from .scope import parse_session_key

__all__ = ["citation_for", "citations_enabled", "chat_type_for_citations", "decorate_snippet"]


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
