"""The moment a question's relative times count from ("yesterday", "last month", decay).

The clock, unless `$MEMSIFT_NOW` fixes it: an ISO-8601 date or date-time (`2027-01-01`,
`2027-01-01T09:30`, the user's local time when no offset is given) or POSIX seconds. It exists so that a
replayed conversation, a benchmark or a test answers "what did I do yesterday?" as of one fixed day
through every door (cold CLI, resident helper, watch, MCP), whatever today is. The resident helper
answers only clients with the same `$MEMSIFT_NOW` (it is one of memsift's own variables), and the
Python API's `now=` argument wins over it.

Which day a moment falls on is the user's (config/zones.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from datetime import datetime

from ..config.zones import LAST_SECOND, is_moment, zone_info

NOW_ENV = "MEMSIFT_NOW"


class BadClock(ValueError):
    """`$MEMSIFT_NOW` holds something that is no moment."""


def parse_now(text: str, zone: str | None = None) -> float:
    """POSIX seconds of `text` (ISO-8601 date or date-time, or seconds); BadClock otherwise. Without
    an offset it is a time of `zone` (the user's time zone; None: this machine's)."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise BadClock(f"${NOW_ENV}={value[:40]!r} is no moment: use a date like 2027-01-01, a date-time like "
                           f"2027-01-01T09:30, or POSIX seconds; unset it to use the clock") from None
        if len(value) == 10:  # a bare date: the middle of that day, so "today" is that day in every time zone offset
            moment = moment.replace(hour=12)
        if zone and moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone_info(zone))
        try:
            seconds = moment.timestamp()
        except (OverflowError, OSError, ValueError):  # year 1 in a zone east of UTC
            seconds = -1.0
    if not is_moment(seconds):  # up to the end of 9999: the calendar stays readable
        raise BadClock(f"${NOW_ENV}={value[:40]!r} is out of range: a moment from 1970 to 9999 "
                       f"(POSIX seconds between 0 and {LAST_SECOND})")
    return seconds


def now(environ: Mapping[str, str] | None = None, zone: str | None = None) -> float:
    """The moment to count from: `$MEMSIFT_NOW` when set (read in `zone`, the user's), else the clock."""
    fixed = (os.environ if environ is None else environ).get(NOW_ENV, "").strip()
    return parse_now(fixed, zone) if fixed else time.time()


def check_now(value: float | None) -> float | None:
    """`now=` as the Python API passes it: None, or POSIX seconds memsift can read as a day.
    ValueError otherwise (NaN or 1e20 failed deep in the calendar; True was one second after 1970)."""
    if value is not None and not is_moment(value):
        raise ValueError(f"must be POSIX seconds between 0 and {LAST_SECOND} (got {str(value)[:40]!r}); "
                         "a datetime's .timestamp() gives them")
    return value
