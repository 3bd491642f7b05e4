"""Bounded lexical query expansion (engine/search/expansion.py, the packaged WordNet lexicon):
which words a question gains, the caps, and on real keyword indexes (builtin and Postgres) that an
expansion finds a note the question's own words miss, scored below the words themselves."""

from __future__ import annotations

import anyio
import pytest

from helpers import backend_memory, make_settings
from memsift.engine.compose.factory import open_manager
from memsift.engine.search.expansion import (EXPANSION_WEIGHT, MAX_PER_QUERY, MAX_PER_TERM, expand_terms,
                                             keyword_scores, lexicon)
from memsift.engine.search.fts_query import plan_query
from memsift.engine.search.stopwords import STOP_WORDS


def test_the_lexicon_knows_irregular_forms_both_ways_and_a_verbs_words():
    lex = lexicon()
    assert lex.lemma["bought"] == "buy" and lex.lemma["went"] == "go" and lex.lemma["mice"] == "mouse"
    assert {"chose", "chosen"} <= set(lex.forms["choose"])
    assert "choose" in lex.synonyms["pick"] and "purchase" in lex.synonyms["buy"]
    assert "ledger" not in lex.synonyms and "book" not in lex.synonyms  # nouns get no synonyms
    assert "stemmed" not in lex.forms.get("stem", ())  # Porter already folds regular forms


def test_the_lexicon_joins_the_words_of_a_root_the_stemmer_keeps_apart():
    lex = lexicon()
    assert "plumber" in lex.related["plumbing"] and {"plumb", "plumbing"} <= set(lex.related["plumber"])
    assert "teach" in lex.related["teacher"] and "teacher" in lex.related["teaching"]
    assert "music" in lex.related["musician"] and "painter" in lex.related["painting"]
    # An -er word that names no person is no agent of anything: corner is not of corn, nor number of numb.
    assert "corn" not in lex.related.get("corner", ()) and "numb" not in lex.related.get("number", ())
    assert "plumber" in expand_terms(["plumbing"], synonyms=False)


