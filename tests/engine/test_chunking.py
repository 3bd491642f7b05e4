from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memsift.engine.files.chunking import EVIDENCE_TOKENS, chunk_evidence, chunk_markdown, sha256_text
from memsift.engine.search.snippets import SNIPPET_MAX_CHARS
from memsift.engine.text import utf16_len, weighted_len


def _doc(lines: int, width: int = 60) -> str:
    return "\n".join(f"line {i:03d} " + "x" * (width - 9) for i in range(1, lines + 1))


def test_short_document_is_one_chunk_with_its_line_range():
    text = "# Title\n\nfirst fact\nsecond fact\n"
    chunks = chunk_markdown(text)
    assert len(chunks) == 1
    c = chunks[0]
    # A final newline ends line 4; it opens no line 5 (which `memsift get` would refuse as past the end).
    assert (c.start_line, c.end_line) == (1, 4)
    assert c.text == text.rstrip("\n")
    assert c.hash == sha256_text(c.text)


def test_chunks_keep_exact_line_ranges_and_overlap():
    text = _doc(200)
    lines = text.split("\n")
    chunks = chunk_markdown(text, tokens=100, overlap=20)  # 400 chars budget, 80 chars overlap
    assert len(chunks) > 10
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
        assert utf16_len(c.text) <= 400
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.start_line <= prev.end_line  # overlap carried
        assert nxt.start_line > prev.start_line  # but progress is made
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 200


def test_no_overlap_means_adjacent_chunks():
    chunks = chunk_markdown(_doc(100), tokens=100, overlap=0)
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.start_line == prev.end_line + 1


def test_overlap_is_capped_at_half_the_budget():
    # overlap 99 of 100 tokens would carry almost the whole chunk; the later revision caps it.
    chunks = chunk_markdown(_doc(100), tokens=100, overlap=99)
    for prev, nxt in zip(chunks, chunks[1:]):
        carried = prev.end_line - nxt.start_line + 1
        assert carried * 61 <= 200 + 61  # ≤ half of 400 chars, plus the one segment that crosses it
    assert all(utf16_len(c.text) <= 400 for c in chunks)


def test_long_line_is_sliced_and_keeps_its_line_number():
    text = "intro\n" + "a" * 1000 + "\noutro"
    chunks = chunk_markdown(text, tokens=100, overlap=0)
    assert all(utf16_len(c.text) <= 400 for c in chunks)
    assert "".join(c.text for c in chunks if c.start_line == c.end_line == 2).count("a") == 1000 - sum(
        c.text.count("a") for c in chunks if c.start_line != c.end_line
    )


def test_cjk_is_weighted_so_chunks_hold_fewer_characters():
    cjk = "数据管道延迟会议记录" * 100  # 1000 CJK characters on one line
    chunks = chunk_markdown(cjk, tokens=100, overlap=0)
    assert all(weighted_len(c.text) <= 400 for c in chunks)
    assert "".join(c.text for c in chunks) == cjk
    assert len(chunks) >= 10  # 1000 chars × 4 weight / 400 budget


def test_surrogate_pairs_are_never_split():
    ext_b = "\U00020000\U0002A6D6😀"  # two Ext-B ideographs and an emoji: one UTF-16 pair each
    text = ext_b * 200
    for tokens in (1, 3, 7, 100):
        chunks = chunk_markdown(text, tokens=tokens, overlap=0)
        # Pieces of one long line are joined with "\n" inside a chunk (as the reference does).
        assert "".join(c.text.replace("\n", "") for c in chunks) == text
        for c in chunks:
            c.text.encode("utf-16-le")  # a lone surrogate would raise here


def test_empty_and_whitespace_documents_yield_no_chunks():
    assert chunk_markdown("") == []
    assert chunk_markdown("\n\n   \n\t\n") == []


def test_crlf_stays_in_line_text():
    chunks = chunk_markdown("a\r\nb\r\n")
    assert chunks[0].text == "a\r\nb\r"
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=40), st.integers(1, 200), st.integers(0, 250))
def test_every_nonblank_line_is_covered_by_a_chunk(lines, tokens, overlap):
    text = "\n".join(lines)
    chunks = chunk_markdown(text, tokens=tokens, overlap=overlap)
    max_chars = max(32, 4 * tokens)
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(text.split("\n"))
        assert utf16_len(c.text) <= max_chars
        assert c.text.strip()
    for i, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            assert any(c.start_line <= i <= c.end_line for c in chunks)


def test_a_heading_after_a_substantial_section_starts_a_new_chunk_without_overlap():
    section_a = "\n".join(f"- a{i} " + "alpha words " * 4 for i in range(12))
    text = (
        f"# 2026-11-02\n\n## Session A\n{section_a}\n## Session B\n- b0 short\n- b1 short\n## Session C\n- c0 short\n"
    )
    lines = text.split("\n")
    chunks = chunk_markdown(text, tokens=100, overlap=20)
    b = lines.index("## Session B") + 1
    starting_at_b = [c for c in chunks if c.start_line == b]
    assert starting_at_b, "Session B starts a chunk"
    # No chunk mixes Session A's lines with Session B's: the overlap is not carried over a heading.
    assert not any(c.start_line < b <= c.end_line for c in chunks)
    # Short sections share a chunk: B (two short lines) and C are one chunk.
    assert starting_at_b[0].end_line >= lines.index("- c0 short") + 1


