"""The day spans calendar notions cover, as whole days counted from a given today: a month's end and
thirds, quarters, halves, seasons, weekends, weeks and days of a month, the same day a year back,
the holidays and their named days. Pure date arithmetic: reading the words that name them is
time_phrases.py's."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Callable

# A phrase rule's resolver (time_phrases.py, weekday_phrases.py): its match, today and the
# hemisphere → the phrase's first and last day, or None where the match names no time after all.
Resolver = Callable[["re.Match[str]", date, str], "tuple[date, date] | None"]

ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
SEASONS_NORTH = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month of each


def month_end(d: date) -> date:
    return (d.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)


def add_months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    return date(d.year + y, m + 1, 1)


def which_month(month: int, year: int | None, qualifier: str | None, today: date) -> date:
    """The first day of the month a phrase names (the past preferred)."""
    if year is not None:
        return date(year, month, 1)
    q = (qualifier or "").lower()
    if q == "this":
        return date(today.year, month, 1)
    if q == "next":
        return date(today.year if month > today.month else today.year + 1, month, 1)
    if q == "last":
        return date(today.year if month < today.month else today.year - 1, month, 1)
    return date(today.year if month <= today.month else today.year - 1, month, 1)


_THIRDS = {"early": 0, "the beginning of": 0, "the start of": 0, "mid": 1, "the middle of": 1, "late": 2,
           "the end of": 2}


def third(part: str | None) -> int | None:
    """Which third a part word names (0 early, 1 mid, 2 late), or None: the whole."""
    return _THIRDS.get(re.sub(r"\s+", " ", (part or "").lower()))


def month_part(first: date, part: str | None) -> tuple[date, date]:
    """A month in thirds: days 1-10, 11-20, 21 to its end; no part: all of it."""
    spans = [(first, first.replace(day=10)), (first.replace(day=11), first.replace(day=20)),
             (first.replace(day=21), month_end(first))]
    n = third(part)
    return (first, month_end(first)) if n is None else spans[n]


def quarter(q: int, year: int | None, qualifier: str | None, today: date) -> tuple[date, date]:
    current = (today.month - 1) // 3 + 1
    if year is None:
        year = today.year if q <= current else today.year - 1
        if (qualifier or "").lower() == "next":
            year = today.year if q > current else today.year + 1
    first = date(year, 3 * q - 2, 1)
    return first, month_end(add_months(first, 2))


def relative_quarter(which: str, today: date) -> tuple[date, date]:
    first = date(today.year, 3 * ((today.month - 1) // 3) + 1, 1)
    first = add_months(first, {"last": -3, "previous": -3, "this": 0, "current": 0, "next": 3}[which])
    return first, month_end(add_months(first, 2))


def season(name: str, year: int | None, qualifier: str | None, today: date, hemisphere: str) -> tuple[date, date]:
    """A meteorological season: three months, winter spanning the new year (named by its first month's year)."""
    first_month = SEASONS_NORTH[name]
    if hemisphere == "southern":
        first_month = (first_month + 5) % 12 + 1
    def span(y: int) -> tuple[date, date]:
        first = date(y, first_month, 1)
        return first, month_end(add_months(first, 2))
    if year is not None:
        return span(year)
    # The season that started most recently (it may be under way): this year's, or last year's.
    latest = span(today.year) if date(today.year, first_month, 1) <= today else span(today.year - 1)
    q = (qualifier or "").lower()
    if q == "last" and latest[1] >= today:  # "last summer" while it is summer: the one before
        return span(latest[0].year - 1)
    if q == "next":
        return span(latest[0].year + 1)
    return latest


def nearest_saturday(day: date) -> date:
    """The Saturday of the weekend nearest a day: the one before it for Monday to Wednesday, the one
    after for Thursday and Friday, its own for a Saturday or Sunday."""
    wd = day.weekday()
    if wd <= 2:
        return day - timedelta(days=wd + 2)
    return day + timedelta(days=5 - wd) if wd <= 5 else day - timedelta(days=1)


def weekend(qualifier: str | None, today: date) -> tuple[date, date]:
    """The weekend that started most recently (today's when it is Saturday or Sunday)."""
    saturday = today - timedelta(days=(today.weekday() - 5) % 7)
    if (qualifier or "").lower() == "last" and today.weekday() >= 5:
        saturday -= timedelta(days=7)
    return saturday, saturday + timedelta(days=1)


def around(day: date, days: int) -> tuple[date, date]:
    return day - timedelta(days=days), day + timedelta(days=days)


def same_day_back(today: date, unit: str, count: int = 1) -> date:
    """The day `count` weeks, months or years before `today`, its day of the month kept where the
    month has it (a year before 29 February is 28 February; a month before 31 March, 28 or 29 February)."""
    if unit == "week":
        return today - timedelta(weeks=count)
    first = add_months(today, -count * (12 if unit == "year" else 1))
    return first.replace(day=min(today.day, month_end(first).day))


def earlier_this(unit: str, today: date) -> tuple[date, date]:
    start = {"week": today - timedelta(days=today.weekday()), "month": today.replace(day=1),
             "year": date(today.year, 1, 1)}[unit]
    return start, max(start, today - timedelta(days=1))


def vague_ago(count: str, unit: str, today: date) -> tuple[date, date]:
    """"a couple of days ago": 2 ± 1 days; "a few weeks ago": 3 ± 2 weeks, never reaching today."""
    n, spread = (2, 1) if "couple" in count else (3, 2)
    days = {"day": 1, "week": 7, "month": 30}[unit]
    return today - timedelta(days=(n + spread) * days), today - timedelta(days=max(1, (n - spread) * days))


def week_before_last(today: date) -> tuple[date, date]:
    monday = today - timedelta(days=today.weekday() + 14)
    return monday, monday + timedelta(days=6)


def holidays(today: date) -> tuple[date, date]:
    year = today.year if today >= date(today.year, 12, 24) else today.year - 1
    return date(year, 12, 24), date(year + 1, 1, 1)


def year_part(year: int, part: str | None) -> tuple[date, date]:
    """A year in thirds, as a month is: early (January to April), mid (May to August), late (September
    to December); no part: all of it."""
    n = third(part)
    if n is None:
        return date(year, 1, 1), date(year, 12, 31)
    first = date(year, 4 * n + 1, 1)
    return first, month_end(add_months(first, 3))


def relative_year(which: str | None, year: int | None, today: date) -> int:
    """last/this/next year, a year said in digits, or "the year" (this one)."""
    if year is not None:
        return year
    return today.year + {"last": -1, "next": 1}.get((which or "").lower(), 0)


def relative_month(which: str, today: date) -> date:
    """The first day of last/this/next month."""
    return add_months(today, {"last": -1, "this": 0, "next": 1}[which.lower()])


def week_of_month(ordinal: str, first: date) -> tuple[date, date]:
    """The first to fourth week of a month: days 1-7, 8-14, 15-21, 22-28; its last week: its last 7 days."""
    end = month_end(first)
    if ordinal.lower() == "last":
        return end - timedelta(days=6), end
    n = ORDINALS[ordinal.lower()]
    return first + timedelta(days=7 * (n - 1)), first + timedelta(days=7 * n - 1)


def day_of_month(day: int, first: date | None, today: date) -> tuple[date, date] | None:
    """The `day` of a month said, or the latest that is not after today; None for a day no month has."""
    if not 1 <= day <= 31:
        return None
    if first is None:
        first = today.replace(day=1) if day <= today.day else add_months(today, -1)
        while day > month_end(first).day:  # "on the 31st" asked on 5 March: 31 January
            first = add_months(first, -1)
    if day > month_end(first).day:
        return None
    return (first.replace(day=day),) * 2


def month_day(month: int, day: int, year: int | None, today: date) -> date | None:
    """That day of that month: of the year said, else the latest that is not after today (the
    latest 29 February for that day); None for a day no such month has."""
    for y in [year] if year else range(today.year, today.year - 8, -1):
        try:
            d = date(y, month, day)
        except ValueError:
            continue
        if year or d <= today:
            return d
    return None


def week_around(day: date) -> tuple[date, date]:
    """The Monday to Sunday a day is in."""
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def week_of_day(month: int, day: int, year: int | None, today: date) -> tuple[date, date] | None:
    """"the week of March 3": Monday to Sunday around that day (`month_day`'s)."""
    d = month_day(month, day, year, today)
    return None if d is None else week_around(d)


def half(h: int, year: int | None, today: date) -> tuple[date, date]:
    """H1 / the first half: January to June; H2: July to December (the latest begun when no year is said)."""
    if year is None:
        year = today.year if h == 1 or today.month >= 7 else today.year - 1
    return (date(year, 1, 1), date(year, 6, 30)) if h == 1 else (date(year, 7, 1), date(year, 12, 31))


NAMED_DAYS = {"christmas eve": (12, 24), "christmas day": (12, 25), "new year eve": (12, 31), "new year day": (1, 1)}


def named_day(name: str, which: str | None, today: date, year: int | None = None) -> tuple[date, date]:
    """Christmas Eve / Day, New Year's Eve / Day: of the year said, else the latest that is not after
    today ("last": before today)."""
    words = re.sub(r"year'?s\b", "year", name.lower()).replace("xmas", "christmas").split()
    month, day = NAMED_DAYS[" ".join(words)]
    if year is not None:
        return (date(year, month, day),) * 2
    d = date(today.year, month, day)
    if d > today or ((which or "").lower() == "last" and d == today):
        d = date(today.year - 1, month, day)
    return d, d


def christmas(which: str, today: date) -> tuple[date, date]:
    """last Christmas: the holidays of the latest 25 December before today; this Christmas: this year's."""
    year = today.year if (which.lower() == "this" or today > date(today.year, 12, 25)) else today.year - 1
    return date(year, 12, 24), date(year + 1, 1, 1)


def weekends_ago(n: int, today: date) -> tuple[date, date]:
    """The weekend n back: 1 the last one, 2 the weekend before last…"""
    saturday, sunday = weekend("last", today)
    back = timedelta(days=7 * (max(n, 1) - 1))
    return saturday - back, sunday - back


def this_past(unit: str, today: date) -> tuple[date, date]:
    """this past week / month / year: from the start of the last one until today (as "the past week")."""
    start = {"week": today - timedelta(days=today.weekday() + 7), "month": add_months(today, -1),
             "year": date(today.year - 1, 1, 1)}[unit.lower()]
    return start, today


def previous_unit(unit: str, today: date) -> tuple[date, date]:
    """the previous / prior week, month or year: the whole one before this one (as "last week")."""
    unit = unit.lower()
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7)
        return monday, monday + timedelta(days=6)
    if unit == "month":
        first = relative_month("last", today)
        return first, month_end(first)
    return year_part(today.year - 1, None)


