"""Markdown chunking with line ranges: the reference's `chunkMarkdown`, later (capped-overlap) revision,
plus section boundaries.

A heading that ends a section of at least a quarter of the budget starts a new chunk (with no
overlap carried into it), so a chunk never mixes the tail of one substantial section with the
next one (two sessions of a daily log, two topics of MEMORY.md), while short sections still
share a chunk. Headings inside fenced code blocks do not count.

Sizes are counted in UTF-16 units (the reference counts JS string length) with each CJK code
point weighted as 4, so a chunk holds about `tokens` tokens in any script. Python strings hold
code points, so a non-BMP character (one surrogate pair in UTF-16) is never split.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .text import utf16_len, utf16_slice, weighted_len

__all__ = ["Chunk", "chunk_markdown", "sha256_text", "split_for_input_limit"]


_HEADING_RE = re.compile(r"#{1,6}(?:[ \t]|$)")
_FENCE_RE = re.compile(r"[ ]{0,3}(```|~~~)")


@dataclass(frozen=True, slots=True)
class Chunk:
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str
    hash: str


@dataclass(slots=True)
class _Segment:
    line: int
    text: str
    weight: int


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _slice_units(s: str, width: int) -> list[str]:
    """Cut `s` into pieces of at most `width` UTF-16 units (a pair stays whole)."""
    pieces: list[str] = []
    rest = s
    while rest:
        piece = utf16_slice(rest, width)
        if not piece:  # width 1 and a non-BMP char first: take it whole rather than loop
            piece = rest[0]
        pieces.append(piece)
        rest = rest[len(piece) :]
    return pieces


def _line_segments(line: str, line_no: int, max_chars: int, tokens: int) -> list[_Segment]:
    if not line:
        return [_Segment(line_no, "", 0)]
    out: list[_Segment] = []
    for coarse in _slice_units(line, max_chars):
        w = weighted_len(coarse)
        if w <= max_chars:
            out.append(_Segment(line_no, coarse, w))
            continue
        # CJK-heavy piece: re-slice finer so one piece is about `tokens` tokens.
        for fine in _slice_units(coarse, max(1, tokens)):
            out.append(_Segment(line_no, fine, weighted_len(fine)))
    return out


def chunk_markdown(content: str, *, tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    """Split `content` into overlapping chunks that keep 1-based line ranges.

    Whitespace-only chunks are dropped. The overlap carried into the next chunk is capped at half
    the chunk budget, and an over-long chunk is truncated (the later upstream revision).
    """
    tokens = max(1, int(tokens))
    overlap = min(max(0, int(overlap)), tokens - 1)
    max_chars = max(32, 4 * tokens)
    carry_cap = min(max(0, 4 * overlap), max_chars // 2)

    chunks: list[Chunk] = []
    current: list[_Segment] = []
    size = 0

    def flush() -> None:
        text = "\n".join(seg.text for seg in current)
        if utf16_len(text) > max_chars:
            text = utf16_slice(text, max_chars)
        if text.strip():
            chunks.append(Chunk(current[0].line, current[-1].line, text, sha256_text(text)))

    def carry() -> tuple[list[_Segment], int]:
        if carry_cap <= 0:
            return [], 0
        kept: list[_Segment] = []
        acc = 0
        for seg in reversed(current):
            if acc >= carry_cap:
                break
            acc += seg.weight + 1
            kept.append(seg)
        kept.reverse()
        return kept, acc

    section_floor = max_chars // 4
    fresh = 0  # size added since the last flush (the carried overlap is not new)
    section = 0  # size of the section so far (since the last heading)
    in_fence = False
    for line_no, line in enumerate(content.split("\n"), start=1):
        if _FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence and _HEADING_RE.match(line):
            if fresh == 0 or section >= section_floor:
                if fresh:
                    flush()  # a substantial section ends here
                current, size, fresh = [], 0, 0  # and nothing of it (not even the overlap) runs on
            section = 0
        for seg in _line_segments(line, line_no, max_chars, tokens):
            cost = seg.weight + 1
            if current and size + cost > max_chars:
                flush()
                current, size = carry()
                fresh = 0
            current.append(seg)
            size += cost
            fresh += cost
            section += cost
    if current:
        flush()
    return chunks


def split_for_input_limit(chunks: list[Chunk], max_bytes: int) -> list[Chunk]:
    """Split chunks over a provider's input limit (UTF-8 bytes) into consecutive pieces.

    Pieces keep the chunk's line range and get their own hash; a split never cuts a character.
    """
    out: list[Chunk] = []
    for c in chunks:
        data = c.text.encode("utf-8", "surrogatepass")
        if len(data) <= max_bytes:
            out.append(c)
            continue
        rest = c.text
        while rest:
            # Binary search for the longest prefix (in characters) that fits the byte budget.
            lo, hi = 1, len(rest)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if len(rest[:mid].encode("utf-8", "surrogatepass")) <= max_bytes:
                    lo = mid
                else:
                    hi = mid - 1
            piece, rest = rest[:lo], rest[lo:]
            out.append(Chunk(c.start_line, c.end_line, piece, sha256_text(piece)))
    return out
