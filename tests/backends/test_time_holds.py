"""A question about a topic at a time gets that time's notes, on every backend (issue "time that
holds"): the time named is a rule the keyword rescue, the evidence ranker and the final cut obey;
the words that name the time are no topic; a window without notes says so and shows only the days
around it; a window with more days than are shown says how to see them all.

The workspace's dates are relative to a fixed day, asked as of that day (tests/time_workspace.py):
builtin on every day of FIXED_DAYS (month and year ends), the other backends on one. The doors (cold CLI,
resident helper, watch, MCP stdio and HTTP, API) are in tests/test_doors.py."""

from __future__ import annotations

from datetime import date, timedelta

import anyio
import pytest

from helpers import backend_memory, make_settings
from memsift.engine import open_manager
from time_workspace import FIXED_DAYS, noon, topic_questions, write_time_workspace

BACKENDS = ["builtin", "postgres", "lancedb", "qmd"]
CASES = [("builtin", day) for day in FIXED_DAYS] + [(b, FIXED_DAYS[3]) for b in BACKENDS[1:]]


def _whole_window_question(tw) -> str:
    return "what happened this year?" if tw.today.month > 2 else "what happened last year?"


async def _answers(settings, tw) -> dict:
    """Every question of this module asked of one manager (the Postgres pool lives in one event loop)."""
    lonely = tw.today - timedelta(days=400)
    asks = {q: (q, {}) for q, _words in topic_questions(tw)}
    asks |= {"empty": (tw.question_for_empty_day(), {}),
             "lonely": (f"what did I do on {lonely.strftime('%B')} {lonely.day}, {lonely.year}?", {}),
             "cut": (_whole_window_question(tw), {"max_results": 2})}
    manager = open_manager(settings)
    now = noon(tw.today)
    try:
        await manager.sync(reason="test")
        answers = {key: await manager.search(q, now=now, **opts) for key, (q, opts) in asks.items()}
        days = answers["cut"].time_window_days or 0
        answers["whole"] = await manager.search(_whole_window_question(tw), now=now, max_results=max(1, days))
        return answers
    finally:
        await manager.aclose()


@pytest.fixture(scope="module", params=CASES, ids=[f"{b}-{d}" for b, d in CASES])
def timed(request, tmp_path_factory):
    backend, day = request.param
    memory = backend_memory(backend)
    if backend == "qmd":  # QMD's own cap (6) would stop a whole window of 10 days
        memory["qmd"] = {
            **memory.get("qmd", {}),
            "limits": {**memory.get("qmd", {}).get("limits", {}), "maxResults": 20},
        }
    root = tmp_path_factory.mktemp(f"time-{backend}")
    tw = write_time_workspace(root / "ws", day)
    # QMD searches with its own BM25 here: its hybrid `query` loads models of its own, past the test's budget.
    settings = make_settings(root, tw.root, {"provider": "none" if backend == "qmd" else "local"}, memory=memory)
    return backend, tw, anyio.run(_answers, settings, tw)


def _day(path: str) -> date:
    return date.fromisoformat(path.rsplit("/", 1)[-1][:10])


def test_a_topic_at_a_time_puts_the_note_of_that_time_first(timed):
    backend, tw, answers = timed
    for question, words in topic_questions(tw):
        answer = answers[question]
        assert answer.results, question
        top = answer.results[0]
        assert words in top.snippet, (question, [(h.path, h.score) for h in answer.results])
        # No note past the window's margins is rescued over the in-window one.
        window_end = max(date.fromisoformat(w.split(" ", 1)[0].split("..")[-1]) for w in answer.time_windows)
        for hit in answer.results:
            if hit.rescued and hit.path.startswith("memory/"):
                assert (window_end - _day(hit.path)).days < 60, (question, hit.path)


def test_the_words_that_name_a_time_find_no_notes(timed):
    backend, tw, answers = timed
    # The day's number is in a note 300 days ago ("23:00 … the 23th"): it must not be found for it.
    answer = answers["empty"]
    far = (tw.today - timedelta(days=300)).isoformat()
    assert all(far not in h.path for h in answer.results), [h.path for h in answer.results]


def test_a_day_without_notes_says_so_and_shows_only_the_days_around_it(timed):
    backend, tw, answers = timed
    answer = answers["empty"]
    assert answer.time_only and answer.time_window_days == 0
    assert answer.time_note and answer.time_note.startswith("no notes in") and "nearest" in answer.time_note
    assert [h.path for h in answer.results][:1] == [f"memory/{tw.nearest_to_empty.isoformat()}.md"]
    assert all(abs((_day(h.path) - tw.empty_day).days) <= 7 for h in answer.results)
    # Nothing within a week either: said, and nothing shown.
    none = answers["lonely"]
    assert none.results == [] and none.time_note and "nor within 7 days" in none.time_note


def test_a_window_with_more_days_than_shown_says_how_many(timed):
    backend, tw, answers = timed
    answer = answers["cut"]
    assert answer.time_only and len(answer.results) == 2
    assert answer.time_window_days and answer.time_window_days > 2
    assert f"holds notes on {answer.time_window_days} days, 2 shown" in answer.time_note
    whole = answers["whole"]
    assert whole.time_note is None and len({_day(h.path) for h in whole.results if h.path.startswith("memory/")}) == \
        answer.time_window_days
