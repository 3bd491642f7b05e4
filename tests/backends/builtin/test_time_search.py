"""Time in search on the builtin backend: since/until filters, times named in questions, decay."""

from __future__ import annotations

import os
from datetime import datetime

import anyio
import pytest

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.embeddings import ProviderSelection
from memsift.engine.embeddings.fake import FakeEmbeddingProvider

NOW = datetime(2023, 4, 18, 9, 0).timestamp()  # a Tuesday
SAME = "Decided to ship the billing export with the ledger team.\n"


def run(fn, *args, **kw):
    return anyio.run(lambda: fn(*args, **kw))


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- The ledger team owns billing.\n")
    # The same decision on three days; nothing but the date tells them apart.
    (ws / "memory" / "2023-03-02.md").write_text(f"# 2023-03-02\n{SAME}")
    (ws / "memory" / "2023-04-11.md").write_text(f"# 2023-04-11\n{SAME}")
    (ws / "memory" / "journal.md").write_text(f"# Journal\n## 2023-04-14 retro\n{SAME}")
    undated = ws / "memory" / "ideas.md"
    undated.write_text(SAME)
    stamp = datetime(2023, 1, 20, 12, 0).timestamp()
    os.utime(undated, (stamp, stamp))  # an undated note is judged by when it was last changed
    return ws


def _manager(tmp_path, ws, ms=None, *, keyword_only=True):
    settings = make_settings(tmp_path, ws, ms or ({"provider": "none"} if keyword_only else {}))
    if keyword_only:
        m = BuiltinSearchManager(settings, selection=ProviderSelection(None, "none", unavailable_reason="test"))
    else:
        m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    run(m.sync)
    return m


def _paths(answer):
    return [h.path for h in answer.results]


@pytest.mark.parametrize("keyword_only", [True, False])
def test_since_and_until_keep_only_hits_of_those_days(tmp_path, workspace, keyword_only):
    m = _manager(tmp_path, workspace, keyword_only=keyword_only)
    answer = run(m.search, "billing export", min_score=0, since="2023-04-01", until="2023-04-12", now=NOW)
    assert _paths(answer) == ["memory/2023-04-11.md"]
    assert answer.time_filter == "2023-04-01..2023-04-12 ('2023-04-01..2023-04-12')"
    answer = run(m.search, "billing export", min_score=0, until="2023-02-01", now=NOW)
    assert _paths(answer) == ["memory/ideas.md"]  # undated: its modification day (2023-01-20)
    answer = run(m.search, "billing export", min_score=0, since="last week", now=NOW)  # Monday 10 April on
    # MEMORY.md states no day and was changed today: it is in an open-ended range.
    assert sorted(_paths(answer)) == ["MEMORY.md", "memory/2023-04-11.md", "memory/journal.md"]
    m._close_reader()


def test_a_bad_filter_is_a_clear_error_before_searching(tmp_path, workspace):
    m = _manager(tmp_path, workspace)
    with pytest.raises(ValueError, match="since 'soon' is not a date"):
        run(m.search, "billing", since="soon")
    m._close_reader()


@pytest.mark.parametrize("keyword_only", [True, False])
def test_a_time_named_in_the_question_favours_notes_of_that_time(tmp_path, workspace, keyword_only):
    m = _manager(tmp_path, workspace, keyword_only=keyword_only)
    plain = run(m.search, "what did we decide about the billing export", min_score=0, now=NOW)
    timed = run(
        m.search, "what did we decide about the billing export last Tuesday", min_score=0, now=NOW, explain=True
    )
    assert plain.time_windows is None
    assert timed.time_windows == ["2023-04-11 ('last Tuesday')"]
    assert _paths(timed)[0] == "memory/2023-04-11.md"
    top = timed.results[0].explain
    assert (top.day, top.day_source, top.time_factor) == ("2023-04-11", "heading", 1.0)
    journal = next(h for h in timed.results if h.path == "memory/journal.md").explain
    assert journal.day == "2023-04-14" and journal.time_factor < 1.0  # three days off: a smaller share kept
    m._close_reader()


def test_time_windows_can_be_turned_off(tmp_path, workspace):
    m = _manager(tmp_path, workspace, {"provider": "none", "query": {"time": {"enabled": False}}})
    answer = run(m.search, "billing export last Tuesday", min_score=0, now=NOW, explain=True)
    assert answer.time_windows is None
    assert all(h.explain.time_factor == 1.0 for h in answer.results)
    m._close_reader()


def test_bounded_decay_orders_by_recency_without_pushing_to_zero(tmp_path, workspace):
    ms = {"provider": "none", "query": {"hybrid": {"temporalDecay": {"enabled": True}}}}
    m = _manager(tmp_path, workspace, ms)
    answer = run(m.search, "billing export", min_score=0, now=datetime(2024, 6, 1).timestamp(), explain=True)
    decay = {h.path: h.explain.decay for h in answer.results}
    same_text = [h.path for h in answer.results if h.path in ("memory/2023-03-02.md", "memory/2023-04-11.md")]
    assert same_text == ["memory/2023-04-11.md", "memory/2023-03-02.md"]  # equal evidence: the newer first
    assert decay["memory/journal.md"] == 1.0  # the newest hit is the anchor, though a year before "now"
    assert decay["MEMORY.md"] == decay["memory/ideas.md"] == 1.0  # evergreen: undated notes are judged on content
    assert decay["memory/journal.md"] > decay["memory/2023-04-11.md"] > decay["memory/2023-03-02.md"]
    assert min(decay.values()) >= 0.9  # weight 0.1: never more than a tenth off
    m._close_reader()


