"""Time in ranking, shared by every backend: the since/until filter, the question's time windows,
and temporal decay — judged line by line.

A chunk speaks of every day its lines do (engine/files/note_dates.py: a MEMORY.md section of
decisions dated 2026-03-18 and 2026-09-30 is of both); a chunk with none is judged by its file's
modification day.

- **Filter** (`since`/`until`): a hit is kept when one of its lines' days lies in the range, and
  it shows those lines (`focus`) when others do not.
- **Windows** (a time named in the question): a dated hit inside a window keeps its score; one
  outside loses up to `weight` of it, less the closer it is (within half the window's length, at
  least 2 days before it and 7 after it: an event is told after it happens), and backends add
  the best notes of these days to their candidates (`candidate_windows`); an undated hit loses
  `weight/2` times the share of dated hits in the pool (in daily logs an undated note is unlikely
  the one meant; in an undated corpus a rare date-like line must not cost every other note).
  Factors are relative to the pool's best, so when no hit is inside a window (or none is dated)
  nothing changes. The window's best note of the topic then still comes before a margin's note
  that holds no more of the topic's words (`inside_before_margin`).
- **Decay**, `bounded` (default): score × (1 − w + w · 0.5^(age / halfLife)), the age counted
  from the newest dated hit of this search (never later than `now`) to the day of the lines that
  matched the query (else the chunk's day), so decay orders notes by how recent they are without
  pushing any to zero; MEMORY.md always keeps 1, whatever dates its lines carry, and so do
  undated files under memory/ (a file named without a date whose chunk states no day). `reference`: the reference's
  score × 0.5^(age / halfLife) with the age from `now` and file-name dates only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Callable, Protocol, Sequence, TypeVar

from ..config.zones import wall_clock
from .ranking import Candidate, dated_file_timestamp, decay_multiplier, is_evergreen
from ..files.note_dates import chunk_line_days
from ..text import match_form
from .time_query import TimeWindow

__all__ = [
    "TimeParams",
    "FileTime",
    "apply_time_filter",
    "apply_time_windows",
    "apply_decay",
    "line_days",
    "stated_days",
    "focus_on",
    "candidate_windows",
    "is_curated",
    "count_topic_words",
    "inside_before_margin",
    "candidates_inside_first",
]

FileTime = Callable[[str], "float | None"]  # path → its indexed mtime (seconds), or None

MIN_MARGIN_DAYS = 2
MIN_MARGIN_AFTER_DAYS = 7


@dataclass
class TimeParams:
    windows: list[TimeWindow] = field(default_factory=list)  # named in the question
    time_only: bool = False  # ... and nothing else: the windows' notes are the answer (time_only.py)
    window_weight: float = 0.5
    filter: TimeWindow | None = None  # since/until
    decay_enabled: bool = False
    decay_formula: str = "bounded"
    decay_weight: float = 0.1
    half_life_days: float = 30.0
    now: float | None = None
    zone: str | None = None  # whose days (query.time.timezone; None: this machine's)


def line_days(c: Candidate) -> list[str | None]:
    """Each line's day of the candidate (computed once from its text and stored day)."""
    if c.line_days is None:
        if c.source == "sessions" or c.day_source == "modified":  # transcript lines are not file lines
            c.line_days = [c.day if c.day_source != "modified" else None] * (c.text.count("\n") + 1)
        else:
            c.line_days = chunk_line_days(c.path, c.text, c.day, c.day_source)
    return c.line_days


def stated_days(c: Candidate) -> list[date]:
    """Every day the candidate's lines state, sorted (its stored day when no line says more)."""
    days = {d for d in line_days(c) if d}
    if not days and c.day and c.day_source != "modified":
        days = {c.day}
    return sorted(date.fromisoformat(d) for d in days)


def focus_on(c: Candidate, inside: Callable[[date], bool]) -> None:
    """Show the lines of the time asked for when the chunk has dated lines outside it: the first
    run of lines inside (with the undated lines between them)."""
    per_line = line_days(c)
    flags = [None if d is None else inside(date.fromisoformat(d)) for d in per_line]
    if not any(f is False for f in flags) or not any(flags):
        return
    first = flags.index(True)
    last = first
    for k in range(first + 1, len(flags)):
        if flags[k] is False:
            break
        if flags[k]:
            last = k
    c.focus = (first, last)