def latest_weekday(weekday: int, today: date, weeks_back: int = 0) -> date:
    """The latest `weekday` (0 is Monday) before today, as a date parser reads "on Monday" (asked on
    a Monday, a week ago); `weeks_back` more weeks for "the Monday before last"."""
    return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1 + 7 * weeks_back)


def weekday_of_week(weekday: int, weeks_back: int, today: date) -> date:
    """That day of this week (0), last week (1) or the week before last (2), weeks running Monday to Sunday."""
    return today - timedelta(days=today.weekday() + 7 * weeks_back) + timedelta(days=weekday)


def beside(day: date, unit: str, side: str) -> tuple[date, date]:
    """The day, night, week (7 days) or weekend just before or after a day: "the day after
    Thanksgiving", "the week before Christmas", "the weekend after Easter"."""
    after = side == "after"
    if unit in ("day", "night"):
        d = day + timedelta(days=1 if after else -1)
        return d, d
    if unit == "week":
        first = day + timedelta(days=1) if after else day - timedelta(days=7)
        return first, first + timedelta(days=6)
    if after:  # the first Saturday after the day, and its Sunday
        saturday = day + timedelta(days=(5 - day.weekday()) % 7 or 7)
        return saturday, saturday + timedelta(days=1)
    sunday = day - timedelta(days=(day.weekday() - 6) % 7 or 7)  # the last Sunday before it
    return sunday - timedelta(days=1), sunday
