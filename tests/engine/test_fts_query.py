from __future__ import annotations

import unicodedata

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsift.backends.builtin.store import fts_tokenizer_clause
from memsift.engine.search.fts_query import (DONE_BOX, OPEN_BOX, box_words, index_text, plan_query, query_terms,
                                             task_terms)


def _fts(tokenizer: str, docs: list[str]) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{fts_tokenizer_clause(tokenizer)}')")
    for d in docs:
        conn.execute("INSERT INTO t(text) VALUES (?)", (index_text(d, tokenizer),))
    return conn


def _hits(conn: apsw.Connection, query: str, tokenizer: str) -> list[int]:
    plan = plan_query(query, tokenizer)
    if not plan.match:
        return []
    return [r[0] for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank", (plan.match,))]


DOCS = [
    "We decided to move the ledger to PostgreSQL 16 for transactions.",  # 1
    "Lunch with Lena; she plans a trip to Lisbon in December.",  # 2
    "Fixed flaky test, commit a828e60, timezone dependent.",  # 3
    "Tuned memorySearch.query.hybrid weights to 0.7 and 0.3.",  # 4
    "The query planner and the hybrid car are unrelated topics.",  # 5
    "与陈伟开会，讨论数据管道的延迟问题。",  # 6
    "会议记录：下周三之前完成脚本。",  # 7
]


def test_natural_language_question_matches_with_or_not_and():
    # Under the reference's AND of every token this finds nothing: no note has "what" + "database".
    conn = _fts("unicode61", DOCS)
    assert _hits(conn, "what did we decide about the ledger database?", "unicode61")[0] == 1


def test_stop_words_are_dropped_unless_nothing_else_is_left():
    plan = plan_query("what is the plan for Lisbon")
    assert plan.terms == ["plan", "lisbon"]
    assert plan_query("the who").terms == ["the", "who"]


def test_exact_identifier_ranks_on_top():
    conn = _fts("unicode61", DOCS)
    assert _hits(conn, "a828e60", "unicode61") == [3]
    # Doc 5 has "query" and "hybrid" too, but only doc 4 has the identifier as a phrase.
    assert _hits(conn, "memorySearch.query.hybrid", "unicode61")[0] == 4


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_short_cjk_terms_find_their_notes(tokenizer):
    conn = _fts(tokenizer, DOCS)
    assert _hits(conn, "数据", tokenizer) == [6]
    assert _hits(conn, "会议", tokenizer) == [7]
    assert _hits(conn, "伟", tokenizer) == [6]  # one character


def test_trigram_index_holds_spaced_cjk_pairs_and_short_words():
    assert index_text("与陈伟开会 in Go", "trigram") == "与陈伟开会 in Go\n 与 陈 伟 开 会  in  Go "
    assert plan_query("陈伟开会", "trigram").match_terms == ['"陈伟开会"', '"陈 伟"', '"伟 开"', '"开 会"']
    assert plan_query("Go", "trigram").match == '" go "'


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_a_name_inside_a_longer_cjk_question_is_found(tokenizer):
    # The question's trigrams (陈伟是, 伟是谁) are not in doc 6; the pair 陈伟 is.
    assert _hits(_fts(tokenizer, DOCS), "陈伟是谁？", tokenizer) == [6]


def test_long_cjk_run_is_split_not_searched_as_one_phrase():
    conn = _fts("unicode61", DOCS)
    # "数据管道问题" never occurs verbatim; its bigrams do.
    assert _hits(conn, "数据管道问题", "unicode61") == [6]
    conn3 = _fts("trigram", DOCS)
    assert _hits(conn3, "数据管道问题", "trigram") == [6]


HOSTILE = [
    '"',
    '""',
    "NEAR(a b, 3)",
    "a* OR b*",
    "-ledger",
    "text:ledger",
    "((unbalanced",
    "unbalanced))",
    "AND OR NOT",
    "^start",
    "{text}: x",
    "'; DROP TABLE t; --",
    "\x00\x01\x02",
    "ledger" * 50_000,
    "a " * 200_000,
    "\U0010ffff\ud7ff",
    "lone \ud800 surrogate \udfff",
]


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_reach_fts_syntax(tokenizer, query):
    conn = _fts(tokenizer, DOCS)
    _hits(conn, query, tokenizer)  # must not raise
    plan = plan_query(query, tokenizer)
    if plan.match:
        assert plan.match.count('"') % 2 == 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(codec=None, exclude_categories=()), max_size=200))
