"""Hostile queries: arbitrary Unicode, FTS5 syntax, control characters, lone surrogates, 1 MB
strings, empty and whitespace. Every one gets an answer (possibly empty) or a clear error: never a
crash, never an SQL error surfacing as `degraded.fts`.

Runs against the builtin manager (FTS-only, FTS-only with the trigram tokenizer, and hybrid with
the fake embedding provider) and against the query planner directly on a real FTS5 table.
"""

from __future__ import annotations

import json
import subprocess
import sys

import apsw
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import anyio.from_thread
from figures import FIGURES
from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.store import fts_tokenizer_clause
from memsift.engine.embeddings import ProviderSelection
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.search.fts_query import index_text, plan_query

NOTES = {
    "MEMORY.md": "# Memory\n\n- the user drinks dark roast coffee with oat milk\n- path: notes/deploy.md NEAR the "
                 "end\n",
    "memory/2026-01-02.md": "- 与陈伟开会，讨论数据管道的延迟问题。\n- 東京で会議 🎉 emoji note\n",
    "memory/ops.md": '- deploy AND rollback OR NOT "quoted" * ^ (parens) memorySearch.query.hybrid a828e60\n',
    "memory/rtl.md": "- مرحبا بالعالم \u200f right-to-left mark \u202e override\n",
}

# FTS5 query-syntax fragments, SQL fragments and odd characters, mixed with arbitrary text.
FRAGMENTS = [
    "NEAR", "NEAR(", "NEAR(a b, 2)", "AND", "OR", "NOT", "and", '"', '""', "'", "*", "^", "-", "+",
    "path:", "text:", "{text}:", "(", ")", "()", ":", "col:term", "a*", "^start", '"unterminated',
    "'; DROP TABLE chunks; --", "%", "_", "\\", "\x00", "\x1b[31m", "\r\n", "\t", "\u200f", "\u202e",
    "\ufeff", "\ud800", "\udfff", "\U0001f600", "数据", "東京", "한국어", "𠀀", "a828e60",
    "memorySearch.query.hybrid", "MATCH", "rank", "bm25(", "ORDER BY", "LIMIT 1", "?", "?1", ":name",
]
hostile_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)
hostile_query = st.one_of(
    hostile_text,
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), hostile_text), max_size=12).map(" ".join),
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=30).map("".join),
)
HUGE = ("coffee " * 150_000)[: 1 << 20]  # 1 MB
SPECIAL = [
    "",
    " ",
    "\t\n\r ",
    "\u3000\u00a0",
    "\x00",
    "\x00" * 1000,
    HUGE,
    "\ud800" * 1000,
    '"' * 5000,
    "(" * 5000,
    "NEAR(" * 2000,
]

MANAGERS = ("fts-only", "fts-only-trigram", "hybrid-fake")


@pytest.fixture(scope="module")
def portal():
    with anyio.from_thread.start_blocking_portal() as p:
        yield p


@pytest.fixture(scope="module")
def managers(tmp_path_factory, portal):
    ws = tmp_path_factory.mktemp("ws")
    for rel, text in NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    quiet = {"sync": {"onSearch": False, "onSessionStart": False}}
    out = {}
    for name in MANAGERS:
        ms = dict(quiet, store={"fts": {"tokenizer": "trigram" if "trigram" in name else "unicode61"}})
        s = make_settings(tmp_path_factory.mktemp(name), ws, ms)
        if name.startswith("hybrid"):
            m = BuiltinSearchManager(s, provider=FakeEmbeddingProvider())
        else:
            m = BuiltinSearchManager(s, selection=ProviderSelection(None, "auto", unavailable_reason="none in tests"))
        portal.call(m.sync)
        out[name] = m
    yield out
    for m in out.values():
        portal.call(m.aclose)


def _check_answer(portal, m: BuiltinSearchManager, name: str, query: str) -> None:
    answer = portal.call(lambda: m.search(query, min_score=0))
    FIGURES["queries fuzzed"] += 1
    assert answer.degraded.fts is None, (name, query[:200], answer.degraded.fts)
    assert answer.degraded.vector is None or name.startswith("fts-only"), answer.degraded.vector
    assert answer.mode in ("hybrid", "fts-only", "vector-only", "none")
    assert all(h.path in NOTES for h in answer.results)
    assert all(0.0 <= h.score <= 1.0 for h in answer.results)
    # The answer is valid JSON, and writable as UTF-8 (what the CLI and MCP print).
    json.dumps(answer.to_json_dict(), ensure_ascii=False).encode("utf-8", errors="surrogateescape")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=hostile_query)
@example(query="")
@example(query="coffee")
def test_builtin_manager_answers_any_query(managers, portal, query):
    for name, m in managers.items():
        _check_answer(portal, m, name, query)


@pytest.mark.parametrize("query", SPECIAL, ids=lambda q: f"{len(q)}-chars-{q[:6]!r}")
def test_special_queries(managers, portal, query):
    for name, m in managers.items():
        _check_answer(portal, m, name, query)
    if not query.strip(" \t\n\r\u3000\u00a0\x00"):  # nothing searchable: an empty answer, said so
        answer = portal.call(lambda: managers["hybrid-fake"].search(query))
        assert answer.results == [] and answer.mode == "none"


def test_a_huge_query_still_finds_its_note(managers, portal):
    answer = portal.call(lambda: managers["hybrid-fake"].search(HUGE, min_score=0))
    assert answer.results and answer.results[0].path == "MEMORY.md"


def _fts(tokenizer: str) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{fts_tokenizer_clause(tokenizer)}')")
    for text in NOTES.values():
        conn.execute("INSERT INTO t(text) VALUES (?)", (index_text(text, tokenizer),))
    return conn


CONNS = {t: _fts(t) for t in ("unicode61", "trigram")}


@settings(max_examples=500, deadline=None)
@given(query=hostile_query)
def test_planner_output_is_always_valid_fts5(query):
    for tokenizer, conn in CONNS.items():
        plan = plan_query(query, tokenizer)
        FIGURES["queries fuzzed"] += 1
        if plan.match:
            assert "\x00" not in plan.match
            conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank", (plan.match,)).fetchall()


@pytest.mark.parametrize(
    "query", [b"caf\xff\xfe coffee", b"\xed\xa0\x80", b"coffee \x1b[2J\x07", b'NEAR("a" *) path:x']
)
def test_cli_search_with_undecodable_and_control_bytes(tmp_path, query):
    """argv is bytes: non-UTF-8 arrives as lone surrogates, which must not crash the output."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(NOTES["MEMORY.md"])
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "search", *extra, query],
            capture_output=True, timeout=120,
        )
        FIGURES["queries fuzzed"] += 1
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
        assert b"Traceback" not in proc.stderr
        if extra:
            json.loads(proc.stdout)