def test_headings_inside_code_fences_do_not_split():
    body = "\n".join(f"step {i} " + "words " * 8 for i in range(10))
    text = f"## Setup\n{body}\n```bash\n# install the tools\npip install x\n```\nmore text\n"
    chunks = chunk_markdown(text, tokens=400, overlap=80)
    assert len(chunks) == 1


def test_a_long_line_is_cut_between_words_not_inside_one():
    words = " ".join(f"w{i:04d}" for i in range(600))  # 3,599 characters on one line
    chunks = chunk_markdown("intro\n" + words + "\n", tokens=100, overlap=0)
    pieces = [c.text.split("\n")[0] for c in chunks if c.start_line == 2]  # the last one also holds empty line 3
    assert len(pieces) >= 9 and "".join(pieces) == words
    for piece in pieces[:-1]:
        assert piece.endswith(" ") and utf16_len(piece) <= 400  # every cut falls after a space
    cjk = "数据管道的延迟问题，我们下周讨论。" * 60
    for c in chunk_markdown(cjk, tokens=100, overlap=0)[:-1]:
        assert c.text[-1] in "，。"  # cut after a clause mark


# --- the evidence chunker (the default): a chunk is what a hit shows ---------------------------


def _chat(turns: int) -> str:
    lines = ["# Session 3 — 2023-06-09 19:55 (Caroline & Melanie)"]
    lines += [
        f"[D3:{i}] {'Caroline' if i % 2 else 'Melanie'}: message {i} " + "about painting " * 6
        for i in range(1, turns + 1)
    ]
    return "\n".join(lines) + "\n"


def test_evidence_chunks_fit_the_snippet_and_keep_whole_lines():
    assert EVIDENCE_TOKENS * 4 == SNIPPET_MAX_CHARS
    text = _chat(40)
    lines = text.split("\n")
    chunks = chunk_evidence(text, tokens=EVIDENCE_TOKENS)
    assert len(chunks) > 5
    for c in chunks:
        assert utf16_len(c.text) <= SNIPPET_MAX_CHARS  # shown whole
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])  # whole lines, exact range
    for a, b in zip(chunks, chunks[1:]):
        assert b.start_line == a.end_line + 1  # no overlap: no two hits show the same line


def test_a_short_line_stays_with_the_long_answer_after_it():
    question = "user: which hotel did we book in Lisbon?"
    answer = "assistant: " + "the hotel near the river with a view of the bridge " * 30  # 1,500+ characters
    text = "\n".join(["filler line " * 10] * 4 + [question, answer])
    chunks = chunk_evidence(text, tokens=EVIDENCE_TOKENS)
    holder = next(c for c in chunks if question in c.text)
    assert holder.text.startswith(question) and "assistant: the hotel" in holder.text
    pieces = [c for c in chunks if c.end_line == 6]
    assert "".join(c.text.split("\n")[-1] for c in pieces) == answer  # cut into pieces, nothing lost
    sizes = [utf16_len(c.text) for c in pieces[1:]]
    assert max(sizes) - min(sizes) < 100  # balanced: no tiny tail


def test_evidence_chunker_keeps_sections_apart():
    section = "\n".join(f"- note {i} " + "words " * 12 for i in range(4))
    text = f"# One\n{section}\n# Two\n{section}\n"
    chunks = chunk_evidence(text, tokens=EVIDENCE_TOKENS)
    assert any(c.text.startswith("# Two") for c in chunks)
    assert not any("# One" in c.text and "# Two" in c.text for c in chunks)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=900), max_size=40), st.integers(1, 300))
def test_evidence_chunks_cover_every_line_within_budget(lines, tokens):
    text = "\n".join(lines)
    chunks = chunk_evidence(text, tokens=tokens)
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(text.split("\n"))
        assert weighted_len(c.text) <= max(32, 4 * tokens)
    for i, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            assert any(c.start_line <= i <= c.end_line for c in chunks)


def test_no_chunk_ends_past_the_last_line_of_its_file():
    for text in ("- one\n- two\n- three\n- four\n- five\n", "- one\n- two", "a\n\n\n", "x" * 3000 + "\n", "\n"):
        total = text.count("\n") + (0 if text.endswith("\n") else 1)
        for chunks in (chunk_markdown(text), chunk_evidence(text), chunk_markdown(text, tokens=8, overlap=2)):
            assert all(1 <= c.start_line <= c.end_line <= total for c in chunks), (
                text[:20],
                [(c.start_line, c.end_line) for c in chunks],
            )
