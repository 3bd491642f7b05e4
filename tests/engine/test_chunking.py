from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memsift.engine.chunking import chunk_markdown, sha256_text
from memsift.engine.text import utf16_len, weighted_len


def _doc(lines: int, width: int = 60) -> str:
    return "\n".join(f"line {i:03d} " + "x" * (width - 9) for i in range(1, lines + 1))


def test_short_document_is_one_chunk_with_its_line_range():
    text = "# Title\n\nfirst fact\nsecond fact\n"
    chunks = chunk_markdown(text)
    assert len(chunks) == 1
    c = chunks[0]
    assert (c.start_line, c.end_line) == (1, 5)  # the trailing newline yields a final empty line
    assert c.text == text
    assert c.hash == sha256_text(text)


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
    assert chunks[0].text == "a\r\nb\r\n"
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 3)


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
    text = f"# 2026-11-02\n\n## Session A\n{section_a}\n## Session B\n- b0 short\n- b1 short\n## Session C\n- c0 short\n"
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
