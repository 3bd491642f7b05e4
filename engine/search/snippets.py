"""Snippets: at most 700 UTF-16 units of a chunk, the part that holds the query's evidence.

With the default evidence chunker a chunk is at most what a snippet shows, so the snippet is the
whole chunk (the lines a hit shows are the lines that earned its score). A larger chunk (the
reference's chunker, `chunking.tokens` set) is windowed: the window of whole lines that contains
the most distinct query terms wins, where a term counts only in a line's content, not in a
heading or a speaker tag (`[D3:8] Caroline:`, `## Session 3 (Caroline & Melanie)`), which name the
same people in every chunk. The hit's line range narrows to the lines shown; a single line longer
than the window is cut around its densest stretch of terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config.sizes import SNIPPET_MAX_CHARS
from .fts_query import DONE_BOX, OPEN_BOX, box_words
from ..text import match_form, utf16_len, utf16_slice

__all__ = ["Snippet", "make_snippet", "SNIPPET_MAX_CHARS"]


_HEADING_RE = re.compile(r"\s*#{1,6}(?:\s|$)")
# A line's structure before its content: bullets, bracketed ids or times, a speaker label.
_PREFIX_RE = re.compile(r"\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\[[^\]\n]{0,64}\]\s*)*(?:[^\s:]{1,24}(?:\s[^\s:]{1,24})?:\s)?")


@dataclass(frozen=True)
class Snippet:
    text: str
    start_line: int
    end_line: int


def _content(line: str) -> str:
    """The part of a line that can be evidence: nothing of a heading, no bullet/tag/speaker prefix."""
    if _HEADING_RE.match(line):
        return ""
    prefix = _PREFIX_RE.match(line)  # always matches (every part is optional)
    return match_form(line[prefix.end() if prefix else 0 :])


def _terms_in(content: str, terms: list[str]) -> set[str]:
    return {t for t in terms if t in content}


def _best_line_window(lines: list[str], terms: list[str], max_chars: int) -> tuple[int, int]:
    """(lo, hi) of the whole-line window within `max_chars` with the most distinct terms (then
    the most matching lines, then the earliest). A checklist box's word (fts_query.OPEN_BOX, a
    question about tasks) is found on a line with such a box."""
    boxes = set(terms) & {OPEN_BOX, DONE_BOX}
    found = [_terms_in(_content(ln), terms) | (boxes & set(box_words(ln)) if boxes else set()) for ln in lines]
    sizes = [utf16_len(ln) + 1 for ln in lines]
    best, best_key = (0, 0), None
    for lo in range(len(lines)):
        used, hi = sizes[lo], lo
        while hi + 1 < len(lines) and used + sizes[hi + 1] <= max_chars + 1:
            hi += 1
            used += sizes[hi]
        window = found[lo : hi + 1]
        key = (len(set().union(*window)), sum(1 for f in window if f))
        if best_key is None or key > best_key:
            best, best_key = (lo, hi), key
    return best


def _cut_long_line(line: str, terms: list[str], max_chars: int) -> str:
    """The stretch of an over-long line with the most distinct terms, starting at a word."""
    lower = match_form(line)  # decomposed accents dropped: a start may be a few characters early
    starts = sorted({m.start() for t in terms for m in re.finditer(re.escape(t), lower)}) or [0]
    best, best_n = 0, -1
    for pos in starts:
        begin = max(0, pos - max_chars // 8)
        n = len(_terms_in(lower[begin : begin + max_chars], terms))
        if n > best_n:
            best, best_n = begin, n
    if best:
        space = line.rfind(" ", max(0, best - 40), best + 1)
        best = space + 1 if space >= 0 else best
    return utf16_slice(line[best:], max_chars)


def make_snippet(
    text: str, start_line: int, terms: list[str], max_chars: int = SNIPPET_MAX_CHARS
) -> Snippet:
    lines = text.split("\n")
    if utf16_len(text) <= max_chars:
        return Snippet(text, start_line, start_line + len(lines) - 1)
    terms = [match_form(t) for t in terms if t]
    lo, hi = _best_line_window(lines, terms, max_chars)
    if lo == hi and utf16_len(lines[lo]) > max_chars:
        return Snippet(_cut_long_line(lines[lo], terms, max_chars), start_line + lo, start_line + lo)
    return Snippet("\n".join(lines[lo : hi + 1]), start_line + lo, start_line + hi)
