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

from ..text import utf16_len, utf16_slice, weighted_len
from ..config.sizes import EVIDENCE_TOKENS, REFERENCE_OVERLAP, REFERENCE_TOKENS

__all__ = [
    "Chunk",
    "chunk_markdown",
    "chunk_evidence",
    "chunk_text",
    "sha256_text",
    "chunk_id",
    "split_for_input_limit",
    "EVIDENCE_TOKENS",
    "CHUNKER_REVISION",
    "file_lines",
    "REFERENCE_TOKENS",
    "REFERENCE_OVERLAP",
]

# In every index's fingerprint. 2: long lines cut between words; 3: a final newline ends the last
# line (it used to open an empty line past the end, so a chunk ending the file cited line N+1); 4: a
# UTF-8 byte-order mark is not text (it hid a first line's dated heading).
CHUNKER_REVISION = "capped-overlap+sections-4"


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
    whole: bool = True  # the whole line, not a piece of a long one


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_id(source: str, path: str, start: int, end: int, chunk_hash: str, model: str) -> str:
    """A chunk's id in every backend's index: the same chunk of the same file embedded by the same
    model keeps it (its vector is reused)."""
    return hashlib.sha256(f"{source}:{path}:{start}:{end}:{chunk_hash}:{model}".encode()).hexdigest()


# Where a long line may be cut: after a space or a sentence/clause mark (CJK ones too).
_SOFT_BREAK_RE = re.compile(r"[\s.!?;,。！？；，、]")


def _soft_cut(piece: str) -> int | None:
    """The end of `piece` moved back to its last break in the final quarter, or None."""
    floor = len(piece) * 3 // 4
    for i in range(len(piece) - 1, floor - 1, -1):
        if _SOFT_BREAK_RE.match(piece[i]):
            return i + 1
    return None


def _slice_units(s: str, width: int) -> list[str]:
    """Cut `s` into pieces of at most `width` UTF-16 units (a pair stays whole), at a word or
    clause boundary when one is near the end, so no word is cut in two (a cut word is lost to
    keyword search and shows broken in the snippet)."""
    pieces: list[str] = []
    rest = s
    while rest:
        piece = utf16_slice(rest, width)
        if not piece:  # width 1 and a non-BMP char first: take it whole rather than loop
            piece = rest[0]
        if len(piece) < len(rest):
            piece = piece[: _soft_cut(piece) or len(piece)]
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


def file_lines(content: str) -> list[str]:
    """The file's lines as `memory_get` numbers them: a final newline ends the last line and
    opens no other, so no chunk (and no citation) names a line past the end of the file."""
    lines = content.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


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
    for line_no, line in enumerate(file_lines(content), start=1):
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


def _fill_pieces(line: str, room: int, width: int) -> list[str]:
    """Cut a long line into a first piece of at most `room` weighted units, then pieces of at
    most `width` of about equal size (no tiny tail), each ending at a word or clause boundary
    when one is near its end."""
    pieces: list[str] = []
    rest, limit = line, room
    while rest:
        if pieces:  # after the head: spread the rest evenly over as few pieces as fit
            total = weighted_len(rest)
            limit = min(width, -(-total // -(-total // width)) + 16)
        piece = utf16_slice(rest, limit) or rest[0]
        if weighted_len(piece) > limit:  # CJK weighs 4: a quarter of the units always fits
            piece = utf16_slice(rest, max(1, limit // 4)) or rest[0]
        if len(piece) < len(rest):
            piece = piece[: _soft_cut(piece) or len(piece)]
        pieces.append(piece)
        rest = rest[len(piece) :]
    return pieces


def chunk_evidence(content: str, *, tokens: int = 175) -> list[Chunk]:
    """Chunks that are what a hit shows: at most `tokens` × 4 units (175 → the 700-character
    snippet), whole lines, no overlap, so the lines a hit shows are the lines that earned its score.

    - Lines are packed whole; a line that does not fit starts the next chunk.
    - A long line (over half the budget: a long chat turn, an unwrapped paragraph) fills the rest
      of the chunk and continues in chunk-sized pieces, cut between words.
    - A short line right before a long one stays with it (a question and its long answer, a label
      and its paragraph): when too little room is left for the long line's start, the short line
      moves to the next chunk with it instead of ending this one cut off from its reply.
    - A heading after a substantial section (a quarter of the budget) starts a new chunk, as in
      `chunk_markdown`; headings in code fences do not count.
    """
    budget = max(32, 4 * max(1, int(tokens)))
    chunks: list[Chunk] = []
    current: list[_Segment] = []
    size = 0

    def flush() -> None:
        nonlocal current, size
        text = "\n".join(seg.text for seg in current)
        if text.strip():
            chunks.append(Chunk(current[0].line, current[-1].line, text, sha256_text(text)))
        current, size = [], 0

    def add(seg: _Segment) -> None:
        nonlocal size
        current.append(seg)
        size += seg.weight + 1

    section = 0
    in_fence = False
    for line_no, line in enumerate(file_lines(content), start=1):
        if _FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence and _HEADING_RE.match(line):
            if current and section >= budget // 4:
                flush()  # a substantial section ends here
            section = 0
        weight = weighted_len(line)
        section += weight + 1
        if size + weight + 1 <= budget:
            add(_Segment(line_no, line, weight))
            continue
        if weight <= budget // 2:  # a short line is never split: it starts the next chunk
            flush()
            add(_Segment(line_no, line, weight))
            continue
        if current and budget - size - 1 < budget // 4:
            last = current[-1]
            lead = last if len(current) > 1 and last.whole and last.weight <= budget // 3 else None
            if lead is not None:
                current.pop()
                size -= lead.weight + 1
            flush()
            if lead is not None:
                add(lead)
        for piece in _fill_pieces(line, budget - size - 1 if current else budget, budget):
            w = weighted_len(piece)
            if current and size + w + 1 > budget:
                flush()
            add(_Segment(line_no, piece, w, whole=False))
    if current:
        flush()
    return chunks


def chunk_text(content: str, *, strategy: str, tokens: int, overlap: int = 0) -> list[Chunk]:
    """The configured chunker (`chunking.strategy`): `evidence` or `reference`."""
    if strategy == "evidence":
        return chunk_evidence(content, tokens=tokens)
    return chunk_markdown(content, tokens=tokens, overlap=overlap)


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
