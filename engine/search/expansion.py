"""Bounded lexical query expansion from a packaged lexicon (WordNet 3.0, data/lexicon.tsv,
built by contrib/lexicon/build_lexicon.py): a question's words in the forms its notes may use.

- irregular inflections both ways: "bought" finds "buy", "choose" finds "chose" and "chosen"
  (regular ones are the Porter stemmer's job in the keyword index);
- words of the same root the stemmer keeps apart: "plumbing" finds "plumber", "teacher" finds
  "teach";
- for a word the question uses as a verb (right after a subject or an auxiliary: "did we pick",
  "I bought", "to buy"), the words of its most frequent sense: "pick" finds "choose" and
  "select", and so "chose" (an expansion's own irregular forms come along). A noun-like use
  ("transcription start sites") gets no synonyms: on SciFact, "start" → "begin" cost a claim.

Expansions are capped per word and per question, never repeat a question's own word, and leave
CJK and identifiers alone. Callers weigh them below the question's own words.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar
from pathlib import Path

from .ranking import bm25_relative_scores
from .stopwords import STOP_WORDS

K = TypeVar("K")  # a store's key for a chunk (a row id, a chunk id)

__all__ = ["Lexicon", "lexicon", "expand_terms", "variants_by_term", "verbs_of", "keyword_scores", "MAX_PER_TERM",
           "MAX_PER_QUERY", "NO_OWN_EVIDENCE", "EXPANSION_WEIGHT"]

MAX_PER_TERM = 4
MAX_PER_QUERY = 8
# An expansion's keyword evidence (its own BM25, relative to its best hit) against the question's
# own words: enough to break a near-tie ("pick" → "chose"), too little to outrank them. At 0.5
# and 0.25 it cost the lme dev set 0.006–0.015 of recall@10; at 0.1 it is neutral on both sets.
EXPANSION_WEIGHT = 0.1
# Below this, the question's own words carry no keyword evidence (FTS5 clamps the IDF of a word in
# half the chunks or more to 1e-6, so its best hit scores about 1e-6): the expansions then stand in
# for them at full weight. In the example workspace "ledger" is in most chunks and "pick" and
# "database" in none, so only "chose" tells the decision from the section about the ledger.
NO_OWN_EVIDENCE = 0.01


# A word right after one of these is used as a verb ("didn't" is tokenized "didn", "t").
VERB_CUES = frozenset("""i we you he she they it to did do does didn doesn don t will would can could should
    shall may might must not never just also then and ve ll d""".split())


def verbs_of(words: list[str]) -> set[str]:
    """The words of a question (lowercase, in order) that follow a subject or an auxiliary."""
    return {w for prev, w in zip(words, words[1:]) if prev in VERB_CUES}


def _row(text: str, word: str) -> str | None:
    """The line of `word` in the sorted table, by bisection over the text itself (no parse: a search
    needs a handful of its 10,100 words; splitting it into lines would cost a cold search ~6 ms)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi) // 2
        start = text.rfind("\n", 0, mid) + 1
        end = text.find("\n", mid)
        end = len(text) if end < 0 else end
        key = text[start: text.find("\t", start, end)]
        if key < word:
            lo = end + 1
        elif key > word:
            hi = start
        else:
            return text[start:end]
    return None


class _Column(Mapping):
    """One column of the sorted lexicon (0 lemma, 1 irregular forms, 2 synonyms, 3 related)."""

    def __init__(self, text: str, column: int) -> None:
        self._text, self._column = text, column

    def _field(self, word: str) -> str:
        row = _row(self._text, word) if word and "\t" not in word and "\n" not in word else None
        return row.split("\t")[1 + self._column] if row else ""

    def __getitem__(self, word: str):  # noqa: ANN204
        value = self._field(word)
        if not value:
            raise KeyError(word)
        return value if self._column == 0 else tuple(value.split())

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and bool(self._field(word))

    def __iter__(self) -> Iterator[str]:
        return (line.split("\t", 1)[0] for line in self._text.splitlines() if line.split("\t")[1 + self._column])

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class Lexicon:
    lemma: Mapping[str, str]
    forms: Mapping[str, tuple[str, ...]]
    synonyms: Mapping[str, tuple[str, ...]]
    related: Mapping[str, tuple[str, ...]]

    def variants(self, word: str, *, synonyms: bool = True) -> list[str]:
        """Other forms and words for `word`, best first: its lemma and the lemma's irregular forms,
        then its synonyms and theirs, then the words of its root the stemmer keeps apart
        (plumbing → plumber)."""
        base = self.lemma.get(word, word)
        out = [base, *self.forms.get(base, ())]
        if synonyms:
            for syn in self.synonyms.get(base, ()):
                out += [syn, *self.forms.get(syn, ())]
        out += self.related.get(word, ()) or self.related.get(base, ())
        return [w for w in dict.fromkeys(out) if w != word]


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    """The packaged lexicon (about 10,100 lines of `word, lemma, forms, synonyms, related`, sorted by
    word by contrib/lexicon/build_lexicon.py: a test checks), read once per process (under 1 ms)."""
    text = (Path(__file__).parent / "data" / "lexicon.tsv").read_text(encoding="utf-8")
    return Lexicon(_Column(text, 0), _Column(text, 1), _Column(text, 2), _Column(text, 3))


