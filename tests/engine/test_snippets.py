from __future__ import annotations

import unicodedata

from memsift.engine.search.snippets import make_snippet
from memsift.engine.search.fts_query import index_text
from memsift.engine.text import LETTER_FOLDS, match_form, utf16_len

PAINTING = [
    "the watercolor landscape I started last week is coming along nicely, the sky needs another wash.",
    "I bought a new set of sable brushes and they hold so much more pigment than my old synthetic ones.",
    "the art class on Thursday covered layering techniques with acrylics over a textured gesso base.",
    "my sunflower painting got a lot of compliments at the community gallery opening on Saturday night.",
    "I am thinking about trying oil paints next, although the drying time and the solvents worry me.",
    "the local craft store has a sale on canvas panels so I stocked up on a dozen of the larger sizes.",
    "painting outdoors at the lake this morning was peaceful, the light changed every ten minutes or so.",
]
SESSION = (
    ["# Session 3 — 2023-06-09 19:55 (Caroline & Melanie)"]
    + [f"[D3:{i}] Melanie: {t}" for i, t in enumerate(PAINTING, start=1)]
    + ["[D3:8] Caroline: I finally adopted a rescue greyhound last Tuesday, her name is Pixel."]
    + [
        f"[D3:{i}] Melanie: that sounds lovely, we should meet again next month, I will bring snacks."
        for i in (9, 10, 11)
    ]
)


def test_a_chunk_that_fits_is_shown_whole():
    text = "\n".join(SESSION[:4])
    s = make_snippet(text, 10, ["caroline"])
    assert (s.text, s.start_line, s.end_line) == (text, 10, 13)


def test_the_window_holds_the_evidence_not_the_heading_or_speaker_tags():
    text = "\n".join(SESSION)  # about 1,400 characters: a reference-sized chunk
    s = make_snippet(text, 1, ["caroline", "adopt"])
    assert utf16_len(s.text) <= 700
    assert "adopted a rescue greyhound" in s.text and s.start_line <= 9 <= s.end_line
    assert s.text == "\n".join(SESSION[s.start_line - 1 : s.end_line])


def test_an_over_long_line_is_cut_around_its_densest_terms():
    line = (
        " ".join(["filler words about nothing"] * 60)
        + " the ledger moved to PostgreSQL 16 for the ledger team "
        + "x " * 200
    )
    s = make_snippet(line, 7, ["ledger", "postgresql"])
    assert (s.start_line, s.end_line) == (7, 7) and utf16_len(s.text) <= 700
    assert "ledger moved to PostgreSQL 16" in s.text and not s.text.startswith(("ords", "ds "))


def test_a_term_typed_without_its_accents_picks_the_line_that_has_it_with_them():
    lines = [f"[D9:{i}] Melanie: {t}" for i, t in enumerate(PAINTING, start=1)]
    lines.insert(4, "[D9:0] Caroline: the roofer Jürgen Müller sent his invoice for the gutters today.")
    text = "\n".join(lines)
    for terms in (["muller", "invoice"], ["müller", "invoice"], [unicodedata.normalize("NFD", "müller"), "invoice"]):
        s = make_snippet(text, 1, terms, max_chars=200)
        assert "Müller sent his invoice" in s.text, (terms, s.text)


def test_match_form_folds_latin_accents_in_either_unicode_form_as_the_keyword_index_does():
    import apsw

    text = "Jürgen Müller, Ångström, Việt, crème brûlée, İstanbul, Søren"
    tokenizer = apsw.Connection(":memory:").fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
    indexed = [t if isinstance(t, str) else t[0]
               for t in tokenizer(text.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False)]
    # ø is no accent: the tokenizer keeps it, and the index holds the word folded beside it (index_text)
    assert "søren" in indexed and index_text(text, "unicode61").endswith("\nsoren")
    expected = ["".join(LETTER_FOLDS.get(c, c) for c in t) for t in indexed]
    for form in ("NFC", "NFD"):
        folded = match_form(unicodedata.normalize(form, text))
        assert folded.replace(",", "").split() == expected, folded
    # Other scripts keep their marks, as in the index; CJK and Hangul are untouched.
    assert match_form("Ёлка が 한국어") == "ёлка が 한국어"
    assert match_form(unicodedata.normalize("NFD", "Ёлка が 한국어")) == "ёлка が 한국어"


def test_a_question_about_tasks_shows_the_lines_with_the_boxes_it_asks_for():
    from memsift.engine.search.fts_query import DONE_BOX, OPEN_BOX

    lines = [f"- 0{i % 10}:00 met someone about topic number {i} and talked for a long while" for i in range(12)]
    text = "\n".join([*lines[:6], "- [x] paid the electricity bill", *lines[6:], "- [ ] renew the passport",
                      *lines[:4]])
    assert "renew the passport" in make_snippet(text, 1, ["tasks", OPEN_BOX], max_chars=300).text
    assert "paid the electricity bill" in make_snippet(text, 1, ["tasks", DONE_BOX], max_chars=300).text
    assert "passport" not in make_snippet(text, 1, ["tasks"], max_chars=300).text  # what it showed before
