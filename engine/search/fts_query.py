"""Turn any user string into a safe FTS5 query plan, and text into what the FTS table indexes.

Natural-language questions rarely contain every word of the note they are after, so the plan is
an OR of the query's terms (stop words dropped), ranked by BM25: chunks matching more and rarer
terms come first. Identifiers (`memorySearch.query.hybrid`, `a828e60`) and the whole query add
phrase terms, so exact matches score on top. Every term is a double-quoted string built only from
letters and digits, so no user input can reach FTS5's query syntax.

CJK text has no spaces between words:
- `unicode61` mode indexes every CJK character as its own token, so a CJK run is searched as
  phrases of adjacent characters (bigrams, and the whole run): `数据` finds `数据库`.
- `trigram` mode's index holds each chunk's text as it is (any substring of 3+ characters
  matches) plus a copy of its CJK runs with the characters spaced apart, so that a CJK character
  pair is itself a trigram (`索 靖`). A CJK run is searched as the whole run and its spaced
  bigrams: a 2-character name inside a question (`索靖擅长什么？`) is searched like any other word,
  through the index, ranked by BM25 (the trigrams of the whole run alone never contain it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .stopwords import STOP_WORDS
from ..text import WORD_RE, compat_form, folded_words, is_cjk_char, space_cjk

__all__ = [
    "FtsPlan",
    "plan_query",
    "index_text",
    "split_script_runs",
    "query_terms",
    "question_words",
    "clean_query",
    "INDEX_TEXT_REVISION",
]

_IDENT_RE = re.compile(r"[^\W][\w]*(?:[._/:#@-][^\W][\w]*)+", re.UNICODE)
_QUOTED_RE = re.compile(r'"([^"]+)"')
# Control characters (a NUL would end FTS5's string early) and lone surrogates (not encodable).
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# Bump when `index_text` changes: indexes rebuild (2: trigram pairs and short words; 3: compatibility form;
# 4: words with letters no accent-stripping reaches, folded; a word for each checklist box;
# 5: no soft hyphens or joiners inside words).
INDEX_TEXT_REVISION = 5
MAX_TERMS = 64  # bounds the MATCH expression for huge queries
MAX_QUERY_CHARS = 4096  # beyond this, the rest of the query is ignored


@dataclass
class FtsPlan:
    match: str | None  # FTS5 MATCH expression, or None when nothing can be matched
    terms: list[str] = field(default_factory=list)  # lowercase words/CJK runs, for snippets & boosts
    match_terms: list[str] = field(default_factory=list)  # the quoted terms `match` ORs together
    # Bounded lexical expansion (engine/search/expansion.py): other forms and words for the
    # question's own, matched on their own and weighed below them (EXPANSION_WEIGHT).
    expansions: list[str] = field(default_factory=list)
    expansion_match: str | None = None
    boxes: list[str] = field(default_factory=list)  # the checklist boxes a question about tasks asks for (task_terms)


# Checklist boxes ("- [ ] renew the passport", "- 09:41 [x] call the plumber", as `memsift note "[ ] …"`
# writes them) are punctuation, which no keyword index holds: the index holds a word for each box
# (`box_words`), which a question about open or finished tasks looks up (`task_terms`).
OPEN_BOX, DONE_BOX = "memsiftopenbox", "memsiftdonebox"
_BOX_RE = re.compile(r"^[ \t]*(?:(?:[-*+]|\d{1,3}[.)])[ \t]+)?(?:\d{1,2}:\d{2}[ \t]+)?\[([ xX])\][ \t]", re.M)
_TASKS_ASKED = re.compile(r"\b(?:to-?dos?|tasks?|checklists?|action\s+items?|open\s+items?|chores?|"
                          r"(?:left|still|need|needs|have|has|got)\s+to\s+do)\b", re.IGNORECASE)
_DONE_ASKED = re.compile(r"\b(?:done|finish(?:ed)?|complet(?:e|ed)|checked|ticked|crossed)\b", re.IGNORECASE)
_NOT_DONE = re.compile(r"\b(?:not|never|yet|still|left|open|unchecked|unticked|unfinished|incomplete|pending|"
                       r"outstanding|remaining)\b|n't\b", re.IGNORECASE)


def box_words(text: str) -> list[str]:
    """A word for each checklist box of `text`, open or ticked (see OPEN_BOX)."""
    if "[" not in text:
        return []
    return [OPEN_BOX if m.group(1) == " " else DONE_BOX for m in _BOX_RE.finditer(text)]


def task_terms(query: str) -> list[str]:
    """The box words a question about tasks looks up: "what is still on my todo list?" → open
    boxes; "which tasks did I finish?" → ticked ones. A question naming no task, none."""
    if not _TASKS_ASKED.search(query):
        return []
    return [DONE_BOX] if _DONE_ASKED.search(query) and not _NOT_DONE.search(query) else [OPEN_BOX]


def clean_query(query: str) -> str:
    """Control characters and lone surrogates become spaces; any string is then safe to use. In
    compatibility form (`text.compat_form`): a word pasted decomposed (`Zu\u0308rich`) stays one
    word, and one typed full-width (`１９６８`, `ｆｉｇ`) is the word the notes hold."""
    return compat_form(_CONTROL_RE.sub(" ", query))


def split_script_runs(token: str) -> list[str]:
    """Split a word run where it switches between CJK and other scripts: `数据abc` → 数据, abc."""
    runs: list[str] = []
    for ch in token:
        if runs and is_cjk_char(ch) == is_cjk_char(runs[-1][-1]):
            runs[-1] += ch
        else:
            runs.append(ch)
    return runs


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    for m in WORD_RE.finditer(compat_form(text)):
        out.extend(r.lower() for r in split_script_runs(m.group(0)))
    return out


def question_words(query: str) -> list[str]:
    """The question's words in order, lowercase (which of them are verbs: expansion.verbs_of)."""
    return _tokens(query[:MAX_QUERY_CHARS])