def _day(c: Candidate, file_time: FileTime, mtimes: dict[str, float | None], zone: str | None) -> date | None:
    """The chunk's stated day, else (not for evergreen files) its file's modification day in `zone`."""
    if c.day:
        return date.fromisoformat(c.day)
    if c.path not in mtimes:
        mtimes[c.path] = file_time(c.path)
    ts = mtimes[c.path]
    if ts is None:
        return None
    c.day, c.day_source = wall_clock(ts, zone).date().isoformat(), "modified"
    return date.fromisoformat(c.day)


def apply_time_filter(items: list[Candidate], window: TimeWindow | None, file_time: FileTime) -> list[Candidate]:
    """Keep the candidates with a line of the range (undated ones by their file's modification day)."""
    if window is None:
        return items
    mtimes: dict[str, float | None] = {}
    kept = []
    for c in items:
        days = stated_days(c)
        if days:
            if any(window.distance_days(d) == 0 for d in days):
                focus_on(c, lambda d: window.distance_days(d) == 0)
                kept.append(c)
        elif (d := _day(c, file_time, mtimes, window.zone)) is not None and window.distance_days(d) == 0:
            kept.append(c)
    return kept


def _margin_days(window: TimeWindow) -> float:
    """How far outside a window a day still gets some of its credit: half the window's length, at least 2 days."""
    return max(MIN_MARGIN_DAYS, (window.length_days or 2 * MIN_MARGIN_DAYS) / 2)


def _margin_after(window: TimeWindow) -> float:
    """The margin after a window's end: at least a week, since an event is often told days after
    it ("last weekend", said on Wednesday). On the dev sets 4 days gave half the gain of 7, and
    10 days the same (docs/performance.md)."""
    return max(_margin_days(window), MIN_MARGIN_AFTER_DAYS)


def _closeness(day: date, window: TimeWindow) -> float:
    dist = window.distance_days(day)
    if dist == 0:
        return 1.0
    after = window.end is not None and day > window.end
    return max(0.0, 1.0 - dist / (_margin_after(window) if after else _margin_days(window)))


def candidate_windows(windows: list[TimeWindow]) -> list[TimeWindow]:
    """The days whose notes a backend adds to its candidates for the question's windows: each
    window widened by its margins, the days `apply_time_windows` still gives credit. A note a
    day outside the window ("an art event two weeks ago", told 17 days ago) ranks near the
    window's own, so it must be found as they are, not only when the KNN pool happens to hold it."""
    out = []
    for w in windows:
        margin = timedelta(days=math.ceil(_margin_days(w)) - 1)
        after = timedelta(days=math.ceil(_margin_after(w)) - 1)
        out.append(w.widened(margin, after))
    return out


def apply_time_windows(items: list[Candidate], windows: list[TimeWindow], weight: float) -> None:
    """Scale each dated candidate by how close its stated day is to the question's windows. The
    closest keep their score (factors are relative to the best in the pool), so a window no note
    falls in, or a pool of undated notes, leaves scores and the minScore cut as they were."""
    if not windows or weight <= 0:
        return
    days = [stated_days(c) for c in items]
    dated = [bool(d) for d in days]
    # A note with no stated day may be of any time: the more of the pool is dated, the less likely
    # it is the one meant (daily logs); in an undated corpus a rare date-like line changes next to nothing.
    undated = 1.0 - weight / 2 * (sum(dated) / len(items) if items else 0.0)
    for c, ds in zip(items, days):
        c.window_closeness = max(_closeness(day, w) for day in ds for w in windows) if ds else None
    factors = [1.0 - weight * (1.0 - c.window_closeness) if c.window_closeness is not None else undated for c in items]
    for c, ds in zip(items, days):  # a chunk of several days shows the lines of the window
        if len(ds) > 1:
            focus_on(c, lambda d: any(w.distance_days(d) == 0 for w in windows))
    best = max(factors, default=1.0)
    for c, f in zip(items, factors):
        c.time_factor = f / best
        c.score *= c.time_factor


def count_topic_words(text: str, terms: Sequence[str]) -> int:
    """How many of the question's topic words (its words less the time it names) a text holds."""
    lower = match_form(text)
    return sum(1 for t in {match_form(t) for t in terms} if t in lower)


class WindowFit(Protocol):
    """A ranked item the window rule reads and moves: a Candidate, or a SearchHit in the evidence stage."""

    score: float
    window_closeness: float | None  # 1 inside the question's window, less in its margins, None undated
    topic_words: int | None  # the question's topic words it holds


