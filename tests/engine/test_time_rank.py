"""The question's time windows in ranking (engine/search/time_rank.py): how near a day is to a
window, on both sides of it, and the days a backend adds to its candidates."""

from __future__ import annotations

from datetime import date

from memsift.engine.search.ranking import Candidate
from memsift.engine.search.time_query import TimeWindow
from memsift.engine.search.time_rank import apply_time_windows, candidate_windows, candidates_inside_first

WEEKEND = TimeWindow(date(2026, 11, 21), date(2026, 11, 22), "last weekend")


def _note(day: str) -> Candidate:
    return Candidate(chunk_id=day, path=f"memory/{day}.md", source="memory", start_line=1, end_line=2,
                     text=f"# {day}\nbeat the boss", score=0.5, day=day, day_source="file name")


def _factors(days: list[str], window: TimeWindow = WEEKEND) -> dict[str, float]:
    notes = [_note(d) for d in days]
    apply_time_windows(notes, [window], 0.7)
    return {c.day: round(c.time_factor, 3) for c in notes}


def test_a_day_after_a_window_keeps_more_than_a_day_before_it():
    # An event is told after it happens: a week's margin after the window, two days before it.
    f = _factors(["2026-11-21", "2026-11-19", "2026-11-24", "2026-11-28", "2026-11-29", "2026-10-01"])
    assert f["2026-11-21"] == 1.0
    assert f["2026-11-19"] == 0.3  # two days before: out of the margin
    assert f["2026-11-24"] == round(1 - 0.7 * 2 / 7, 3)  # two days after: most of it kept
    assert f["2026-11-28"] < f["2026-11-24"] and f["2026-11-29"] == 0.3
    assert f["2026-10-01"] == 0.3


def test_a_month_keeps_its_half_month_margin_on_both_sides():
    march = TimeWindow(date(2026, 3, 1), date(2026, 3, 31), "in March")
    f = _factors(["2026-03-10", "2026-02-24", "2026-04-05"], march)
    assert f["2026-02-24"] == f["2026-04-05"] == round(1 - 0.7 * 5 / 15.5, 3)


def test_the_candidates_cover_the_days_that_still_get_credit():
    (weekend,) = candidate_windows([WEEKEND])
    assert (weekend.start, weekend.end, weekend.text) == (date(2026, 11, 20), date(2026, 11, 28), "last weekend")
    march, since = candidate_windows([TimeWindow(date(2026, 3, 1), date(2026, 3, 31), "in March"),
                                      TimeWindow(date(2026, 3, 1), None, "since March")])
    assert (march.start, march.end) == (date(2026, 2, 14), date(2026, 4, 15))
    assert (since.start, since.end) == (date(2026, 2, 28), None)  # an open end stays open (2 days: no length)


def _hybrid(day: str, text: str, *, keyword: float, vector: float) -> Candidate:
    c = _note(day)
    c.chunk_id, c.text, c.text_score, c.vector_score = f"{day}:{text[:8]}", text, keyword, vector
    c.keyword_hit, c.vector_hit = keyword > 0, True
    return c


def _rescue(cands: list[Candidate], windows: list[TimeWindow]) -> list[str]:
    from memsift.engine.search.pipeline import PipelineParams, TimeParams, rank  # noqa: PLC0415

    params = PipelineParams(max_results=6, min_score=0.35, vector_weight=0.7, text_weight=0.3, mmr_enabled=False,
                            mmr_lambda=0.7, time=TimeParams(windows=windows, window_weight=0.7))
    hits, facts = rank(lambda _p: None, keyword=[c for c in cands if c.keyword_hit], vector=cands, terms=["fix"],
                       params=params)
    return [f"{c.day}{' (rescued)' if c.chunk_id in facts['rescued'] else ''}" for c in hits]


def test_a_note_months_away_is_not_rescued_over_a_note_of_the_time_asked():
    last_week = TimeWindow(date(2026, 11, 16), date(2026, 11, 22), "last week")
    july = _hybrid("2026-07-02", "fixed the deploy script; fix the cache", keyword=0.9, vector=0.2)
    in_week = _hybrid("2026-11-18", "Fixed HER-95: invoices rounded twice", keyword=0.2, vector=0.2)
    assert _rescue([july, in_week], [last_week]) == ["2026-11-18 (rescued)"]
    # No note of the window found: the keyword rescue is as it was.
    assert _rescue([_hybrid("2026-07-02", "fixed the deploy script; fix the cache", keyword=0.9, vector=0.2)],
                   [last_week]) == ["2026-07-02 (rescued)"]
    # Without a time, both are rescued for their keywords, July's first.
    assert _rescue([_hybrid("2026-07-02", "fixed the deploy script; fix the cache", keyword=0.9, vector=0.2),
                    _hybrid("2026-11-18", "Fixed HER-95: invoices rounded twice", keyword=0.2, vector=0.2)], []) \
        == ["2026-07-02 (rescued)", "2026-11-18 (rescued)"]



NOVEMBER = TimeWindow(date(2026, 11, 1), date(2026, 11, 30), "November")


def _scored(day: str | None, text: str, score: float) -> Candidate:
    return Candidate(chunk_id=f"{day}:{text[:12]}", path=f"memory/{day or 'notes'}.md", source="memory", start_line=1,
                     end_line=1, text=text, score=score, day=day, day_source="heading" if day else None)


def test_a_note_of_the_time_asked_comes_before_its_margins_on_the_same_topic():
    margin = _scored("2026-10-25", "The vote was postponed to November 12; nothing decided yet.", 0.40)
    undated = _scored(None, "We decide by vote.", 0.38)
    decision = _scored("2026-11-02", "Decided to move the event bus to NATS.", 0.30)
    deeper = _scored("2026-10-29", "Decided on the queue: we decide the vote in November.", 0.28)  # more topic words
    second = _scored("2026-11-20", "Decided the release train.", 0.20)
    off_topic = _scored("2026-11-21", "Lunch with Sam.", 0.10)
    items = [margin, undated, decision, deeper, second, off_topic]
    apply_time_windows(items, [NOVEMBER], 0.5)
    for c, s in zip(items, [0.40, 0.38, 0.30, 0.28, 0.20, 0.10]):
        c.score = s  # the order under test, whatever the factors made of it
    ranked = candidates_inside_first(items, ["decide"])
    # The window's best note of the topic passes the margin's; nothing else moves.
    assert [c.chunk_id for c in ranked] == [c.chunk_id for c in [decision, margin, undated, deeper, second, off_topic]]
    assert decision.score > margin.score
    # the others keep their scores
    assert (margin.score, undated.score, deeper.score, second.score) == (0.40, 0.38, 0.28, 0.20)
    # Without topic words, or when the margin's note holds more of them, the order stands.
    again = [_scored("2026-10-25", "decided vote", 0.4), _scored("2026-11-02", "decided", 0.3)]
    apply_time_windows(again, [NOVEMBER], 0.5)
    assert [c.day for c in candidates_inside_first(again, ["decide", "vote"])] == ["2026-10-25", "2026-11-02"]
    assert candidates_inside_first(again, []) == again
    # A note past the margins that still ranks above the window's is left there (often the answer, told weeks away).
    far = [_scored("2026-09-20", "decided", 0.4), _scored("2026-11-02", "decided", 0.3)]
    apply_time_windows(far, [NOVEMBER], 0.5)
    assert far[0].window_closeness == 0.0
    assert [c.day for c in candidates_inside_first(far, ["decide"])] == ["2026-09-20", "2026-11-02"]
