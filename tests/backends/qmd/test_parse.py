from __future__ import annotations

import pytest

from helpers import QMD_SAMPLES
from memsift.backends.qmd.parse import parse_file_uri, parse_search_output, parse_snippet, parse_status, parse_version
from memsift.backends.qmd.process import QmdOutputError

SAMPLES = QMD_SAMPLES


def _sample(name: str) -> tuple[str, str]:
    return (SAMPLES / f"{name}.stdout").read_text(), (SAMPLES / f"{name}.stderr").read_text()


def test_search_json_with_line_ranges_from_the_header():
    hits = parse_search_output(*_sample("10-search-json"))
    assert [(h.collection, h.path, h.start_line, h.end_line, h.score, h.docid) for h in hits] == [
        ("notes", "memory/2026-02-10.md", 4, 7, 0.69, "f4fde2"),
        ("notes", "projects/aurora.md", 10, 13, 0.68, "0bcd49"),
    ]
    assert hits[0].snippet.startswith("Met with Dana") and "@@" not in hits[0].snippet


@pytest.mark.parametrize(
    "name", ["16-search-no-results", "17-search-no-results-cli", "42-vsearch-no-vectors", "72-search-empty-index"]
)
def test_no_results_in_every_form(name):
    assert parse_search_output(*_sample(name)) == []


def test_named_index_suffix_and_cjk():
    hit = parse_search_output(*_sample("69-named-index-search"))[0]
    assert (hit.collection, hit.path) == ("proj", "aurora.md")
    hit = parse_search_output(*_sample("20-search-chinese"))[0]
    assert hit.path == "chinese-notes.md" and "向量数据库" in hit.snippet


def test_noise_around_the_json_and_brackets_inside_strings():
    out = ('Warning: [gpu] falling back to CPU\n'
           '[{"docid": "#abc123", "score": 0.5, "file": "qmd://c/a%20b.md", "snippet": "@@ -2,1 @@\\nsee [link] ]"}]\n'
           'Done [ok]\n')
    hit = parse_search_output(out)[0]
    assert hit.path == "a%20b.md"  # as printed: the manager matches it on disk (spelled_on_disk)
    assert hit.snippet == "see [link] ]" and (hit.start_line, hit.end_line) == (2, 2)


@pytest.mark.parametrize(
    "stdout,stderr",
    [("", ""), ("", "Collection not found: nosuch"), ("Segmentation fault {", ""), ('{"not": "an array"}', "")],
)
def test_unparseable_output_is_an_error(stdout, stderr):
    with pytest.raises(QmdOutputError):
        parse_search_output(stdout, stderr)


def test_no_results_marker_variants():
    assert parse_search_output("", "[qmd] warn: No results found for query") == []
    assert parse_search_output("\x1b[?25lNo results found.\x1b[?25h\n") == []


def test_fields_and_fallbacks():
    out = (
        '[{"score": "high", "file": "qmd://c/x.md", "line": 7}, '
        '{"score": 0.3, "file": "qmd://c/y.md", "start_line": 9, "end_line": 4}, 5]'
    )
    a, b = parse_search_output(out)
    assert a.score == 0.0 and (a.start_line, a.end_line) == (7, 7)
    assert (b.start_line, b.end_line) == (4, 9)  # reversed ranges are swapped


def test_helpers():
    assert parse_file_uri("qmd://notes/memory/2026-02-10.md?index=mem") == ("notes", "memory/2026-02-10.md")
    assert parse_snippet("@@ -4,4 @@ (3 before, 3 after)\nabc") == (4, 7, "abc")
    assert parse_snippet("no header") == (None, None, "no header")
    assert parse_version(_sample("00-version")[0]) == "2.8.3"
    st = parse_status(_sample("09-status-with-collection")[0])
    assert st["documents"] == 10 and st["vectors"] == 0 and st["pending"] == 10