def test_any_string_gives_a_valid_fts_query(query):
    for tokenizer, conn in CONNS.items():
        _hits(conn, query, tokenizer)


CONNS = {t: _fts(t, DOCS) for t in ("unicode61", "trigram")}


def test_a_word_typed_decomposed_stays_one_term():
    # macOS file names, and text pasted from them, hold "ü" as "u" + a combining mark.
    decomposed = unicodedata.normalize("NFD", "Zürich office move")
    assert query_terms(decomposed) == query_terms("Zürich office move") == ["zürich", "office", "move"]
    assert plan_query(decomposed).match == plan_query("Zürich office move").match


LETTERS = ["Keys at Hauptstraße 9 in Łódź.", "The cabin in Tromsø.", "The Ærø ferry; Œuvre gallery; Diyarbakır.",
           "A strasse and a lodz that are plain words."]


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_a_word_typed_without_letters_no_accent_stripping_reaches_is_found(tokenizer):
    # ø, ł, ß, æ, œ, ı do not decompose: the index holds such words folded beside the text.
    conn = _fts(tokenizer, LETTERS)
    for typed, plain, row in (("Tromsø", "tromso", 2), ("Ærø", "aero", 3), ("Œuvre", "oeuvre", 3),
                              ("Diyarbakır", "diyarbakir", 3), ("Hauptstraße", "hauptstrasse", 1)):
        assert _hits(conn, typed, tokenizer) == [row], typed
        assert _hits(conn, plain, tokenizer) == [row], plain
    assert set(_hits(conn, "lodz", tokenizer)) == {1, 4}  # the folded word and the plain one alike
    assert _hits(conn, "Łódź", tokenizer) == [1]  # the letters as written still find only their note
    assert index_text("plain ASCII text", tokenizer) == "plain ASCII text"  # nothing added where nothing folds


SOFT_HYPHENS = ["Booked the Born\u00adholm ferry; the se\u00admi\u00adnar on "
                "in\u00adter\u00adna\u00adtion\u00adal shipping.",
                "Fjord\u2060line and the cab\u200bin", "A plain Bornholm line."]


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_a_word_copied_with_soft_hyphens_or_joiners_is_found_by_its_plain_spelling(tokenizer):
    # A web page's or an e-book's soft hyphens (and joiners) are held by FTS5 as letters of the word.
    conn = _fts(tokenizer, SOFT_HYPHENS)
    assert set(_hits(conn, "Bornholm", tokenizer)) == {1, 3}
    for word in ("seminar", "international", "fjordline", "se\u00admi\u00adnar"):
        assert _hits(conn, word, tokenizer) == [1 if "nar" in word or word == "international" else 2], word
    assert _hits(conn, "cabin", tokenizer) == []  # a zero-width space is a break between words, as before
    assert _hits(conn, "cab", tokenizer) == [2]


CHECKLISTS = ["- 09:41 [ ] renew the passport\n- [x] call the plumber", "* [x] paid the bill\n1. [X] sent the form",
              "A list [ ] inside a line, and [x] too, is no box.", "- [ ] book flights\n- [ ] buy oat milk"]


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_a_question_about_tasks_finds_the_checklist_boxes_it_asks_for(tokenizer):
    assert box_words(CHECKLISTS[0]) == [OPEN_BOX, DONE_BOX] and box_words(CHECKLISTS[2]) == []
    for question, boxes in (("what tasks are still open?", [OPEN_BOX]), ("what's on my to-do list?", [OPEN_BOX]),
                            ("what do I still need to do?", [OPEN_BOX]), ("which tasks did I complete?", [DONE_BOX]),
                            ("which tasks haven't I finished?", [OPEN_BOX]), ("when did I finish the report?", []),
                            ("what did we decide about the ledger?", [])):
        assert task_terms(question) == boxes, question
    conn = _fts(tokenizer, CHECKLISTS)
    assert set(_hits(conn, "what tasks are still open?", tokenizer)) == {1, 4}
    assert _hits(conn, "which tasks did I complete?", tokenizer)[:1] == [2]  # two ticked boxes, one