W = TypeVar("W", bound=WindowFit)
LIFT = 1e-6  # a moved note scores just above the one it passed: a later sort by score keeps the order


def inside_before_margin(items: list[W]) -> list[W]:
    """The best note of the question's time is never ranked below a note of its margins (the days
    around it that keep part of their score) on the same topic: the first in-window note holding a
    topic word moves up to just before the first margin note above it that holds no more of the
    topic's words, its score lifted just above that note's. "What did we decide in November?" then
    puts the November 2 decision above an October 25 note saying "postponed to November 12; nothing
    decided yet", whose words and meaning are closer. Nothing else moves: undated notes, notes with
    more of the topic's words, notes past the margins (one that still ranks above the window's, weeks
    away, is often where the answer was told), and the window's other notes (moving every one of them
    above the margins cost the dev sets' multi-session questions 0.010-0.016 of recall@10: their
    answers span the days around)."""
    for j, x in enumerate(items):
        words = x.topic_words or 0
        if x.window_closeness != 1.0 or not words:
            continue
        k = next((p for p in range(j) if 0.0 < (items[p].window_closeness or 0.0) < 1.0
                  and (items[p].topic_words or 0) <= words), None)
        if k is None:
            return items
        x.score = max(x.score, round(items[k].score + LIFT, 6))
        return [*items[:k], x, *items[k:j], *items[j + 1:]]
    return items


def candidates_inside_first(items: list[Candidate], terms: Sequence[str]) -> list[Candidate]:
    """`inside_before_margin` over a backend's ranked candidates (their windows already applied)."""
    if not terms:
        return items
    for c in items:
        c.topic_words = count_topic_words(c.text, terms)
    return inside_before_margin(items)


def is_curated(c: Candidate) -> bool:
    """MEMORY.md (or memory.md) at the workspace root: the curated memory, never aged."""
    return c.source == "memory" and c.path.replace("\\", "/") in ("MEMORY.md", "memory.md")


def _holds_any(text: str, terms: list[str]) -> bool:
    return any(t in text for t in terms)


def _matched_day(c: Candidate, terms: list[str]) -> date | None:
    """The newest day of the lines holding a query term, when the chunk has dated lines."""
    if not terms:
        return None
    lines = c.text.split("\n")
    folded = [match_form(t) for t in terms]
    matched = [d for line, d in zip(lines, line_days(c)) if d and _holds_any(match_form(line), folded)]
    return date.fromisoformat(max(matched)) if matched else None


def apply_decay(items: list[Candidate], p: TimeParams, file_time: FileTime, terms: list[str] | None = None) -> None:
    if not p.decay_enabled or not items:
        return
    now = p.now if p.now is not None else time.time()
    if p.decay_formula == "reference":
        _reference_decay(items, p, now, file_time)
        return
    mtimes: dict[str, float | None] = {}
    days: dict[str, date] = {}
    for c in items:
        if is_curated(c) or (not c.day and is_evergreen(c.path, c.source)):
            continue  # MEMORY.md never decays, whatever dates its lines carry; nor do undated notes
        d = _matched_day(c, terms or []) or _day(c, file_time, mtimes, p.zone)
        if d is not None:
            days[c.chunk_id] = d
    if not days:
        return
    anchor = min(max(days.values()), wall_clock(now, p.zone).date())
    for c in items:
        d = days.get(c.chunk_id)
        if d is None:
            continue
        curve = decay_multiplier(float((anchor - d).days), p.half_life_days)
        c.decay = 1.0 - p.decay_weight + p.decay_weight * curve
        c.score *= c.decay


def _reference_decay(items: list[Candidate], p: TimeParams, now: float, file_time: FileTime) -> None:
    """The reference's formula: file-name dates (else mtime), age from now, multiplied in."""
    mtimes: dict[str, float | None] = {}
    for c in items:
        ts = dated_file_timestamp(c.path)
        if ts is None:
            if is_evergreen(c.path, c.source):
                continue
            if c.path not in mtimes:
                mtimes[c.path] = file_time(c.path)
            ts = mtimes[c.path]
            if ts is None:
                continue
        c.decay = decay_multiplier((now - ts) / 86400.0, p.half_life_days)
        if not math.isfinite(c.decay):
            c.decay = 1.0
        c.score *= c.decay
