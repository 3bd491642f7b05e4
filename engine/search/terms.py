"""FTS5's terms outside FTS5: what a chunk holds and what a query looks up, through the very
tokenizer the builtin index uses, for backends that keep their own keyword index (the Postgres
postings table, a plugin's full-text index), so every backend sees the same terms.

- `unicode61` (the default): SQLite's porter over unicode61, diacritics folded. CJK text is
  indexed as characters (spaced apart as for FTS5) plus adjacent-character bigrams, so a
  2-character CJK phrase is one term lookup.
- `trigram` (`store.fts.tokenizer: "trigram"`): FTS5's trigram tokenizer, case folded, over the
  same indexed text as builtin's (CJK runs spaced into pairs, short words padded): every query
  term of three characters or more is a phrase of its trigrams, matched by their positions."""

from __future__ import annotations

import threading
from typing import Any
from collections import defaultdict
from dataclasses import dataclass

import apsw

from ..text import is_cjk_char
from .fts_query import FtsPlan, index_text

__all__ = [
    "Posting",
    "chunk_postings",
    "chunk_tokens",
    "QueryItems",
    "query_items",
    "expansion_items",
    "word_terms",
    "TOKENIZER_ARGS",
]

TOKENIZER_ARGS = ["unicode61", "remove_diacritics", "2"]  # as backends/builtin/store.fts_tokenizer_clause
_local: Any = threading.local()


def _tokenizer(kind: str) -> Any:
    toks = getattr(_local, "toks", None)
    if toks is None:
        _local.conn = apsw.Connection(":memory:")
        toks = _local.toks = {}
    if kind not in toks:  # as backends/builtin/store.fts_tokenizer_clause builds each
        toks[kind] = (_local.conn.fts5_tokenizer("trigram", ["case_sensitive", "0"]) if kind == "trigram"
                      else _local.conn.fts5_tokenizer("porter", TOKENIZER_ARGS))
    return toks[kind]


def _tokens(text: str, reason: int, kind: str = "unicode61") -> list[str]:
    found = _tokenizer(kind)(text.encode("utf-8"), reason, None, include_offsets=False, include_colocated=False)
    return [t if isinstance(t, str) else t[0] for t in found]


def chunk_tokens(text: str, kind: str = "unicode61") -> list[str]:
    """The chunk's tokens in order, as FTS5 indexes them (no CJK bigrams: a pair is two adjacent tokens)."""
    return _tokens(index_text(text, kind), apsw.FTS5_TOKENIZE_DOCUMENT, kind)


def word_terms(word: str, kind: str = "unicode61") -> list[str]:
    """The terms a query word is looked up by (its stem, or its trigrams; several for a word the
    tokenizer splits)."""
    return _tokens(index_text(word, kind), apsw.FTS5_TOKENIZE_QUERY, kind)


@dataclass
class Posting:
    term: str
    tf: int
    positions: list[int]


def _is_cjk_token(tok: str) -> bool:
    return len(tok) == 1 and is_cjk_char(tok)


def chunk_postings(text: str, kind: str = "unicode61") -> tuple[list[Posting], int]:
    """The chunk's postings and its length in tokens (the FTS5 document length; bigrams not counted)."""
    toks = _tokens(index_text(text, kind), apsw.FTS5_TOKENIZE_DOCUMENT, kind)
    positions: dict[str, list[int]] = defaultdict(list)
    bigrams = kind != "trigram"  # a trigram index finds CJK pairs through its padded text
    for i, tok in enumerate(toks):
        positions[tok].append(i)
        if bigrams and i and _is_cjk_token(tok) and _is_cjk_token(toks[i - 1]):
            positions[toks[i - 1] + tok].append(i - 1)  # a CJK bigram
    return [Posting(t, len(p), p) for t, p in positions.items()], len(toks)


@dataclass
class QueryItems:
    """The plan's OR terms, as FTS5 would match them: single terms and phrases of several tokens."""

    terms: list[str]
    phrases: list[tuple[str, ...]]


def expansion_items(plan: FtsPlan, kind: str = "unicode61") -> QueryItems:
    """The plan's expansion words as the index holds them: terms (stemmed as the index stems
    them), or with trigrams, phrases of a word's trigrams."""
    return _items([word_terms(word, kind) if kind == "trigram" else _tokens(word, apsw.FTS5_TOKENIZE_QUERY)
                   for word in plan.expansions], kind, split_words=kind != "trigram")


def query_items(plan: FtsPlan, kind: str = "unicode61") -> QueryItems:
    groups = []
    for quoted in plan.match_terms:
        inner = quoted[1:-1].replace('""', '"') if quoted.startswith('"') and quoted.endswith('"') else quoted
        groups.append(_tokens(inner, apsw.FTS5_TOKENIZE_QUERY, kind))
    return _items(groups, kind)


def _items(groups: list[list[str]], kind: str, *, split_words: bool = False) -> QueryItems:
    """Token groups as terms (one token; a CJK pair indexed as a bigram) and phrases (several);
    `split_words`: each token of a group stands alone (expansions are words, not phrases)."""
    terms: list[str] = []
    phrases: list[tuple[str, ...]] = []
    for toks in groups:
        if split_words:
            terms += toks
        elif len(toks) == 1:
            terms.append(toks[0])
        elif kind != "trigram" and len(toks) == 2 and _is_cjk_token(toks[0]) and _is_cjk_token(toks[1]):
            terms.append(toks[0] + toks[1])  # indexed as a bigram
        elif toks:
            phrases.append(tuple(toks))
    return QueryItems(list(dict.fromkeys(terms)), list(dict.fromkeys(phrases)))
