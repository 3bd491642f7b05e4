"""Time in ranking, shared by every backend: the since/until filter, the question's time windows,
and temporal decay.

- **Filter** (`since`/`until`): a hit is kept when its day lies in the range. A chunk's day is the
  one its note states (engine/files/note_dates.py); a chunk with none is judged by its file's
  modification day.
- **Windows** (a time named in the question): a dated hit inside a window keeps its score; one
  outside loses up to `weight` of it, less the closer it is (within half the window's length, at
  least 2 days); an undated hit loses `weight/2` times the share of dated hits in the pool (in
  daily logs an undated note is unlikely the one meant; in an undated corpus a rare date-like
  line must not cost every other note). Factors are relative to the pool's best, so
  when no hit is inside a window (or none is dated) nothing changes.
- **Decay**, `bounded` (default): score × (1 − w + w · 0.5^(age / halfLife)), the age counted
  from the newest dated hit of this search (never later than `now`), so decay orders notes by how
  recent they are without pushing any to zero; evergreen files (MEMORY.md, undated files under
  memory/) keep 1. `reference`: the reference's score × 0.5^(age / halfLife) with the age from
  `now` and file-name dates only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Callable

from .ranking import Candidate, dated_file_timestamp, decay_multiplier, is_evergreen
from .time_query import TimeWindow

__all__ = ["TimeParams", "FileTime", "apply_time_filter", "apply_time_windows", "apply_decay"]

FileTime = Callable[[str], "float | None"]  # path → its indexed mtime (seconds), or None

MIN_MARGIN_DAYS = 2


@dataclass
class TimeParams:
    windows: list[TimeWindow] = field(default_factory=list)  # named in the question
    window_weight: float = 0.5
    filter: TimeWindow | None = None  # since/until
    decay_enabled: bool = False
    decay_formula: str = "bounded"
    decay_weight: float = 0.1
    half_life_days: float = 30.0
    now: float | None = None


def _day(c: Candidate, file_time: FileTime, mtimes: dict[str, float | None]) -> date | None:
    """The chunk's stated day, else (not for evergreen files) its file's modification day."""
    if c.day:
        return date.fromisoformat(c.day)
    if c.path not in mtimes:
        mtimes[c.path] = file_time(c.path)
    ts = mtimes[c.path]
    if ts is None:
        return None
    c.day, c.day_source = datetime.fromtimestamp(ts).date().isoformat(), "modified"
    return date.fromisoformat(c.day)


def apply_time_filter(items: list[Candidate], window: TimeWindow | None, file_time: FileTime) -> list[Candidate]:
    if window is None:
        return items
    mtimes: dict[str, float | None] = {}
    return [c for c in items if (d := _day(c, file_time, mtimes)) is not None and window.distance_days(d) == 0]


def _closeness(day: date, window: TimeWindow) -> float:
    dist = window.distance_days(day)
    if dist == 0:
        return 1.0
    length = window.length_days
    margin = max(MIN_MARGIN_DAYS, (length or 2 * MIN_MARGIN_DAYS) / 2)
    return max(0.0, 1.0 - dist / margin)


def apply_time_windows(items: list[Candidate], windows: list[TimeWindow], weight: float) -> None:
    """Scale each dated candidate by how close its stated day is to the question's windows. The
    closest keep their score (factors are relative to the best in the pool), so a window no note
    falls in, or a pool of undated notes, leaves scores and the minScore cut as they were."""
    if not windows or weight <= 0:
        return
    dated = [bool(c.day and c.day_source != "modified") for c in items]
    # A note with no stated day may be of any time: the more of the pool is dated, the less likely
    # it is the one meant (daily logs); in an undated corpus a rare date-like line changes next to nothing.
    undated = 1.0 - weight / 2 * (sum(dated) / len(items) if items else 0.0)
    factors = [1.0 - weight * (1.0 - max(_closeness(date.fromisoformat(c.day), w) for w in windows)) if d else undated
               for c, d in zip(items, dated)]
    best = max(factors, default=1.0)
    for c, f in zip(items, factors):
        c.time_factor = f / best
        c.score *= c.time_factor


def apply_decay(items: list[Candidate], p: TimeParams, file_time: FileTime) -> None:
    if not p.decay_enabled or not items:
        return
    now = p.now if p.now is not None else time.time()
    if p.decay_formula == "reference":
        _reference_decay(items, p, now, file_time)
        return
    mtimes: dict[str, float | None] = {}
    days: dict[str, date] = {}
    for c in items:
        if not c.day and is_evergreen(c.path, c.source):
            continue
        d = _day(c, file_time, mtimes)
        if d is not None:
            days[c.chunk_id] = d
    if not days:
        return
    anchor = min(max(days.values()), datetime.fromtimestamp(now).date())
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
