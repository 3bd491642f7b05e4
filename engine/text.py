"""Text helpers: UTF-16 lengths (the reference counts JS string units), CJK detection, safe slicing."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

from .lazy import lazy_re

__all__ = [
    "utf16_len",
    "utf16_slice",
    "is_cjk_char",
    "weighted_len",
    "has_cjk",
    "space_cjk",
    "compat_form",
    "WORD_RE",
    "word_tokens",
    "match_form",
    "folded_words",
    "LETTER_FOLDS",
    "shorten",
]

# Unicode letters, numbers and underscore: the reference's token definition ([\p{L}\p{N}_]).
WORD_RE = re.compile(r"[^\W]+", re.UNICODE)

# CJK ranges that the chunker weights as 4 chars each (as OpenClaw does; docs/parity.md).
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


def _char_class(ranges: tuple[tuple[int, int], ...]) -> Any:
    return lazy_re("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in ranges) + "]")


# Character classes compiled once, on first use (wide classes take ~5 ms to compile, and an ASCII
# search never needs them): these helpers run over every character of every indexed chunk, and a
# regex scan is ~50x faster than a Python loop over code points.
_ASTRAL_RE = re.compile("[\U00010000-\U0010FFFF]")  # two UTF-16 units each
_SEARCH_CJK_RE = _char_class(_SEARCH_CJK_RANGES)
_WEIGHTED_CJK_RE = _char_class(_CJK_RANGES)
_WEIGHTED_ASTRAL_CJK_RE = _char_class(tuple(r for r in _CJK_RANGES if r[0] > 0xFFFF))


def utf16_len(s: str) -> int:
    """Length in UTF-16 code units, as JavaScript's `.length` counts it."""
    if s.isascii():
        return len(s)
    return len(s) + len(_ASTRAL_RE.findall(s))


def utf16_slice(s: str, limit: int) -> str:
    """The longest prefix of `s` that is at most `limit` UTF-16 units, never splitting a pair."""
    if limit <= 0:
        return ""
    if len(s) * 2 <= limit or (len(s) <= limit and s.isascii()):
        return s
    if s.isascii() or _ASTRAL_RE.search(s) is None:
        return s[:limit]  # one unit per character
    used = 0
    for i, ch in enumerate(s):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > limit:
            return s[:i]
    return s


def is_cjk_char(ch: str) -> bool:
    """True for kana, Han and hangul characters: scripts searched as character n-grams."""
    return not ch.isascii() and _SEARCH_CJK_RE.match(ch) is not None


def has_cjk(s: str) -> bool:
    """Whether `s` holds any character that is searched as CJK (see `is_cjk_char`)."""
    return not s.isascii() and _SEARCH_CJK_RE.search(s) is not None


def space_cjk(s: str) -> str:
    """Every CJK character surrounded by spaces (so a word tokenizer sees it as one token)."""
    return _SEARCH_CJK_RE.sub(r" \g<0> ", s) if has_cjk(s) else s


def weighted_len(s: str) -> int:
    """Chunking size: UTF-16 units, but each CJK code point counts 4 (it is about one token)."""
    if s.isascii():
        return len(s)
    cjk = len(_WEIGHTED_CJK_RE.findall(s))
    astral_cjk = len(_WEIGHTED_ASTRAL_CJK_RE.findall(s))  # counted 2 by utf16_len, weighted 4
    return utf16_len(s) + 3 * cjk - astral_cjk


# Invisible characters that text copied from a web page, an e-book or a PDF brings inside words: soft
# hyphens (`Born\u00adholm`, `in\u00adter\u00adna\u00adtion\u00adal`), the zero-width joiner and
# non-joiner, the word joiner and a stray byte-order mark. FTS5 holds them as letters of the word, so
# "Bornholm" never matched such a note. (A zero-width space is a break between words, and stays one.)
_INVISIBLE_IN_WORDS = dict.fromkeys(map(ord, "\u00ad\u200c\u200d\u2060\ufeff"))


def compat_form(s: str) -> str:
    """`s` as search compares text (NFKC): composed, and full-width Latin letters and digits
    (`ｆｉｇ`, `１９６８`, typed in an input method's full-width mode), half-width katakana,
    ligatures (`ﬁ`, from a PDF) and the like as their plain forms, without the invisible
    characters copied text brings inside words (`_INVISIBLE_IN_WORDS`). ASCII costs one scan."""
    return s if s.isascii() else unicodedata.normalize("NFKC", s).translate(_INVISIBLE_IN_WORDS)


# Latin letters that may carry an accent, and the combining accents themselves.
_FOLDABLE_RE = re.compile("[\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]")
# Lowercase Latin letters no accent-stripping reaches (they do not decompose, FTS5 keeps them), as
# people type them on a keyboard without them: "Tromsø" → tromso, "Łódź" → lodz, "Straße" →
# strasse, "Ærø" → aero, "Diyarbakır" → diyarbakir (Lucene's and Elasticsearch's ASCII folding).
LETTER_FOLDS = {"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ı": "i",
                "ħ": "h", "ŧ": "t"}
_FOLDED_LETTER_RE = re.compile("[" + "".join(LETTER_FOLDS) + "ẞÆŒØŁĐÐÞĦŦǾǿǼǽ]")


@lru_cache(maxsize=2048)
def _fold_latin(ch: str) -> str:
    if "\u0300" <= ch <= "\u036f":  # an accent left uncomposed (no precomposed letter has it)
        return ""
    parts = unicodedata.normalize("NFD", ch)
    base = parts[0] if len(parts) > 1 and all("\u0300" <= p <= "\u036f" for p in parts[1:]) else ch
    return LETTER_FOLDS.get(base, base)  # `ǿ` is `ø` with an accent: o


def folded_words(text: str) -> list[str]:
    """The words of `text` holding a letter of `LETTER_FOLDS`, as `match_form` folds them
    (`Łódź` → `lodz`), each once: an index holds them beside the text (`fts_query.index_text`), so
    a question typed without those letters finds the note, and one typed with them still does."""
    if text.isascii() or not _FOLDED_LETTER_RE.search(text):
        return []
    return list(dict.fromkeys(match_form(m.group(0)) for m in WORD_RE.finditer(text)
                              if _FOLDED_LETTER_RE.search(m.group(0))))


def match_form(s: str) -> str:
    """Text as keyword matching compares it: lowercase, in compatibility form (`compat_form`), Latin
    letters without their accents, in either Unicode form ("Café", "cafe\u0301" as macOS writes
    names → "cafe"), as the FTS5 tokenizer folds them, and the letters of `LETTER_FOLDS` folded
    as the index's `folded_words` are, so that what the index matched the ranking and snippet
    stages find too. Other scripts keep their marks, as in FTS5. Text with no such
    letter (ASCII, CJK) costs one scan."""
    lower = s.lower()
    if lower.isascii():
        return lower
    lower = compat_form(lower).lower()  # a full-width `Ｆ` lowers only once it is `F`
    return _FOLDABLE_RE.sub(lambda m: _fold_latin(m.group(0)), lower) if _FOLDABLE_RE.search(lower) else lower


def word_tokens(s: str) -> list[str]:
    """Lowercased runs of letters, digits and underscore."""
    return [m.group(0).lower() for m in WORD_RE.finditer(s)]


def shorten(s: str, limit: int) -> str:
    """`s` cut to `limit` characters with the full length said, so an answer never echoes
    unbounded input (a 200 KB session key, a 6 KB path)."""
    if len(s) <= limit:
        return s
    return f"{s[:limit]}… ({len(s):,} characters)"
