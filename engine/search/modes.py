"""Which retrieval a search runs: the configured one (`auto`), or a mode picked per search.

`keyword` is BM25 only (the FTS-only path, as with `provider: "none"`), `vector` the embedding
side only, `hybrid` both merged. On the QMD backend they pick QMD's `search`, `vsearch` and
`query`. Operators and parity tests compare modes with these, without private APIs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SEARCH_MODES", "parse_search_mode", "QMD_MODE_FOR", "Sides", "search_sides"]

SEARCH_MODES = ("auto", "hybrid", "keyword", "vector")
_ALIASES = {
    "": "auto",
    "default": "auto",
    "fts": "keyword",
    "fts-only": "keyword",
    "bm25": "keyword",
    "lexical": "keyword",
    "vector-only": "vector",
    "semantic": "vector",
}
QMD_MODE_FOR = {"keyword": "search", "vector": "vsearch", "hybrid": "query"}


def parse_search_mode(value: str | None) -> str:
    """The canonical mode for a user's spelling; ValueError names the allowed ones."""
    if value is None:
        return "auto"
    key = str(value).strip().lower()
    mode = _ALIASES.get(key, key)
    if mode not in SEARCH_MODES:
        raise ValueError(f"unknown search mode {value!r}; use one of: {', '.join(SEARCH_MODES)}")
    return mode


@dataclass(frozen=True)
class Sides:
    """The retrieval sides one search runs (`search_sides`)."""

    requested: str  # auto, hybrid, keyword or vector
    vector: bool
    keyword: bool  # also when the vector side answers (a missing vector side always falls back to it)
    set_aside: str | None = None  # why the vector side stepped aside


def search_sides(q: str, requested: str, *, hybrid_enabled: bool, provider: Any) -> Sides:
    """Which sides a search runs, on every backend that embeds with memsift's providers: the mode
    asked for, what the config enables, and whether the model covers the query's script (a query
    mostly in a script the model never learnt gets a vector that is noise, so the keyword side
    answers alone)."""
    if requested == "keyword":
        return Sides(requested, vector=False, keyword=True)
    if requested == "vector":
        return Sides(requested, vector=True, keyword=False)
    keyword = requested == "hybrid" or hybrid_enabled
    if provider is not None:
        from .scripts import coverage  # noqa: PLC0415

        cov = coverage(q, getattr(provider, "scripts", None))
        if cov.mostly_uncovered:
            reason = f"{cov.describe()}, which {provider.id}/{provider.model} does not cover: keyword search only"
            return Sides(requested, vector=False, keyword=True, set_aside=reason)
    return Sides(requested, vector=True, keyword=keyword)
