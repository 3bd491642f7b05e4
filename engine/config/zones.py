"""The user's time zone and its days: `query.time.timezone`, or OpenClaw's
`agents.defaults.userTimezone` (the zone its daily memory files are named in), else this process's
own ($TZ, the system's). "Yesterday", a note's day and a file's modification day are that zone's,
so a gateway running in UTC reads a Californian's days as she writes them.
"""

from __future__ import annotations

import functools
import time
from datetime import date, datetime, tzinfo
from datetime import time as day_time

__all__ = ["BadZone", "LAST_SECOND", "zone_info", "wall_clock", "day_seconds", "is_moment", "zone_shown"]

LAST_SECOND = 253402300799  # 9999-12-31T23:59:59Z: every moment memsift reads is between 0 and this


def is_moment(seconds: object) -> bool:
    """POSIX seconds memsift can read as a day in any zone: a real number (not a bool, NaN or
    infinite) from 1970 to the end of 9999."""
    return isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds <= LAST_SECOND


class BadZone(ValueError):
    """A time zone name the zone database does not know."""


@functools.lru_cache(maxsize=32)
def zone_info(name: str) -> tzinfo:
    """The IANA zone `name` ("America/Los_Angeles"); BadZone otherwise. Zone data comes with the
    `tzdata` package where the system has none (a slim container)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # noqa: PLC0415

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BadZone(f"{name[:60]!r} is no time zone: use an IANA name such as \"Europe/Berlin\" or "
                      "\"America/Los_Angeles\"") from None


def wall_clock(moment: float | None = None, zone: str | None = None) -> datetime:
    """`moment` (POSIX seconds; None: now) as the wall-clock time of `zone` (the user's, an IANA
    name), else of this process's local zone; naive, as the calendar arithmetic takes it."""
    if zone:
        return datetime.fromtimestamp(time.time() if moment is None else moment, zone_info(zone)).replace(tzinfo=None)
    return datetime.fromtimestamp(moment) if moment is not None else datetime.now()


def day_seconds(day: date, zone: str | None = None, *, end: bool = False) -> float:
    """POSIX seconds of the first (or, `end`, the last) moment of `day` in `zone` (else local)."""
    at = datetime.combine(day, day_time.max if end else day_time.min)
    return (at.replace(tzinfo=zone_info(zone)) if zone else at).timestamp()


def zone_shown(zone: str | None) -> str:
    """Whose days "yesterday" and since/until read, as `status` says it: the user's zone, or this
    machine's by its name ($TZ, the system's /etc/localtime, else its abbreviation)."""
    if zone:
        return zone
    import os  # noqa: PLC0415

    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        try:
            name = os.readlink("/etc/localtime").split("zoneinfo/", 1)[-1]
        except OSError:
            name = time.strftime("%Z")
    return f"{name or 'unknown'} (this machine's: query.time.timezone or OpenClaw's userTimezone sets the user's)"
