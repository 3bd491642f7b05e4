"""Calendar phrases read by memsift itself: the parts of a year people name, which a date parser
reads as a single day or not at all.

- months with a word that makes them a time: "last March", "this May", "next June", "in March
  2024", and their parts: "early/mid-/late March", "the beginning/middle/end of March" (days 1-10,
  11-20, 21 to the end);
- the same parts of a relative month ("the end of last month") and of a year, in thirds ("early
  2024", "mid-2025", "the end of last year"); weeks of a month ("the first week of January", days
  1-7), "the week of March 3" (its Monday to Sunday), days of a month ("on the 3rd", "the 3rd of
  last month", "the first of November");
- quarters: "Q3", "Q3 2025", "the third quarter", "last/this quarter"; halves: "in H2", "H1 2024",
  "the first half of last year";
- seasons: "last summer", "this winter", "over the summer", "autumn 2024" (meteorological
  seasons; the hemisphere is a setting, northern by default);
- "the weekend", "last weekend", "over the weekend"; "earlier this week/month/year"; "earlier
  today", "this morning/afternoon" (today);
- "the day before yesterday"; the same day back: "this day last year", "a year ago today", "a month
  ago today", "this day last week" (one day; 29 February's year back is the 28th); "this time last
  year", "the same time last year" (that day ± a week); vague counts as windows: "a couple of days
  ago" (2 ± 1 days), "a few weeks ago" (3 ± 2 weeks);
- "the holidays", "Christmas", "New Year", "last Christmas" (24 December to 1 January); "Christmas
  Eve", "New Year's Eve/Day" (that day); "since the new year" (from 1 January); other holidays
  after a word that makes them a time ("over Thanksgiving", "on Valentine's Day", "last Easter",
  "Halloween 2024", "the Memorial Day weekend": holidays.py);
- "a fortnight ago", "the weekend before last", "the night before last", "this past month"; "the
  previous week/month/year" (as "last week");
- weekdays the date parser does not read: said alone at a clause's end or owning something ("what
  did I eat Monday?", "Sunday's game"), "this past Friday", "the Monday before last", "Monday of
  last week";
- vague times: "the week before last" (Monday to Sunday two weeks back), "the other day" (2 to 10
  days ago), "recently" / "lately" (the last 30 days), "a while ago" (two weeks to six months ago);
- and their Chinese and Japanese forms: 第三季度, 上季度, 第3四半期, 去年夏天, 今年の夏, 上个月初,
  3月中旬, 先月末, 周末, 上周末, 先週末, 几天前, 数日前, 前天, 一昨日, 去年的今天, 一年前の今日.

Resolution prefers the past, as a memory question does: "in March" asked in November is this
year's March, asked in February last year's; "last March" asked in March is last year's. Every
phrase becomes a window of whole days (calendar_spans.py counts them); nothing here imports a date
library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Callable

from ..lazy import lazy_re
from .weekday_phrases import WEEKDAY_RULES
from .holidays import HOLIDAY_GATE, HOLIDAY_NAMES, WEEKDAY_NAMED, holiday_day, holiday_key, holiday_window
from .calendar_spans import (
    ORDINALS,
    Resolver,
    add_months,
    latest_weekday,
    around,
    beside,
    christmas,
    day_of_month,
    earlier_this,
    half,
    holidays,
    month_day,
    month_part,
    named_day,
    nearest_saturday,
    previous_unit,
    quarter,
    relative_month,
    relative_quarter,
    relative_year,
    same_day_back,
    season,
    this_past,
    vague_ago,
    week_around,
    week_before_last,
    week_of_day,
    week_of_month,
    weekday_of_week,
    weekend,
    weekends_ago,
    which_month,
    year_part,
)

__all__ = ["CalendarPhrase", "find_calendar_phrases", "calendar_window", "HEMISPHERES"]

HEMISPHERES = ("northern", "southern")


@dataclass(frozen=True)
class CalendarPhrase:
    start_pos: int
    end_pos: int
    text: str
    start: date
    end: date


_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH_WORDS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|"
    r"nov(?:ember)?|dec(?:ember)?"
)
_MONTH_RE = rf"(?P<month>{_MONTH_WORDS})\.?"
_YEAR_RE = r"(?P<year>(?:19|20)\d{2})"
_PART = r"(?P<part>early|mid|late|the\s+(?:beginning|start|middle|end)\s+of)"
_CJK_DIGITS = {
    "〇": 0,
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "兩": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
    "１": 1,
    "２": 2,
    "３": 3,
    "４": 4,
}


def _month_number(word: str) -> int:
    w = word.lower().rstrip(".")
    return next(i for i, name in enumerate(_MONTHS, start=1) if name.startswith(w[:3]))


_COUNTS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def _count(word: str) -> int:
    return _COUNTS.get(word.lower()) or int(word)


def _cjk_int(s: str) -> int:
    if s.isdigit():
        return int(s)
    if "十" in s:
        tens, _, ones = s.partition("十")
        return (_CJK_DIGITS.get(tens, 1) if tens else 1) * 10 + (_CJK_DIGITS.get(ones, 0) if ones else 0)
    return _CJK_DIGITS.get(s, 0)


def _g(m: re.Match[str], name: str) -> str | None:
    return m.groupdict().get(name)


def _modal_may(m: re.Match[str]) -> bool:
    """"this may take a while": "may" is a month only with a year or at the end of a phrase."""
    return (m["month"].lower().startswith("may") and not _g(m, "year")
            and not re.match(r"\s*(?:[?.!,;:)]|$)", m.string[m.end():]))


def _year(m: re.Match[str]) -> int | None:
    y = _g(m, "year")
    return int(y) if y else None


_ORDINAL_WORDS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                  "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
                  "eighteenth", "nineteenth", "twentieth"]
_DAY_WORDS = {w: i for i, w in enumerate(
    _ORDINAL_WORDS + [f"twenty[-\\s]?{w}" for w in _ORDINAL_WORDS[:9]] + ["thirtieth", "thirty[-\\s]?first"], start=1)}
_DAY_ORDINAL = r"\d{1,2}(?:st|nd|rd|th)|" + "|".join(sorted(_DAY_WORDS, key=len, reverse=True))


def _day_number(word: str) -> int:
    digits = re.match(r"\d+", word)
    if digits:
        return int(digits.group(0))
    return next(n for w, n in _DAY_WORDS.items() if re.fullmatch(w, word, re.IGNORECASE))


def _month_day(m: re.Match[str], today: date) -> tuple[date, date] | None:
    d = month_day(_month_number(m["month"]), _day_number(m["d"]), _year(m), today)
    return (d, d) if d else None


_HOLIDAY_RE = "|".join(f"(?:{p})" for p, _ in HOLIDAY_NAMES)
# A holiday's name is a time after one of these ("on Valentine's Day", "over the Easter weekend"),
# with last/this or a year; alone it is as often a topic ("Thanksgiving recipes").
_TIME_LEAD = re.compile(
    r"\b(?:on|at|over|during|around|since|after|before|until|till|by|in|from|through|of)\s+$", re.IGNORECASE
)


def _weekend_of(m: re.Match[str], today: date) -> tuple[date, date] | None:
    month = m["month"] or m["month2"]
    if month:
        day = month_day(_month_number(month), int(m["d"] or m["d2"]), _year(m), today)
    else:
        found = day_of_month(int(m["d2"]), None, today)
        day = found[0] if found else None
    if day is None:
        return None
    saturday = nearest_saturday(day)
    return saturday, saturday + timedelta(days=1)


def _holiday(m: re.Match[str], today: date) -> tuple[date, date] | None:
    key = holiday_key(m["hol"])
    if key is None or (key == "christmas" and not _g(m, "year")):
        return None  # a bare Christmas is the holidays rule's
    alone = not re.search(r"\w", m.string[: m.start()] + m.string[m.end():])  # `--since Easter`
    said_as_time = (alone or m["q"] or _g(m, "year") or m["wk"] or key in WEEKDAY_NAMED
                    or _TIME_LEAD.search(m.string[: m.start()]))
    return holiday_window(key, m["q"], _year(m), today, weekend=bool(m["wk"])) if said_as_time else None


def _week_of_month_day(m: re.Match[str], today: date) -> tuple[date, date] | None:
    found = day_of_month(_day_number(m["d"]), relative_month(m["q"], today) if m["q"] else None, today)
    return None if found is None else week_around(found[0])


def _beside_holiday(m: re.Match[str], today: date) -> tuple[date, date] | None:
    """"the day after Thanksgiving", "the week before Christmas 2024": of the year said, else of the
    latest holiday whose day, week or weekend beside it has begun."""
    if m["nd"]:
        words = m["nd"].lower().replace("xmas", "christmas")
        name = words if re.search(r"(?:eve|day)$", words) else "new year's day"
        day_of: Callable[[int], date] = lambda y: named_day(name, None, today, y)[0]  # noqa: E731
    else:
        key = holiday_key(m["hol"])
        if key is None:
            return None
        day_of = lambda y: holiday_day(key, y)  # noqa: E731
    unit, side = m["u"].lower(), m["r"].lower()
    year = _year(m)
    if year is not None:
        return beside(day_of(year), unit, side)
    for y in range(today.year + 1, today.year - 3, -1):
        start, end = beside(day_of(y), unit, side)
        if start <= today:
            return start, end
    return None


_EN: list[tuple[str, Resolver]] = [
    # the day after Thanksgiving, the night before Christmas, the week before Easter, the weekend after
    # New Year's: beside the holiday's own day (first, or the holiday, or "the Fourth of July" as a day
    # of July, would be read alone, and "before" would open a window)
    (
        r"\bthe\s+(?P<u>day|night|week|weekend)\s+(?P<r>before|after)\s+(?:the\s+)?"
        rf"(?:(?P<nd>(?:christmas|xmas)\s+(?:eve|day)|new\s+year'?s?(?:\s+(?:eve|day))?)|(?P<hol>{_HOLIDAY_RE}))"
        rf"(?:,?\s+(?:of\s+)?{_YEAR_RE})?\b",
        lambda m, t, h: _beside_holiday(m, t),
    ),
    # "the day before yesterday" (before "yesterday" is read alone), the night before last
    (
        r"\bthe\s+(?:day\s+before\s+yesterday|night\s+before\s+last)\b",
        lambda m, t, h: (t - timedelta(days=2),) * 2,
    ),
    # a fortnight ago: as "two weeks ago", Monday to Sunday of that week
    (r"\ba\s+fortnight\s+ago\b", lambda m, t, h: week_before_last(t)),
    # the weekend before last
    (r"\bthe\s+weekend\s+before\s+last\b", lambda m, t, h: weekends_ago(2, t)),
    # this past week / month / year
    (r"\bthis\s+past\s+(?P<u>week|month|year)\b", lambda m, t, h: this_past(m["u"], t)),
    # the previous / prior week, month, year: as "last week" ("my previous year's time" is no time: "the" first)
    (r"\bthe\s+(?:previous|prior|preceding)\s+(?P<u>week|month|year)\b", lambda m, t, h: previous_unit(m["u"], t)),
    # the beginning of last month, early next month, the end of this month, the start of the month
    (
        rf"\b{_PART}[\s-]+(?:(?P<q>last|this|next)|the)\s+month\b",
        lambda m, t, h: month_part(relative_month(m["q"] or "this", t), m["part"]),
    ),
    # early 2024, mid-2025, the end of last year, at the start of the year (a year in thirds)
    (
        rf"\b{_PART}[\s-]+(?:(?P<q>last|this|next)\s+year|the\s+year|{_YEAR_RE})\b",
        lambda m, t, h: year_part(relative_year(m["q"], _year(m), t), m["part"]),
    ),
    # the first / second / last week of January (2024), of last month
    (
        rf"\bthe\s+(?P<o>first|second|third|fourth|last|1st|2nd|3rd|4th)\s+week\s+of\s+"
        rf"(?:(?P<q>last|this|next)\s+month|{_MONTH_RE}(?:,?\s+{_YEAR_RE})?)\b",
        lambda m, t, h: week_of_month(
            m["o"], relative_month(m["q"], t) if m["q"] else which_month(_month_number(m["month"]), _year(m), None, t)
        ),
    ),
    # the week of March 3, the week of 3 March 2024, the week of the 9th of November
    (
        rf"\bthe\s+week\s+of\s+(?:{_MONTH_RE}\s+(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?|(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?"
        rf"\s+(?:of\s+)?(?P<month2>{_MONTH_WORDS}))(?:,?\s+{_YEAR_RE})?\b",
        lambda m, t, h: week_of_day(_month_number(m["month"] or m["month2"]), int(m["d"] or m["d2"]), _year(m), t),
    ),
    # the week of the 9th, the week of the 9th of last month: that day's week
    (
        rf"\bthe\s+week\s+of\s+the\s+(?P<d>{_DAY_ORDINAL})(?:\s+of\s+(?P<q>last|this)\s+month)?\b"
        rf"(?!\s+(?:of\s+)?(?:{_MONTH_WORDS})\b)",
        lambda m, t, h: _week_of_month_day(m, t),
    ),
    # the 1st of November (2025), on the first of November, November the 1st: that day (before "on
    # the 1st" is read alone, as this month's)
    (
        rf"\b(?:on\s+)?the\s+(?P<d>{_DAY_ORDINAL})\s+of\s+{_MONTH_RE}(?:,?\s+{_YEAR_RE})?\b"
        r"(?!\s+(?:long\s+)?weekend)",  # "the Fourth of July weekend" is the holiday rule's
        lambda m, t, h: _month_day(m, t),
    ),
    (
        rf"\b{_MONTH_RE}\s+the\s+(?P<d>{_DAY_ORDINAL})(?:,?\s+{_YEAR_RE})?\b",
        lambda m, t, h: _month_day(m, t),
    ),
    # on the 3rd, the 3rd of last month
    (
        rf"\b(?:on\s+the\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)(?!\s+of\s+(?:{_MONTH_WORDS})\b)"
        r"(?:\s+of\s+(?P<q>last|this)\s+month)?"
        rf"|the\s+(?P<d2>{_DAY_ORDINAL})\s+of\s+(?P<q2>last|this)\s+month)\b",
        lambda m, t, h: day_of_month(
            _day_number(m["d"] or m["d2"]), relative_month(m["q"] or m["q2"], t) if (m["q"] or m["q2"]) else None, t
        ),
    ),
    # in H1, H2 2024 (not a bare "H1": a heading's name), the first half of the year, of last year
    (
        rf"\b(?:in|during|for|by|over)\s+H(?P<h>[12])(?:\s+{_YEAR_RE})?\b",
        lambda m, t, h: half(int(m["h"]), _year(m), t),
    ),
    (rf"\bH(?P<h>[12])\s+{_YEAR_RE}\b", lambda m, t, h: half(int(m["h"]), _year(m), t)),
    (
        rf"\bthe\s+(?P<o>first|second)\s+half\s+of\s+(?:the\s+year|(?P<q>last|this)\s+year|{_YEAR_RE})\b",
        lambda m, t, h: half(1 if m["o"].lower() == "first" else 2,
                              relative_year(m["q"], _year(m), t), t),
    ),
    # Christmas Eve, Christmas Day, New Year's Eve, New Year's Day: that day
    (
        rf"\b(?:(?P<q>last|this)\s+)?(?P<n>(?:christmas|xmas)\s+(?:eve|day)|new\s+year'?s?\s+(?:eve|day))"
        rf"(?:,?\s+(?:of\s+)?{_YEAR_RE})?\b",
        lambda m, t, h: named_day(m["n"], m["q"], t, _year(m)),
    ),
    # Thanksgiving, Easter, Halloween, Valentine's Day…, "Christmas 2024" (holidays.py)
    (
        rf"\b(?:(?P<q>last|this)\s+|the\s+)?(?P<hol>{_HOLIDAY_RE})(?P<wk>\s+(?:long\s+)?weekend)?"
        rf"(?:,?\s+(?:of\s+)?{_YEAR_RE})?\b",
        lambda m, t, h: _holiday(m, t),
    ),
    # last Christmas, this Christmas: those holidays (24 December to 1 January)
    (r"\b(?P<q>last|this)\s+(?:christmas|xmas)\b", lambda m, t, h: christmas(m["q"], t)),
    *WEEKDAY_RULES,  # "what did I eat Monday?", "this past Friday", "Monday of last week" (weekday_phrases.py)
    # since / after the new year: from 1 January (the lead word makes it open-ended)
    (
        r"(?<=since\s|after\s)(?:the\s+)?new\s+year\b(?!'?s?\s+(?:eve|day))",
        lambda m, t, h: (date(t.year, 1, 1),) * 2,
    ),
    # this day last year, on this date a year ago, a year ago today, two months ago today: that one
    # day (before "last year" or "a year ago" is read alone, as the whole of last year)
    (
        r"\b(?:on\s+)?this\s+(?:day|date)\s+(?:last\s+(?P<u>week|month|year)|(?P<n>a|one)\s+(?P<v>week|month|year)\s+ago)\b"
        r"|\b(?P<c>a|one|two|three|four|five|\d{1,2})\s+(?P<w>week|month|year)s?\s+ago\s+today\b",
        lambda m, t, h: (same_day_back(t, (m["u"] or m["v"] or m["w"]).lower(), _count(m["c"] or "1")),) * 2,
    ),
    # (around) this time last year, the same time last year, this time a year ago: that day ± a week
    (
        r"\b(?:around\s+|about\s+)?(?:this|(?:the\s+)?same)\s+time\s+(?:last\s+year|a\s+year\s+ago)\b",
        lambda m, t, h: around(same_day_back(t, "year"), days=7),
    ),
    # early/mid/late March (2024), the end of March, in mid-March
    (
        rf"\b(?:in\s+|during\s+|by\s+)?{_PART}[\s-]+{_MONTH_RE}(?:,?\s+{_YEAR_RE})?\b",
        lambda m, t, h: (
            None if _modal_may(m) else month_part(which_month(_month_number(m["month"]), _year(m), None, t), m["part"])
        ),
    ),
    # last/this/next March (2024)
    (
        rf"\b(?P<q>last|this|next)\s+{_MONTH_RE}(?:,?\s+{_YEAR_RE})?\b(?![.:]\d)",
        lambda m, t, h: (
            None if _modal_may(m) else month_part(which_month(_month_number(m["month"]), _year(m), m["q"], t), None)
        ),
    ),
    # Q3, Q3 2025, Q3'25
    (
        rf"\bQ(?P<n>[1-4])(?:\s+{_YEAR_RE}|'(?P<yy>\d{{2}}))?\b",
        lambda m, t, h: quarter(int(m["n"]), _year(m) or (2000 + int(m["yy"]) if _g(m, "yy") else None), None, t),
    ),
    # the third quarter (of 2024)
    (
        rf"\b(?:the\s+)?(?P<o>first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter(?:\s+(?:of\s+)?{_YEAR_RE})?\b",
        lambda m, t, h: quarter(ORDINALS[m["o"].lower()], _year(m), None, t),
    ),
    # last/this/next quarter
    (
        r"\b(?:the\s+)?(?P<w>last|previous|this|current|next)\s+quarter\b",
        lambda m, t, h: relative_quarter(m["w"].lower(), t),
    ),
    # last summer, this winter, over the summer, in autumn 2024, summer of 2023
    (
        rf"\b(?:(?P<q>last|this|next|past)|(?:in|during|over|through)(?:\s+the)?)\s+(?P<s>spring|summer|autumn|fall|winter)"
        rf"(?:\s+(?:of\s+)?{_YEAR_RE})?\b",
        lambda m, t, h: season(m["s"].lower(), _year(m), "last" if (m["q"] or "").lower() == "past" else m["q"], t, h),
    ),
    (
        rf"\b(?P<s>spring|summer|autumn|fall|winter)\s+(?:of\s+)?{_YEAR_RE}\b",
        lambda m, t, h: season(m["s"].lower(), _year(m), None, t, h),
    ),
    # the weekend of November 21, the weekend of the 21st (2024): that day's weekend
    (
        rf"\bthe\s+weekend\s+of\s+(?:{_MONTH_RE}\s+(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?|(?:the\s+)?"
        rf"(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+(?:of\s+)?(?P<month2>{_MONTH_WORDS}))?)(?:,?\s+{_YEAR_RE})?\b",
        lambda m, t, h: _weekend_of(m, t),
    ),
    # the weekend, last weekend, over the weekend (not "the weekend of the wedding": not last weekend)
    (
        r"\b(?:(?P<q>last|this|(?:this\s+)?past)|(?:over|on|at|during)\s+the|the)\s+weekend\b(?!\s+of\b)",
        lambda m, t, h: weekend(m["q"], t),
    ),
    # earlier this week / month / year
    (r"\bearlier\s+this\s+(?P<u>week|month|year)\b", lambda m, t, h: earlier_this(m["u"].lower(), t)),
    # earlier today, so far today, this morning / afternoon: today (a bare "today" or "tonight"
    # more often asks about now, "a film for tonight?", than about the notes of today)
    (r"\b(?:earlier|so\s+far)\s+today\b|\bthis\s+(?:morning|afternoon)\b", lambda m, t, h: (t, t)),
    # a couple of days ago, a few weeks ago, several months ago
    (
        r"\b(?P<c>a\s+couple\s+of|a\s+few|few|several)\s+(?P<u>day|week|month)s?\s+(?:ago|back)\b",
        lambda m, t, h: vague_ago(m["c"].lower(), m["u"].lower(), t),
    ),
    # two weekends ago: the weekend before last, or further back
    (
        r"\b(?P<c>a|one|two|three|four|five|\d{1,2})\s+weekends?\s+(?:ago|back)\b",
        lambda m, t, h: weekends_ago(_count(m["c"]), t),
    ),
    # the past fortnight: the last 14 days
    (r"\b(?:the\s+)?(?:past|last)\s+fortnight\b", lambda m, t, h: (t - timedelta(days=14), t)),
    # the week before last: the Monday-to-Sunday week two weeks back
    (r"\bthe\s+week\s+before\s+last\b", lambda m, t, h: week_before_last(t)),
    # the other day: 2 to 10 days ago (not yesterday: that would be said)
    (r"\bthe\s+other\s+day\b", lambda m, t, h: (t - timedelta(days=10), t - timedelta(days=2))),
    # recently, lately, of late, in recent weeks: the last 30 days
    (
        r"\b(?:(?:just\s+|very\s+|more\s+|most\s+)?recently|lately|of\s+late|in\s+recent\s+(?:days|weeks))\b",
        lambda m, t, h: (t - timedelta(days=30), t),
    ),
    # a while ago, a while back, some time ago: two weeks to six months ago
    (
        r"\b(?:a\s+(?:little\s+|good\s+)?while|some\s+time)\s+(?:ago|back)\b",
        lambda m, t, h: (t - timedelta(days=183), t - timedelta(days=14)),
    ),
    # over the holidays, the Christmas holidays, at Christmas, New Year
    (
        r"\b(?:over|during|at|for|since|after|before|around|in)\s+the\s+(?:christmas\s+|xmas\s+|winter\s+)?holidays\b"
        r"|\b(?:at|over|around|since|after|before)\s+(?:christmas|xmas|(?:the\s+)?new\s+year'?s?(?:\s+eve)?)\b",
        lambda m, t, h: holidays(t),
    ),
]
_CJK_NUM = r"[0-9一二两兩三四五六七八九十１２３４]"
_ZH: list[tuple[str, Resolver]] = [
    # 第三季度, 2024年第三季度, 第3四半期 (ja)
    (
        rf"(?:(?P<year>\d{{4}})年\s*)?第\s*(?P<n>{_CJK_NUM})\s*(?:季度|四半期)",
        lambda m, t, h: quarter(_cjk_int(m["n"]), _year(m), None, t),
    ),
    (
        r"(?P<w>上|这|這|本|下)(?:个|個|一)?季度|(?P<wj>前|今|来)四半期",
        lambda m, t, h: relative_quarter(
            {
                "上": "last",
                "这": "this",
                "這": "this",
                "本": "this",
                "下": "next",
                "前": "last",
                "今": "this",
                "来": "next",
            }[m["w"] or m["wj"]],
            t,
        ),
    ),
    # 去年夏天, 今年的春季, 夏天 (zh); 去年の夏, 今年の冬 (ja)
    (
        r"(?P<y>去年|今年|前年|明年|昨年|来年)(?:的|の)?(?P<s>春|夏|秋|冬)(?:天|季)?",
        lambda m, t, h: _cjk_season(
            m["s"], {"去年": -1, "昨年": -1, "今年": 0, "前年": -2, "明年": 1, "来年": 1}[m["y"]], t, h
        ),
    ),
    (r"(?P<s>春|夏|秋|冬)(?:天|季)", lambda m, t, h: _cjk_season(m["s"], None, t, h)),
    # 上个月初, 这个月中旬, 3月下旬, 先月末, 今月上旬
    (
        rf"(?P<m>上(?:个|個)?月|这(?:个|個)?月|這(?:个|個)?月|本月|先月|今月|(?P<n>{_CJK_NUM}{{1,2}})\s*月)\s*的?(?P<p>初め|初|上旬|中旬|下旬|底|末)",
        lambda m, t, h: _cjk_month_part(m, t),
    ),
    # 周末, 上周末, 这个周末 (zh); 週末, 先週末, 今週末 (ja)
    (
        r"(?P<q>上|这|這|本|先|今)?(?:个|個)?(?:周|週)末",
        lambda m, t, h: weekend("last" if m["q"] in ("上", "先") else None, t),
    ),
    # 前几天, 几天前 (zh); 数日前 (ja)
    (r"前几天|几天前|幾天前|数日前|數日前", lambda m, t, h: vague_ago("a few", "day", t)),
    (r"大前天", lambda m, t, h: (t - timedelta(days=3),) * 2),  # before 前天 is read inside it
    (r"前天|一昨日|おととい", lambda m, t, h: (t - timedelta(days=2),) * 2),
    # 上周一 (Monday of last week, not the latest Monday), 上上周二, 这周三, 星期五, 周日 (zh); not 每周一
    # (every Monday), 一周一次 (once a week) nor 周一到周五 (weekdays)
    (
        r"(?<![每到至个個\d一二两兩三四五六七八九十几幾])(?P<w>上上|上|这|這|本)?(?:个|個)?(?:周|週|星期|礼拜|禮拜)"
        r"(?P<d>[一二三四五六日天])(?![到至~～\-－次])",
        lambda m, t, h: _cjk_weekday(m, t),
    ),
    # 先週の月曜日, 今週金曜, 先々週の火曜日; 月曜日 (ja); not 毎週月曜日
    (r"(?P<w>先々|先先|先|今)週の?(?P<j>[月火水木金土日])曜日?", lambda m, t, h: _cjk_weekday(m, t)),
    (r"(?<!週)(?P<j>[月火水木金土日])曜日", lambda m, t, h: _cjk_weekday(m, t)),
    # 去年的今天, 一年前的今天, 上个月的今天 (zh); 去年の今日, 一年前の今日, 先月の今日 (ja)
    (
        r"(?P<y>去年|昨年|一年前|1年前)(?:的|の)?(?:今天|今日)|(?P<m>上(?:个|個)?月|先月|一(?:个|個|か|ヶ|ケ)?月前)(?:的|の)?(?:今天|今日)",
        lambda m, t, h: (same_day_back(t, "year" if m["y"] else "month"),) * 2,
    ),
]


def _cjk_season(s: str, years_back: int | None, today: date, hemisphere: str) -> tuple[date, date]:
    """去年夏天: the season of last year (named by the year its first month is in); 夏天: the latest."""
    name = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}[s]
    year = None if years_back is None else today.year + years_back
    return season(name, year, None, today, hemisphere)


_CJK_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_JA_WEEKDAY = {"月": 0, "火": 1, "水": 2, "木": 3, "金": 4, "土": 5, "日": 6}
_CJK_WEEKS_BACK = {"上上": 2, "上": 1, "这": 0, "這": 0, "本": 0, "先々": 2, "先先": 2, "先": 1, "今": 0}


def _cjk_weekday(m: re.Match[str], today: date) -> tuple[date, date]:
    """A weekday of a named week (上周一: Monday of last week), else the latest before today."""
    weekday = _CJK_WEEKDAY[m["d"]] if _g(m, "d") else _JA_WEEKDAY[m["j"]]
    back = _g(m, "w")
    day = weekday_of_week(weekday, _CJK_WEEKS_BACK[back], today) if back else latest_weekday(weekday, today)
    return day, day


def _cjk_month_part(m: re.Match[str], today: date) -> tuple[date, date]:
    word = m["m"]
    if m["n"]:
        first = which_month(_cjk_int(m["n"]), None, None, today)
    elif word.startswith(("上", "先")):
        first = add_months(today.replace(day=1), -1)
    else:
        first = today.replace(day=1)
    part = {"初": "early", "初め": "early", "上旬": "early", "中旬": "mid", "下旬": "late", "底": "late", "末": "late"}[
        m["p"]
    ]
    return month_part(first, part)


# Compiled on the first question that passes the gate (~3 ms of a cold search otherwise).
_COMPILED = [(lazy_re(p, re.IGNORECASE), r) for p, r in _EN] + [(lazy_re(p), r) for p, r in _ZH]
_GATE = re.compile(
    r"(?i)\b(?:early|mid|late|beginning|middle|end|last|this|next|previous|prior|preceding|q[1-4]|quarter|spring|summer|autumn|fall|"
    r"winter|weekends?|earlier|couple|few|several|holidays|christmas|xmas|new\s+years?|day\s+before|today|morning|"
    r"afternoon|before\s+last|other\s+day|same\s+time|recently|lately|late|recent|while|some\s+time|start|week|half|h[12]|"
    rf"fortnight|(?:mon|tues|wednes|thurs|fri|satur|sun)day|{HOLIDAY_GATE})\b|\d(?:st|nd|rd|th)\b|\w(?:st|nd|rd|th)\s+of\b|"
    r"[季夏冬春秋末旬初周週几幾数數前昨期今拜曜]"
)


def find_calendar_phrases(query: str, today: date, hemisphere: str = "northern") -> list[CalendarPhrase]:
    """The calendar phrases of `query`, leftmost first, never overlapping."""
    typed = query.replace("\u2019", "'")  # a phone's apostrophe ("New Year’s Eve"); the same positions
    if not typed or not _GATE.search(typed):
        return []
    found: list[CalendarPhrase] = []
    for rx, resolve in _COMPILED:
        for m in rx.finditer(typed):
            if any(m.start() < p.end_pos and p.start_pos < m.end() for p in found):
                continue
            window = resolve(m, today, hemisphere)
            if window is None:
                continue
            start, end = window
            found.append(CalendarPhrase(m.start(), m.end(), query[m.start():m.end()].strip(), start, end))
    return sorted(found, key=lambda p: p.start_pos)


def calendar_window(text: str, today: date, hemisphere: str = "northern") -> tuple[date, date] | None:
    """The window of a value that is one calendar phrase as a whole (`--since "last March"`)."""
    phrases = find_calendar_phrases(text, today, hemisphere)
    if len(phrases) == 1 and not re.sub(r"\W", "", text[: phrases[0].start_pos] + text[phrases[0].end_pos:]):
        return phrases[0].start, phrases[0].end
    return None
