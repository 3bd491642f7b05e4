"""Text helpers: UTF-16 lengths (the reference counts JS string units), CJK detection, safe slicing."""

from __future__ import annotations

import re

__all__ = [
    "utf16_len",
    "utf16_slice",
    "is_cjk_char",
    "weighted_len",
    "WORD_RE",
    "word_tokens",
]

# Unicode letters, numbers and underscore: the reference's token definition ([\p{L}\p{N}_]).
WORD_RE = re.compile(r"[^\W]+", re.UNICODE)

# CJK ranges that the chunker weights as 4 chars each (spec 3.2).
_CJK_RANGES = (
    (0x2E80, 0x9FFF),
    (0xA000, 0xA4FF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)

# Scripts written without spaces between words (kana, Han, hangul) for search purposes.
_SEARCH_CJK_RANGES = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3131, 0x318F),  # hangul compatibility jamo
    (0x3400, 0x9FFF),  # CJK ext A + unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # compatibility ideographs
    (0x20000, 0x2FA1F),  # ext B..
)


def utf16_len(s: str) -> int:
    """Length in UTF-16 code units, as JavaScript's `.length` counts it."""
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def utf16_slice(s: str, limit: int) -> str:
    """The longest prefix of `s` that is at most `limit` UTF-16 units, never splitting a pair."""
    if limit <= 0:
        return ""
    if len(s) * 2 <= limit:
        return s
    used = 0
    for i, ch in enumerate(s):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > limit:
            return s[:i]
    return s


def is_cjk_char(ch: str) -> bool:
    """True for kana, Han and hangul characters: scripts searched as character n-grams."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _SEARCH_CJK_RANGES)


def _is_weighted_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def weighted_len(s: str) -> int:
    """Chunking size: UTF-16 units, but each CJK code point counts 4 (it is about one token)."""
    total = 0
    for ch in s:
        cp = ord(ch)
        if _is_weighted_cjk(cp):
            total += 4
        else:
            total += 2 if cp > 0xFFFF else 1
    return total


def word_tokens(s: str) -> list[str]:
    """Lowercased runs of letters, digits and underscore."""
    return [m.group(0).lower() for m in WORD_RE.finditer(s)]
