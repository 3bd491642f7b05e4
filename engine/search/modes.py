"""Which retrieval a search runs: the configured one (`auto`), or a mode picked per search.

`keyword` is BM25 only (the FTS-only path, as with `provider: "none"`), `vector` the embedding
side only, `hybrid` both merged. On the QMD backend they pick QMD's `search`, `vsearch` and
`query`. Operators and parity tests compare modes with these, without private APIs.
"""

from __future__ import annotations

__all__ = ["SEARCH_MODES", "parse_search_mode", "QMD_MODE_FOR"]

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
