"""The holidays people date their memories by ("what did we do over Thanksgiving?", "the airline I
flew with on Valentine's Day"): each name's days in a given year, and which year a question means.

Fixed days (Halloween, Valentine's Day, St Patrick's Day, the Fourth of July, Boxing Day), the
US/Canadian days counted from weekdays (Thanksgiving, Memorial Day, Mother's and Father's Day,
Black Friday, Cyber Monday) and Easter's (computed: the Gregorian computus). A name that
countries give to different days ("Labor Day": 1 May in most, September's first Monday in North
America; "Independence Day") is left out rather than guessed. Christmas and New Year are
calendar_spans.py's; here only "Christmas 2024" (that year's holidays).
"""

from __future__ import annotations

import functools
import re
from datetime import date, timedelta
from typing import Callable

from .calendar_spans import nearest_saturday

__all__ = ["HOLIDAY_GATE", "HOLIDAY_NAMES", "WEEKDAY_NAMED", "easter_sunday", "holiday_day", "holiday_key",
           "holiday_window", "nth_weekday"]

_APOS = "'?"  # time_phrases.py reads a phone's ’ as '
# Each holiday: the pattern of its names (case-insensitive) and its key.
HOLIDAY_NAMES: list[tuple[str, str]] = [
    (r"canadian\s+thanksgiving", "canadian thanksgiving"),
    (r"thanksgiving\s+day", "thanksgiving day"),
    (r"thanksgiving", "thanksgiving"),
    (r"black\s+friday", "black friday"),
    (r"cyber\s+monday", "cyber monday"),
    (r"good\s+friday", "good friday"),
    (r"easter\s+(?:sunday|day)", "easter sunday"),
    (r"easter\s+monday", "easter monday"),
    (r"easter", "easter"),
    (r"hallowe'?en", "halloween"),
    (rf"(?:st\.?\s+|saint\s+)?valentine{_APOS}s?(?:\s+day)?", "valentine"),
    (rf"(?:st\.?|saint)\s+(?:patrick|paddy){_APOS}s?(?:\s+day)?", "st patrick"),
    (r"(?:the\s+)?(?:fourth|4th)\s+of\s+july", "fourth of july"),
    (r"memorial\s+day", "memorial day"),
    (rf"mother{_APOS}s?\s+day", "mother's day"),
    (rf"father{_APOS}s?\s+day", "father's day"),
    (r"boxing\s+day", "boxing day"),
    (r"christmas|xmas", "christmas"),
]
# The words that let a question past the time gates (time_query.py, time_phrases.py) to the rule
# that reads HOLIDAY_NAMES; a phone's ’ included, as the first gate sees the question as typed.
HOLIDAY_GATE = (r"thanksgiving|easter|good\s+friday|hallowe'?en|valentines?|patrick|paddy|"
                r"(?:mother|father)['\u2019]?s?\s+day|black\s+friday|cyber\s+monday|boxing\s+day|memorial\s+day|july")
# Names holding a weekday's name: read as the holiday even without a word that makes them a time
# (else a date parser reads "Black Friday" as last Friday).
WEEKDAY_NAMED = {"black friday", "cyber monday", "good friday", "easter sunday", "easter monday"}


def holiday_key(name: str) -> str | None:
    """The key of a holiday name as written ("Valentine's Day" → "valentine")."""
    words = " ".join(name.split())
    return next((key for rx, key in _compiled_names() if rx.match(words)), None)


@functools.cache
def _compiled_names() -> list[tuple[re.Pattern[str], str]]:
    return [(re.compile(rf"(?:{p})$", re.IGNORECASE), key) for p, key in HOLIDAY_NAMES]  # on the first holiday


def nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The nth `weekday` (Monday 0) of a month; n = -1: its last."""
    if n > 0:
        first = date(year, month, 1)
        return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    last = date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)
    return last - timedelta(days=(last.weekday() - weekday) % 7)


def easter_sunday(year: int) -> date:
    """Western Easter (the anonymous Gregorian computus, Meeus/Jones/Butcher)."""
    a, (b, c) = year % 19, divmod(year, 100)
    d, e = divmod(b, 4)
    g = (b - (b + 8) // 25 + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    l_ = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l_) // 451
    month, day = divmod(h + l_ - 7 * m + 114, 31)
    return date(year, month, day + 1)


def _thanksgiving(year: int) -> date:
    return nth_weekday(year, 11, 3, 4)  # the fourth Thursday of November


def _days(first: date, last: date | None = None) -> tuple[date, date]:
    return first, last or first


_SPANS: dict[str, Callable[[int], tuple[date, date]]] = {
    # the long weekend, Thursday to Sunday: "over Thanksgiving" is those days
    "thanksgiving": lambda y: _days(_thanksgiving(y), _thanksgiving(y) + timedelta(days=3)),
    "thanksgiving day": lambda y: _days(_thanksgiving(y)),
    "canadian thanksgiving": lambda y: _days(nth_weekday(y, 10, 0, 2) - timedelta(days=2), nth_weekday(y, 10, 0, 2)),
    "black friday": lambda y: _days(_thanksgiving(y) + timedelta(days=1)),
    "cyber monday": lambda y: _days(_thanksgiving(y) + timedelta(days=4)),
    # Good Friday to Easter Monday
    "easter": lambda y: _days(easter_sunday(y) - timedelta(days=2), easter_sunday(y) + timedelta(days=1)),
    "easter sunday": lambda y: _days(easter_sunday(y)),
    "good friday": lambda y: _days(easter_sunday(y) - timedelta(days=2)),
    "easter monday": lambda y: _days(easter_sunday(y) + timedelta(days=1)),
    "halloween": lambda y: _days(date(y, 10, 31)),
    "valentine": lambda y: _days(date(y, 2, 14)),
    "st patrick": lambda y: _days(date(y, 3, 17)),
    "fourth of july": lambda y: _days(date(y, 7, 4)),
    "memorial day": lambda y: _days(nth_weekday(y, 5, 0, -1)),
    "mother's day": lambda y: _days(nth_weekday(y, 5, 6, 2)),
    "father's day": lambda y: _days(nth_weekday(y, 6, 6, 3)),
    "boxing day": lambda y: _days(date(y, 12, 26)),
    "christmas": lambda y: _days(date(y, 12, 24), date(y + 1, 1, 1)),
    "christmas day": lambda y: _days(date(y, 12, 25)),
}
# The one day a holiday of several days is counted from: "the day after Thanksgiving" is its Friday,
# "the week before Easter" the week before its Sunday, "the day after Christmas" 26 December.
_MAIN_DAY = {"thanksgiving": "thanksgiving day", "easter": "easter sunday", "christmas": "christmas day"}


def holiday_day(key: str, year: int) -> date:
    """A holiday's own day in a year (the first of its days, or its main day: _MAIN_DAY)."""
    return _SPANS[_MAIN_DAY.get(key, key)](year)[0]


def holiday_window(key: str, which: str | None, year: int | None, today: date, *,
                   weekend: bool = False) -> tuple[date, date]:
    """The days of a holiday: that year's when a year is said, this year's for "this", else the
    latest begun by today ("last": the latest over before today). `weekend`: a one-day holiday's
    nearest weekend with it (Memorial Day's Saturday to Monday, a Thursday's Thursday to Sunday)."""
    span = _SPANS[key]
    if weekend:
        span = _with_weekend(span)
    q = (which or "").lower()
    if year is not None or q == "this":
        return span(year if year is not None else today.year)
    for y in range(today.year, today.year - 3, -1):
        start, end = span(y)
        if (end < today) if q == "last" else (start <= today):
            return start, end
    return span(today.year - 3)


def _with_weekend(span: Callable[[int], tuple[date, date]]) -> Callable[[int], tuple[date, date]]:
    def weekend_of(year: int) -> tuple[date, date]:
        start, end = span(year)
        if start != end:
            return start, end  # already a long weekend (Easter, Thanksgiving)
        saturday = nearest_saturday(start)
        return min(start, saturday), max(start, saturday + timedelta(days=1))
    return weekend_of