def expand_terms(terms: list[str], *, verbs: set[str] | None = None, synonyms: bool = True,
                 per_term: int = MAX_PER_TERM, per_query: int = MAX_PER_QUERY) -> list[str]:
    """The expansions of a question's keyword terms (lowercase), at most `per_term` for each and
    `per_query` in all, none of them a term already asked. `verbs`: the terms used as verbs
    (`verbs_of`), which alone get synonyms; None: every term."""
    asked = set(terms)
    lex = lexicon()
    out: list[str] = []
    for term in terms:
        if not term.isascii() or not term.isalpha():
            continue
        with_synonyms = synonyms and (verbs is None or term in verbs)
        out += [w for w in lex.variants(term, synonyms=with_synonyms)
                if w not in asked and w not in out and w not in STOP_WORDS][:per_term]
    return out[:per_query]


def variants_by_term(question_words: list[str], terms: Sequence[str], *, expansion: str = "synonyms"
                     ) -> dict[str, list[str]]:
    """Each of `terms`' expansions on its own, as `expand_terms` gives them for the whole question
    (`question_words`: its words in order, lowercase, for which are verbs). `expansion`: the
    configured `query.expansion` ("off": none)."""
    if expansion == "off":
        return {}
    verbs = verbs_of(question_words)
    out = {t: expand_terms([t], verbs=verbs, synonyms=expansion == "synonyms") for t in terms}
    return {t: v for t, v in out.items() if v}


def keyword_scores(rows: Sequence[tuple[K, float]], expansion_rows: Sequence[tuple[K, float]] = (), *,
                   limit: int | None = None, extra: Iterable[K] = ()) -> list[tuple[K, float, float | None]]:
    """The keyword side's scores from a store's raw BM25 ranks (FTS5's sign: lower is better), the maths
    every store shares, written once: each of `rows` scores its BM25 relative to the best of them
    (`bm25_relative_scores`); the question's expansions matched on their own (`expansion_rows`, best
    first) add EXPANSION_WEIGHT × theirs, capped at 1 ("chose" counts for "pick", less than "pick"
    would), a chunk only they find joining with no rank; their whole score when no own word scores
    NO_OWN_EVIDENCE anywhere (none matched, or only words too common to weigh). Then the best `limit`
    by score (None: all, in the order found) and after them the `extra` rows (those in `rows` only
    because the vector side found them), whatever their score. Returns (key, keyword score, raw rank or None)."""
    scored: dict[K, tuple[float, float | None]] = {}
    for (key, rank), score in zip(rows, bm25_relative_scores([r for _, r in rows])):
        scored[key] = (score, rank)
    weight = EXPANSION_WEIGHT if any(s >= NO_OWN_EVIDENCE for s, _ in scored.values()) else 1.0
    for (key, _rank), score in zip(expansion_rows, bm25_relative_scores([r for _, r in expansion_rows])):
        text, own_rank = scored.get(key, (0.0, None))
        scored[key] = (min(1.0, text + weight * score), own_rank)
    if limit is None:
        return [(key, score, rank) for key, (score, rank) in scored.items()]
    extras = list(extra)
    skip = set(extras)
    top = heapq.nlargest(limit, ((k, v) for k, v in scored.items() if k not in skip), key=lambda kv: kv[1][0])
    top += [(k, scored[k]) for k in extras]
    return [(key, score, rank) for key, (score, rank) in top]