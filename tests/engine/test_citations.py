from __future__ import annotations

import pytest

from memsift.engine.search.citations import chat_type_for_citations, citation_for, citations_enabled, decorate_snippet


def test_citation_format():
    assert citation_for("memory/2026-11-02.md", 5, 7) == "memory/2026-11-02.md#L5-L7"
    assert citation_for("MEMORY.md", 3, 3) == "MEMORY.md#L3"
    assert decorate_snippet("  some text \n", "MEMORY.md#L3") == "some text\n\nSource: MEMORY.md#L3"


@pytest.mark.parametrize(
    "mode,key,on",
    [
        ("on", "agent:main:discord:group:1", True),
        ("off", None, False),
        ("auto", None, True),  # no key: a local caller, direct
        ("auto", "agent:main:telegram:direct:7", True),
        ("auto", "agent:main:discord:group:1", False),
        ("auto", "agent:main:slack:channel:C1", False),
        ("auto", "agent:main:slack:group:channel:C1", False),
    ],
)
def test_citation_modes(mode, key, on):
    assert citations_enabled(mode, key) is on


def test_citation_chat_type_checks_channel_before_group():
    assert chat_type_for_citations("agent:main:x:group:channel:1") == "channel"
    assert chat_type_for_citations("   ") == "direct"


def test_a_line_number_of_thousands_of_digits_is_not_a_range():
    from memsift.engine.search.citations import parse_memory_ref

    assert parse_memory_ref("memory/2026-11-05.md#L5-L8") == ("memory/2026-11-05.md", 5, 4)
    huge = "9" * 5000  # int() refuses over 4,300 digits: this raised ValueError (a traceback in `get`)
    for ref in (f"MEMORY.md#L{huge}", f"MEMORY.md:{huge}", f"MEMORY.md:1-{huge}"):
        path, start, lines = parse_memory_ref(ref)
        assert start is None and lines is None and path == ref  # a plain path, refused as not a .md file