def test_the_packaged_lexicon_is_sorted_by_word_as_its_lookups_by_bisection_need():
    from pathlib import Path

    import memsift.engine.search.expansion as expansion

    lines = (Path(expansion.__file__).parent / "data" / "lexicon.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) > 5000 and all(a < b for a, b in zip(lines, lines[1:]))
    assert all(line.count("\t") == 4 for line in lines)
    # Bisection over the text finds every word, the first and the last, and nothing between them.
    lex = lexicon()
    words = [line.split("\t", 1)[0] for line in lines]
    assert all(w in lex.lemma or w in lex.forms or w in lex.synonyms or w in lex.related for w in words[::97])
    assert words[0] in lex.related or words[0] in lex.lemma or words[0] in lex.forms
    assert "zzzz" not in lex.lemma and "" not in lex.lemma and "a\tb" not in lex.lemma
    assert expansion._row("".join(f"{w}\t\t\t\t\n" for w in ["ab", "b", "ba"]), "b") == "b\t\t\t\t"


@pytest.mark.parametrize("question, gains, never", [
    ("which database did we pick for the ledger?", {"choose", "chose"}, {"book"}),
    ("What did I buy for my sister?", {"bought", "purchase"}, set()),
    ("where did we go last summer", {"went"}, {"endure", "spend"}),  # "last" is no verb here
    ("N-terminal cleavage reduces success identifying transcription start sites.", set(), {"begin", "began"}),
    ("how many mice in the study", {"mouse"}, set()),
])
def test_a_question_gains_other_forms_and_only_its_verbs_gain_synonyms(question, gains, never):
    got = set(plan_query(question, expansion="synonyms").expansions)
    assert gains <= got and not (never & got), got


def test_expansion_is_bounded_and_leaves_stop_words_cjk_and_identifiers_alone():
    terms = ["go", "buy", "choose", "say", "start", "read", "pick", "decide", "reduce"]
    out = expand_terms(terms)
    assert len(out) <= MAX_PER_QUERY and not set(out) & set(terms) and not set(out) & STOP_WORDS
    assert all(len([w for w in expand_terms([t]) if w]) <= MAX_PER_TERM for t in terms)
    assert plan_query("数据管道 payments/ledger", expansion="synonyms").expansions == []
    assert plan_query("which database did we pick", expansion="off").expansions == []
    # pick is regular: no irregular form, no synonym, only the word of its root ("picker")
    assert plan_query("which database did we pick", expansion="inflections").expansions == ["picker"]


def test_expansions_stand_in_for_the_questions_words_when_those_weigh_nothing():
    # FTS5 gives a word in half the chunks or more an IDF of 1e-6: its hits rank about -1e-6.
    common = [("projects", -2e-6), ("decisions", -1e-6)]
    chose = [("decisions", -1.8)]
    alone = dict((k, s) for k, s, _ in keyword_scores(common, chose))
    assert alone["decisions"] == pytest.approx(1.8 / 2.8, abs=1e-4) and alone["projects"] < 1e-5
    # Real evidence of the question's own words: the expansion adds a tenth of its score, as before.
    weighed = dict((k, s) for k, s, _ in keyword_scores([("projects", -1.7), ("decisions", -0.9)], chose))
    assert weighed["decisions"] == pytest.approx(0.9 / 1.7 * 1.7 / 2.7 + EXPANSION_WEIGHT * 1.8 / 2.8, abs=1e-4)
    assert dict((k, s) for k, s, _ in keyword_scores([], chose))["decisions"] == pytest.approx(1.8 / 2.8, abs=1e-4)


NOTES = {"2026-01-01": "We chose Postgres for the invoices.", "2026-01-02": "We pick Kafka, for the events.",
         "2026-01-03": "Lunch with Priya; the invoices are late again."}


@pytest.mark.parametrize("backend", ["builtin", "postgres", "lancedb", "qdrant"])
def test_an_expansion_finds_a_note_below_the_questions_own_word(tmp_path, backend):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for day, line in NOTES.items():
        (ws / "memory" / f"{day}.md").write_text(f"# {day}\n\n- {line}\n")
    memory = backend_memory(backend)

    async def search(expansion: str):
        settings = make_settings(
            tmp_path / expansion, ws, {"provider": "none", "query": {"expansion": expansion}}, memory=memory
        )
        manager = open_manager(settings)
        try:
            return await manager.search("what did we pick", explain=True, min_score=0.0)
        finally:
            await manager.aclose()

    on = {h.path: h.explain.keyword_score for h in anyio.run(search, "synonyms").results}
    off = {h.path: h.explain.keyword_score for h in anyio.run(search, "off").results}
    chose, picked = "memory/2026-01-01.md", "memory/2026-01-02.md"
    assert chose not in off and picked in off
    assert 0 < on[chose] <= EXPANSION_WEIGHT < on[picked]


@pytest.mark.parametrize("backend", ["builtin", "postgres", "lancedb", "qdrant"])
def test_a_word_of_the_same_root_finds_the_note_the_stemmer_misses(tmp_path, backend):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-10.md").write_text("# 2026-11-10\n\n- The plumber came to fix the sink. Invoice 185.\n")
    (ws / "memory" / "2026-11-12.md").write_text("# 2026-11-12\n\n- Reviewed the travel budget with Anna.\n")
    (ws / "memory" / "2026-11-14.md").write_text("# 2026-11-14\n\n- Booked the dentist for Lena.\n")
    settings = make_settings(tmp_path, ws, {"provider": "none"}, memory=backend_memory(backend))

    async def search():
        manager = open_manager(settings)
        try:
            return await manager.search("how much was the plumbing?", explain=True, min_score=0.0)
        finally:
            await manager.aclose()

    hits = anyio.run(search).results
    assert [h.path for h in hits] == ["memory/2026-11-10.md"]
    # No word of the question is in a note: "plumber" stands in for "plumbing" with its whole score.
    assert EXPANSION_WEIGHT < hits[0].explain.keyword_score <= 1
