"""What the postings table holds for a chunk, and what a query looks up: the builtin's tokenisation,
through the very tokenizer its FTS5 index uses (SQLite's porter over unicode61, diacritics folded),
so both backends see the same terms. CJK text is indexed as characters (spaced apart as for FTS5)
plus adjacent-character bigrams, so a 2-character CJK phrase is one term lookup."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass

import apsw

from memsift.engine.search.fts_query import FtsPlan, index_text
from memsift.engine.text import is_cjk_char

__all__ = ["Posting", "chunk_postings", "QueryItems", "query_items", "word_terms", "TOKENIZER_ARGS"]

TOKENIZER_ARGS = ["unicode61", "remove_diacritics", "2"]  # as backends/builtin/store.fts_tokenizer_clause
_local = threading.local()


def _tokenizer() -> object:
    tok = getattr(_local, "tok", None)
    if tok is None:
        _local.conn = apsw.Connection(":memory:")
        tok = _local.tok = _local.conn.fts5_tokenizer("porter", TOKENIZER_ARGS)
    return tok


def _tokens(text: str, reason: int) -> list[str]:
    found = _tokenizer()(text.encode("utf-8"), reason, None, include_offsets=False, include_colocated=False)
    return [t if isinstance(t, str) else t[0] for t in found]


def word_terms(word: str) -> list[str]:
    """The terms a query word is looked up by (its stem; several for a word the tokenizer splits)."""
    return _tokens(index_text(word, "unicode61"), apsw.FTS5_TOKENIZE_QUERY)


@dataclass
class Posting:
    term: str
    tf: int
    positions: list[int]


def _is_cjk_token(tok: str) -> bool:
    return len(tok) == 1 and is_cjk_char(tok)


def chunk_postings(text: str) -> tuple[list[Posting], int]:
    """The chunk's postings and its length in tokens (the FTS5 document length; bigrams not counted)."""
    toks = _tokens(index_text(text, "unicode61"), apsw.FTS5_TOKENIZE_DOCUMENT)
    positions: dict[str, list[int]] = defaultdict(list)
    for i, tok in enumerate(toks):
        positions[tok].append(i)
        if i and _is_cjk_token(tok) and _is_cjk_token(toks[i - 1]):
            positions[toks[i - 1] + tok].append(i - 1)  # a CJK bigram
    return [Posting(t, len(p), p) for t, p in positions.items()], len(toks)


@dataclass
class QueryItems:
    """The plan's OR terms, as FTS5 would match them: single terms and phrases of several tokens."""

    terms: list[str]
    phrases: list[tuple[str, ...]]


def expansion_items(plan: FtsPlan) -> list[str]:
    """The plan's expansion words as index terms (stemmed as the index stems them)."""
    out: list[str] = []
    for word in plan.expansions:
        out += _tokens(word, apsw.FTS5_TOKENIZE_QUERY)
    return list(dict.fromkeys(out))


def query_items(plan: FtsPlan) -> QueryItems:
    terms: list[str] = []
    phrases: list[tuple[str, ...]] = []
    for quoted in plan.match_terms:
        inner = quoted[1:-1].replace('""', '"') if quoted.startswith('"') and quoted.endswith('"') else quoted
        toks = _tokens(inner, apsw.FTS5_TOKENIZE_QUERY)
        if not toks:
            continue
        if len(toks) == 1:
            terms.append(toks[0])
        elif len(toks) == 2 and _is_cjk_token(toks[0]) and _is_cjk_token(toks[1]):
            terms.append(toks[0] + toks[1])  # indexed as a bigram
        else:
            phrases.append(tuple(toks))
    return QueryItems(list(dict.fromkeys(terms)), list(dict.fromkeys(phrases)))
