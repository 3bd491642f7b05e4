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

from ..config.zones import zone_info

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
        return moment.timestamp()
    if not 0 <= seconds < 253402300800:  # before 10000-01-01: the calendar stays readable
        raise BadClock(f"${NOW_ENV}={value[:40]!r} is out of range: POSIX seconds between 0 and 253402300799")
    return seconds


def now(environ: Mapping[str, str] | None = None, zone: str | None = None) -> float:
    """The moment to count from: `$MEMSIFT_NOW` when set (read in `zone`, the user's), else the clock."""
    fixed = (os.environ if environ is None else environ).get(NOW_ENV, "").strip()
    return parse_now(fixed, zone) if fixed else time.time()

