"""Writing systems: which scripts a query is written in, and whether an embedding model covers them.

A model trained on English text (the bundled all-MiniLM-L6-v2) turns a Chinese or Japanese
question into a vector that is noise: with it at weight 0.7, hybrid search ranked *worse* than
keyword search alone on three CJK question sets. Providers declare the scripts they cover
(`scripts`, None meaning multilingual or unknown), and a search whose query is mostly in other
scripts lets the keyword side answer alone, visibly.

Shares are counted in word-like units: a run of letters of an alphabetic script is one unit, and
each Han, kana or hangul character is one (it carries about as much as a word).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

__all__ = ["vector_mode_warning", "ScriptCoverage", "query_scripts", "coverage", "MOSTLY"]

MOSTLY = 0.5  # a query whose uncovered share is above this is "mostly" in uncovered scripts

# First word(s) of a character's Unicode name → script; anything else with a letter is "Other".
_NAME_PREFIXES = {
    "LATIN": "Latin",
    "CJK": "Han",
    "HIRAGANA": "Kana",
    "KATAKANA": "Kana",
    "HALFWIDTH KATAKANA": "Kana",
    "HANGUL": "Hangul",
    "CYRILLIC": "Cyrillic",
    "GREEK": "Greek",
    "ARABIC": "Arabic",
    "HEBREW": "Hebrew",
    "THAI": "Thai",
    "DEVANAGARI": "Devanagari",
    "BENGALI": "Bengali",
    "TAMIL": "Tamil",
    "ARMENIAN": "Armenian",
    "GEORGIAN": "Georgian",
    "ETHIOPIC": "Ethiopic",
}
_PER_CHARACTER = {"Han", "Kana", "Hangul", "Thai"}  # written without spaces between words
_NAMES = {"Han": "Chinese characters (Han)", "Kana": "Japanese kana", "Hangul": "Korean hangul"}


def _script(ch: str) -> str | None:
    if ch.isascii():
        return "Latin" if ch.isalpha() else None
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    for prefix, script in _NAME_PREFIXES.items():
        if name.startswith(prefix):
            return script
    if name.startswith("FULLWIDTH LATIN"):
        return "Latin"
    return "Other"


def query_scripts(text: str) -> dict[str, int]:
    """Word-like units per script in `text` (digits, spaces and punctuation count for none)."""
    counts: dict[str, int] = {}
    prev: str | None = None
    for ch in text:
        script = _script(ch)
        if script is not None and (script in _PER_CHARACTER or script != prev):
            counts[script] = counts.get(script, 0) + 1
        prev = script
    return counts


@dataclass(frozen=True)
class ScriptCoverage:
    uncovered_share: float  # 0..1 of the query's units in scripts the model does not cover
    main_uncovered: str | None  # the largest such script, for messages

    @property
    def mostly_uncovered(self) -> bool:
        return self.uncovered_share > MOSTLY

    def describe(self) -> str:
        name = _NAMES.get(self.main_uncovered or "", f"{self.main_uncovered} script")
        return f"{round(100 * self.uncovered_share)}% of the query is in {name}"


def coverage(text: str, covered: frozenset[str] | None) -> ScriptCoverage:
    """How much of `text` lies outside `covered` (None: the model covers every script)."""
    if covered is None:
        return ScriptCoverage(0.0, None)
    counts = query_scripts(text)
    total = sum(counts.values())
    outside = {s: n for s, n in counts.items() if s not in covered}
    if not total or not outside:
        return ScriptCoverage(0.0, None)
    return ScriptCoverage(sum(outside.values()) / total, max(outside, key=outside.__getitem__))


def vector_mode_warning(query: str, provider: object | None) -> str | None:
    """For `--mode vector` (the vector side alone, asked for): the warning that the model does not
    cover the query's script, so its results are likely noise; None when it does."""
    if provider is None:
        return None
    cov = coverage(query, getattr(provider, "scripts", None))
    if not cov.mostly_uncovered:
        return None
    model = f"{getattr(provider, 'id', '?')}/{getattr(provider, 'model', '?')}"
    return (f"{cov.describe()}, which {model} does not cover: these vector results are likely noise "
            "(--mode hybrid or keyword searches the query's words)")