def query_terms(query: str) -> list[str]:
    """Distinct lowercase terms of a query, stop words dropped unless nothing else is left."""
    toks = list(dict.fromkeys(_tokens(query[:MAX_QUERY_CHARS])))
    content = [t for t in toks if t not in STOP_WORDS]
    return content or toks


def _spaced(run: str) -> str:
    """` 索 靖 擅 ` : every CJK character between spaces, so pairs and single characters are trigrams."""
    return " " + " ".join(run) + " "


def index_text(text: str, tokenizer: str) -> str:
    """The text the FTS table indexes for a chunk (unicode61: CJK characters spaced apart;
    trigram: the text, then its CJK runs spaced apart and its 1–2 character words between
    spaces, which a trigram index could not match otherwise). In compatibility form, as queries are.
    Either way followed by its words holding a letter no accent-stripping reaches, folded
    (`text.folded_words`: "Łódź" is found by "lodz")."""
    text = compat_form(text)
    added = folded_words(text) + box_words(text)
    if tokenizer != "trigram":
        return space_cjk(text) + ("\n" + " ".join(added) if added else "")
    extra = [f" {word} " for word in added]
    for m in WORD_RE.finditer(text):
        for run in split_script_runs(m.group(0)):
            if is_cjk_char(run[0]):
                extra.append(_spaced(run))
            elif len(run) < 3:
                extra.append(f" {run} ")
    return text + "\n" + "".join(extra) if extra else text


def _phrase(words: list[str]) -> str:
    return '"' + " ".join(words) + '"'


def _word_term(word: str, tokenizer: str) -> str:
    """One non-CJK word as a MATCH term; a trigram index holds a 1–2 letter word between spaces (see `index_text`)."""
    return _phrase([f" {word} "]) if tokenizer == "trigram" and len(word) < 3 else _phrase([word])


def _cjk_terms_unicode61(run: str) -> list[str]:
    chars = list(run)
    if len(chars) <= 2:
        return [_phrase(chars)]
    return [_phrase(chars)] + [_phrase(chars[i : i + 2]) for i in range(len(chars) - 1)]


def _cjk_terms_trigram(run: str) -> list[str]:
    """The whole run (a substring of the text) and its spaced pairs (see `index_text`)."""
    if len(run) == 1:
        return [_phrase([_spaced(run)])]
    pairs = [_phrase([_spaced(run[i : i + 2]).strip()]) for i in range(len(run) - 1)]
    return ([_phrase([run])] if len(run) >= 3 else []) + pairs


def plan_query(query: str, tokenizer: str = "unicode61", *, expansion: str = "off") -> FtsPlan:
    """Build the OR query for `query`. Never raises on any input string. `expansion`: "off",
    "inflections" (irregular forms) or "synonyms" (and a verb's words of its commonest sense)."""
    query = clean_query(query[:MAX_QUERY_CHARS])
    terms = query_terms(query)
    match_terms: list[str] = []
    for term in terms:
        if is_cjk_char(term[0]):
            if tokenizer == "trigram":
                match_terms += _cjk_terms_trigram(term)
            else:
                match_terms += _cjk_terms_unicode61(term)
        else:
            match_terms.append(_word_term(term, tokenizer))

    # Phrase boosts: quoted parts, identifiers, and the whole query (if it is short).
    spans = [m.group(1) for m in _QUOTED_RE.finditer(query)]
    spans += [m.group(0) for m in _IDENT_RE.finditer(query)]
    whole = _tokens(query)
    if 2 <= len(whole) <= 12:
        spans.append(query)
    for span in spans:
        words = _tokens(span)
        if len(words) < 2 or any(is_cjk_char(w[0]) for w in words):
            continue
        if tokenizer == "trigram":  # trigram matches raw substrings: keep the span as typed
            match_terms.append('"' + span.strip().lower().replace('"', '""') + '"')
        else:
            match_terms.append(_phrase(words))

    boxes = task_terms(query)
    match_terms = list(dict.fromkeys(match_terms))[:MAX_TERMS - 1] + [_phrase([t]) for t in boxes]
    expansions: list[str] = []
    if expansion != "off" and match_terms:
        from .expansion import expand_terms, verbs_of  # noqa: PLC0415  (reads the lexicon when first used)

        expansions = expand_terms(terms, verbs=verbs_of(question_words(query)), synonyms=expansion == "synonyms")
    expansion_terms = [_word_term(w, tokenizer) for w in expansions]
    return FtsPlan(" OR ".join(match_terms) if match_terms else None, terms, match_terms, expansions,
                   " OR ".join(expansion_terms) if expansion_terms else None, boxes)
