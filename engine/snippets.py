"""Snippets: at most 700 UTF-16 units of a chunk, centred on the first query-term match.

The window is cut on line boundaries where it can, so the hit's line range narrows to the lines
the snippet shows; a single over-long line is cut inside the line around the match.
"""

from __future__ import annotations

from dataclasses import dataclass

from .text import utf16_len, utf16_slice

__all__ = ["Snippet", "make_snippet", "SNIPPET_MAX_CHARS"]

SNIPPET_MAX_CHARS = 700


@dataclass(frozen=True)
class Snippet:
    text: str
    start_line: int
    end_line: int


def _first_match_line(lines: list[str], terms: list[str]) -> tuple[int, int]:
    """(line index, column) of the earliest match of the rarest-looking (longest) term."""
    lowered = [ln.lower() for ln in lines]
    for term in sorted(terms, key=len, reverse=True):
        for i, ln in enumerate(lowered):
            col = ln.find(term)
            if col >= 0:
                return i, col
    return 0, 0


def make_snippet(
    text: str, start_line: int, terms: list[str], max_chars: int = SNIPPET_MAX_CHARS
) -> Snippet:
    lines = text.split("\n")
    end_line = start_line + len(lines) - 1
    if utf16_len(text) <= max_chars:
        return Snippet(text, start_line, end_line)
    idx, col = _first_match_line(lines, terms)
    line = lines[idx]
    if utf16_len(line) >= max_chars:
        # Cut inside the line, starting a little before the match.
        start = max(0, col - max_chars // 4)
        return Snippet(utf16_slice(line[start:], max_chars), start_line + idx, start_line + idx)
    lo = hi = idx
    used = utf16_len(line)
    # Grow the window one line at a time, alternating below and above the match.
    while True:
        grew = False
        for nxt in (hi + 1, lo - 1):
            if 0 <= nxt < len(lines) and (nxt > hi or nxt < lo):
                cost = utf16_len(lines[nxt]) + 1
                if used + cost <= max_chars:
                    used += cost
                    lo, hi = min(lo, nxt), max(hi, nxt)
                    grew = True
        if not grew:
            break
    return Snippet("\n".join(lines[lo : hi + 1]), start_line + lo, start_line + hi)