def test_the_reference_decay_formula_stays_selectable(tmp_path, workspace):
    ms = {"provider": "none", "query": {"hybrid": {"temporalDecay": {"enabled": True, "formula": "reference"}}}}
    m = _manager(tmp_path, workspace, ms)
    answer = run(
        m.search, "billing export", min_score=0, now=datetime(2023, 4, 11).timestamp() + 30 * 86400, explain=True
    )
    by_path = {h.path: h.explain.decay for h in answer.results}
    assert by_path["memory/2023-04-11.md"] == pytest.approx(0.5, abs=0.01)  # 30 days, half-life 30
    assert by_path["memory/2023-03-02.md"] == pytest.approx(0.5 ** (70 / 30), abs=0.01)
    assert (
        by_path["memory/journal.md"] == 1.0
    )  # reference: an undated file under memory/ is evergreen (headings unread)
    m._close_reader()


def test_a_time_no_note_can_match_leaves_scores_as_they_were(tmp_path):
    ws = tmp_path / "undated"
    (ws / "docs").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(
        "# Facts\n- Pneumonia cases in young children worldwide were estimated at 30 million.\n"
    )
    (ws / "docs" / "b.md").write_text("Pneumonia in children: incidence and mortality estimates.\n")
    q = "pneumonia cases in young children worldwide in 2010"
    off = _manager(
        tmp_path / "off", ws, {"provider": "none", "extraPaths": ["docs"], "query": {"time": {"enabled": False}}}
    )
    plain = run(off.search, q, now=NOW)
    topic = run(off.search, "pneumonia cases in young children worldwide", now=NOW)  # the time's words are no topic
    off._close_reader()
    m = _manager(tmp_path, ws, {"provider": "none", "extraPaths": ["docs"]})
    timed = run(m.search, q, now=NOW)
    assert timed.time_windows == ["2010-01-01..2010-12-31 ('in 2010')"] and plain.time_windows is None
    assert [(h.path, h.score) for h in timed.results] == [(h.path, h.score) for h in topic.results] != []
    assert [h.path for h in timed.results] == [h.path for h in plain.results]
    m._close_reader()


def test_an_index_from_before_days_per_line_is_upgraded_and_rebuilt_once(tmp_path, workspace):
    """An index of schema 3 (one day per chunk, note dates revision 1) gains chunk_days, and the
    changed dating rules rebuild it once: a filter then finds a chunk by any of its lines' days."""
    import json

    import apsw

    from memsift.backends.builtin.store import META_KEY

    (workspace / "MEMORY.md").write_text("# Memory\n- 2023-03-18: chose Postgres for the ledger.\n"
                                         "- 2023-04-12: moved billing exports to Parquet.\n")
    m = _manager(tmp_path, workspace)
    db = m.db_path
    m._close_reader()
    conn = apsw.Connection(str(db))
    meta = json.loads(conn.execute("SELECT value FROM meta WHERE key=?", (META_KEY,)).fetchone()[0])
    conn.execute("DROP TRIGGER chunks_days_removed; DROP TABLE chunk_days; PRAGMA user_version=3")
    conn.execute("UPDATE meta SET value=? WHERE key=?", (json.dumps({**meta, "noteDates": 1}), META_KEY))
    conn.close()
    m = _manager(tmp_path, workspace)  # opens (migration 4), then syncs: the revision changed, so it rebuilds
    answer = run(m.search, "Parquet billing exports", min_score=0, since="2023-04-01", now=NOW)
    hit = next(h for h in answer.results if h.path == "MEMORY.md")
    assert "2023-04-12" in hit.snippet and "2023-03-18" not in hit.snippet  # the lines of the range
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    assert conn.execute("SELECT count(*) FROM chunk_days").fetchone()[0] > 0
    conn.close()
    m._close_reader()


def test_a_days_own_note_comes_before_memory_mds_line_of_that_day(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(
        "# Decisions\n- 2023-03-02: kept weekly releases.\n- 2023-03-18: chose Postgres for the ledger.\n"
    )
    (ws / "memory" / "2023-03-18.md").write_text("# 2023-03-18\n\n- Migrated the invoices table.\n")
    m = _manager(tmp_path, ws)
    answer = run(m.search, "what happened on March 18?", now=NOW, explain=True)
    assert answer.time_only and [h.path for h in answer.results] == ["memory/2023-03-18.md", "MEMORY.md"]
    memory = answer.results[1]
    # The line shown is of that day, and so is the day explain names (not the chunk's first, 03-02).
    assert "2023-03-18" in memory.snippet and "2023-03-02" not in memory.snippet
    assert memory.explain.day == "2023-03-18"
    m._close_reader()
