"""Time expressions in a question ("last Tuesday", "in November 2022", "两周前") → day windows.

Spotting is ours: a few patterns that only fire on what is plainly a time expression (a month
name next to a day or year or after "in"/"since", a weekday, "N units ago", ISO dates, CJK date
forms), so version numbers (`2.10`), ids and "how many weeks ago" never count. Resolving a spotted
span against the search's `now` is dateparser's job (English, Chinese, Japanese); its answer's
period (day, week, month, year) decides how wide the window is. Windows are calendar days of the
user's time zone (`query.time.timezone`, else the machine's), the zone daily-log file names are
written in.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any, Union

from ..config.zones import LAST_SECOND, day_seconds, is_moment, wall_clock
from ..text import compat_form
from .holidays import HOLIDAY_GATE
from .time_phrases import calendar_window, find_calendar_phrases

__all__ = [
    "TimeWindow",
    "TimeBound",
    "BadTimeBound",
    "find_time_windows",
    "today_window",
    "without_time_expressions",
    "time_filter_for",
    "parse_day",
]

TimeBound = Union[str, date, datetime, float, None]  # a since/until value as the API takes it


@dataclass(frozen=True)
class TimeWindow:
    """Calendar days from `start` to `end`, both inclusive; None is open-ended."""

    start: date | None
    end: date | None
    text: str  # the expression as the question wrote it
    zone: str | None = field(default=None, compare=False)  # whose days (an IANA name; None: this machine's)

    def distance_days(self, day: date) -> int:
        """0 inside the window, else how many days outside it."""
        if self.start is not None and day < self.start:
            return (self.start - day).days
        if self.end is not None and day > self.end:
            return (day - self.end).days
        return 0

    def day_range(self) -> tuple[str, str]:
        """The window as inclusive ISO day bounds, open ends widened (for `day BETWEEN ? AND ?`)."""
        return (self.start.isoformat() if self.start else "0000-00-00"), (
            self.end.isoformat() if self.end else "9999-99-99"
        )

    def mtime_ns_range(self) -> tuple[int, int]:
        """The window as inclusive modification times in nanoseconds (undated files), its days taken in
        its zone."""
        lo = _mtime_ns(self.start, self.zone, end=False) if self.start else NS_MIN
        hi = _mtime_ns(self.end, self.zone, end=True) if self.end else NS_MAX
        return lo, hi

    def widened(self, before: timedelta, after: timedelta) -> TimeWindow:
        """The window with `before` more days ahead of it and `after` more behind, within the
        calendar (a window of 9999, or of the year 1, ends there instead of overflowing)."""
        def shift(day: date | None, by: timedelta) -> date | None:
            if day is None:
                return None
            try:
                return day + by
            except OverflowError:
                return date.max if by > timedelta(0) else date.min
        return replace(self, start=shift(self.start, -before), end=shift(self.end, after))

    @property
    def length_days(self) -> int | None:
        if self.start is None or self.end is None:
            return None
        return (self.end - self.start).days + 1

    def describe(self) -> str:
        start = self.start.isoformat() if self.start else "…"
        end = self.end.isoformat() if self.end else "…"
        span = start if self.start == self.end else f"{start}..{end}"
        return f"{span} ({self.text!r})"


NS_MIN, NS_MAX = -(2**63), 2**63 - 1  # a modification time in signed 64-bit nanoseconds: 1677 to 2262


def _mtime_ns(day: date, zone: str | None, *, end: bool) -> int:
    """The first (`end`: last) nanosecond of `day`, clamped to what a modification time can be: a
    day past those years (0001-01-01 or 9999-12-31, the open bounds scripts send) leaves that side
    open instead of overflowing the database's integers."""
    try:
        seconds = day_seconds(day, zone, end=end)
    except (ValueError, OverflowError):  # year 0 or 10000 once the zone's offset is applied
        return NS_MIN if day.year < 1970 else NS_MAX
    return max(NS_MIN, min(NS_MAX, int(seconds * 1e9)))


# --- spotting ------------------------------------------------------------------------------------

_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
          r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?")
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d{2}"
_NUMBER = (r"(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
           r"a\s+couple\s+of|couple\s+of|a\s+few|few|several)")
_UNIT = r"(?:day|week|month|year)s?"
# Words that turn a point into an open window, and words that introduce a bare month or year.
_OPEN_BEFORE = r"(?:before|until|till|prior\s+to)"
_OPEN_AFTER = r"(?:since|after)"
_INTRO = r"(?:in|during|since|after|before|until|till|of|from|last|this|early|late|mid|end\s+of|beginning\s+of)"

_ENGLISH = [
    # ISO and slashed dates: 2023-05-08, 2023/05/08, 05/08/2023; a year-month 2023-05 alone.
    rf"\b{_YEAR}[-/](?:1[0-2]|0?[1-9])[-/](?:[12]\d|3[01]|0?[1-9])\b(?![-/.\d])",
    rf"(?<![\d./-])(?:1[0-2]|0?[1-9])/(?:[12]\d|3[01]|0?[1-9])/{_YEAR}\b(?![-/.\d])",
    # a day that cannot be a month comes first (24/12/2024); dotted dates are day.month.year (24.12.2024)
    rf"(?<![\d./-])(?:1[3-9]|2\d|3[01])/(?:1[0-2]|0?[1-9])/{_YEAR}\b(?![-/.\d])",
    rf"(?<![\d./-])(?:[12]\d|3[01]|0?[1-9])\.(?:1[0-2]|0?[1-9])\.{_YEAR}\b(?![-/.\d])",
    rf"(?<![\d./-]){_YEAR}-(?:1[0-2]|0[1-9])\b(?![-/.\d])",
    # 8 May (2023), 8th of May, May 8(th)(, 2023), May 2023, November 2022.
    rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?\b",
    rf"\b{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b(?![.:]\d)",
    rf"\b{_MONTH},?\s+{_YEAR}\b",
    # in May, since March, last December: a bare month needs a word that makes it a time.
    rf"\b{_INTRO}\s+{_MONTH}(?:\s+{_DAY})?(?:,?\s+{_YEAR})?\b(?![.:]\d)",
    # in 2022, since 2019: a bare year needs one too (and is not a version or an amount).
    rf"\b(?:in|during|since|after|before|until|till|of|from)\s+{_YEAR}\b(?![-/.,]?\d)",
    # last Tuesday, on Friday; not "on Saturday mornings", a habit (time_phrases.py reads a bare weekday).
    rf"\b(?:last|this|past|previous|on|since|after|before|until|till)\s+{_WEEKDAY}\b"
    r"(?!\s+(?:mornings|afternoons|evenings|nights)\b)",
    rf"\b{_NUMBER}\s+{_UNIT}\s+(?:ago|back)\b",
    # the past few weeks, the last 3 days, the past 48 hours, last few weeks: from then until today.
    rf"\bthe\s+(?:past|last)\s+(?:{_NUMBER}\s+)?(?:{_UNIT}|hours?)\b",
    rf"\b(?:past|last)\s+{_NUMBER}\s+(?:{_UNIT}|hours?)\b",
    # Monday morning, Friday night: that day (a weekday with a part of the day is no name)
    rf"\b{_WEEKDAY}\s+(?:morning|afternoon|evening|night)\b",
    # Not "today"/"tonight": a question about now ("a film for tonight?") is not about notes of today.
    r"\b(?:the\s+day\s+before\s+yesterday|yesterday|last\s+night)\b",
    r"\b(?:last|this|past|previous)\s+(?:week|month|year)\b",
]
_CJK_NUM = "〇零一二两三四五六七八九十百"
_CJK = [
    rf"(?:\d{{4}}|[{_CJK_NUM}]{{4}})\s*年\s*(?:\d{{1,2}}|[{_CJK_NUM}]{{1,3}})\s*月(?:\s*(?:\d{{1,2}}|[{_CJK_NUM}]{{1,3}})\s*[日号號])?",
    rf"(?<!\d)(?:\d{{1,2}}|[{_CJK_NUM}]{{1,3}})\s*月\s*(?:\d{{1,2}}|[{_CJK_NUM}]{{1,3}})\s*[日号號]",
    rf"(?<![\d{_CJK_NUM}])(?:\d{{4}}|[{_CJK_NUM}]{{4}})\s*年(?!\s*[\d{_CJK_NUM}])",
    rf"(?<![\d{_CJK_NUM}])(?:\d{{1,2}}|[{_CJK_NUM}]{{1,3}})月份?(?!\s*\d)",
    rf"(?:\d{{1,3}}|[{_CJK_NUM}]{{1,3}})\s*(?:天|日|周|週|星期|个月|個月|ヶ月|か月|カ月|年)\s*(?:前|以前)",
    r"上上?(?:个|個)?(?:星期|礼拜|禮拜|周|週)[一二三四五六日天]?|上(?:个|個)?月|上一?年",
    r"这(?:个|個)?(?:星期|周|週|月)|本(?:周|週|月)|今年|去年|前年|昨年|一昨年",
    r"前天|昨天|今天|昨晚|一昨日|昨日|今日|先週|今週|先月|今月",
]
# "from 2009 to 2014", "between March and May 2023", "from 2023-01-05 to 2023-02-01": one window.
_POINT = rf"(?:{_YEAR}-\d{{2}}-\d{{2}}|(?:{_DAY}\s+)?{_MONTH}(?:\s+{_DAY})?(?:,?\s+{_YEAR})?|{_YEAR})"


@functools.cache
def _spotters() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """The range, English and CJK spotting patterns, compiled on the first question that passes
    the gate: compiling them takes ~40 ms, a third of a cold keyword search's imports."""
    return (
        re.compile(rf"\b(?:from|between)\s+({_POINT})\s+(?:to|and|until|till|through)\s+({_POINT})\b(?![-/.]\d)",
                   re.IGNORECASE),
        re.compile("|".join(f"(?:{p})" for p in _ENGLISH), re.IGNORECASE),
        re.compile("|".join(f"(?:{p})" for p in _CJK)),
    )


_HAS_DIGIT_OR_WORD = re.compile(r"[0-9A-Za-z\u3000-\u30ff\u4e00-\u9fff]")
# A quick gate: most questions name no time at all and leave after one search of this.
_GATE = re.compile(
    rf"\d|{_MONTH[:-3]}|{_WEEKDAY}|\b(?:ago|yesterday|today|tonight|last|this|next|past|previous|prior|preceding|quarter|spring|summer|"
    rf"autumn|fall|winter|weekend|earlier|holidays|christmas|xmas|new\s+years?|other\s+day|recently|lately|late|recent|while|"
    rf"some\s+time|(?:start|beginning|middle|end)\s+of|half|fortnight|week\s+of|(?:days?|weeks?|months?|years?)\s+back|"
    rf"{HOLIDAY_GATE})\b|[年月日天周週前昨今去先季夏冬春秋末旬初几幾数數期拜曜]",
    re.IGNORECASE,
)
_HOW_MANY = re.compile(r"\bhow\s+(?:many|much|long)\s+$", re.IGNORECASE)
_LEAD_OPEN = re.compile(rf"\b({_OPEN_BEFORE}|{_OPEN_AFTER})\s+$", re.IGNORECASE)
_VAGUE = {"a couple of": "2", "couple of": "2", "a few": "3", "few": "3", "several": "3"}
_WEEKDAY_ZH = {"一": "monday", "二": "tuesday", "三": "wednesday", "四": "thursday", "五": "friday",
               "六": "saturday", "日": "sunday", "天": "sunday"}
_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def _cjk_number(s: str) -> str:
    """Chinese numerals up to 99 → digits ("十二" → "12", "两" → "2"); a 4-digit 二〇二三 → 2023."""
    if len(s) == 4 and all(ch in _DIGITS for ch in s):
        return "".join(str(_DIGITS[ch]) for ch in s)
    if "十" in s:
        tens, _, ones = s.partition("十")
        return str((_DIGITS.get(tens, 1) if tens else 1) * 10 + (_DIGITS.get(ones, 0) if ones else 0))
    return "".join(str(_DIGITS[ch]) if ch in _DIGITS else ch for ch in s)


def _normalise_cjk(span: str) -> str:
    m = re.fullmatch(r"上(?:个|個)?(?:星期|礼拜|禮拜|周|週)([一二三四五六日天])", span)
    if m:  # dateparser knows 上周 but not 上周二
        return f"last {_WEEKDAY_ZH[m.group(1)]}"
    span = re.sub(rf"[{_CJK_NUM}]+", lambda m: _cjk_number(m.group(0)), span)
    year = re.fullmatch(r"(\d{4})\s*年", span)
    return year.group(1) if year else span  # a year alone: dateparser read "2015年" as 2015 years ago (year 11)


# --- resolving (dateparser) ---------------------------------------------------------------------

_LOCK = threading.Lock()


def _parse(span: str, languages: tuple[str, ...], base: datetime) -> tuple[date, str] | None:
    """dateparser's reading of one spotted span: the day and its period (day, week, month, year)."""
    from dateparser.date import DateDataParser  # noqa: PLC0415  (imported only when a question names a time)

    # Only the two parsers a spotted span can need (not timestamps, custom formats, digit runs). `base`
    # is already local wall-clock time, read as if in UTC: the same days, and dateparser never asks
    # tzlocal for the zone (which fails on a valid POSIX $TZ such as "UTC0" or "CET-1CEST").
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past", "RETURN_TIME_AS_PERIOD": True,
                "PARSERS": ["relative-time", "absolute-time"], "TIMEZONE": "UTC"}
    with _LOCK:  # dateparser loads its language data lazily, not thread-safely
        data = DateDataParser(languages=list(languages), settings=settings).get_date_data(span)
    if data is None or data.date_obj is None:
        return None
    return data.date_obj.date(), data.period or "day"


def _window(day: date, period: str, text: str) -> TimeWindow:
    if period == "week":
        monday = day - timedelta(days=day.weekday())
        return TimeWindow(monday, monday + timedelta(days=6), text)
    if period == "month":
        first = day.replace(day=1)
        nxt = (first + timedelta(days=32)).replace(day=1)
        return TimeWindow(first, nxt - timedelta(days=1), text)
    if period == "year":
        return TimeWindow(date(day.year, 1, 1), date(day.year, 12, 31), text)
    return TimeWindow(day, day, text)  # day, time, part_of_day


def find_time_windows(query: str, now: float | None = None, *, hemisphere: str = "northern",
                      zone: str | None = None) -> list[TimeWindow]:
    """The day windows a question names, resolved against `now` (POSIX seconds; default: now) as a
    day of `zone` (the user's time zone; None: this machine's)."""
    if not query or not _GATE.search(query):
        return []
    windows = _windows_named(query, wall_clock(now, zone), hemisphere)
    return [replace(w, zone=zone) for w in windows] if zone else windows


def _windows_named(query: str, base: datetime, hemisphere: str) -> list[TimeWindow]:
    windows: list[TimeWindow] = []
    said_at: list[int] = []  # where each window's words start: the windows go out in the question's order
    taken: list[tuple[int, int]] = []
    # Calendar phrases first (time_phrases.py: "last March", "Q3", "last summer", "the weekend"…):
    # read by memsift itself, where a date parser gives one day or nothing.
    for p in find_calendar_phrases(query, base.date(), hemisphere):
        if len(windows) >= MAX_WINDOWS:
            break
        window, text = TimeWindow(p.start, p.end, p.text), p.text
        lead = _LEAD_OPEN.search(query[: p.start_pos])
        if lead:
            word = lead.group(0).strip().lower()
            text = f"{word} {text}"
            window = (TimeWindow(None, p.start - timedelta(days=1), text) if re.match(_OPEN_BEFORE, word)
                      else TimeWindow(p.start, None, text))
        windows.append(window)
        said_at.append(p.start_pos)
        taken.append((p.start_pos, p.end_pos))
    range_re, spot_en, spot_cjk = _spotters()
    for m in range_re.finditer(query):
        if len(windows) >= MAX_WINDOWS:
            break
        first, last = (_parse(m.group(i), ("en",), base) for i in (1, 2))
        if first and last:
            start, end = _window(*first, "").start, _window(*last, "").end
            if start and end and start <= end:
                windows.append(TimeWindow(start, end, m.group(0)))
                said_at.append(m.start())
                taken.append(m.span())
    for pattern, languages in ((spot_en, ("en",)), (spot_cjk, ("zh", "ja"))):
        for m in pattern.finditer(query):
            if len(windows) >= MAX_WINDOWS:
                break  # a pasted text naming hundreds of times: the first ones are enough
            if any(m.start() < b and a < m.end() for a, b in taken):
                continue  # part of a range or a calendar phrase read above
            span = m.group(0).strip()
            before = query[: m.start()]
            if _HOW_MANY.search(before) or not _HAS_DIGIT_OR_WORD.search(span):
                continue  # "how many weeks ago": a question about a duration, not a time
            text = span
            recent = re.match(r"(?i)the\s+(?:past|last)\s+", span) or re.match(rf"(?i)(?:past|last)\s+(?={_NUMBER}\s)",
                                                                              span)
            if recent:  # "the past few weeks": from a few weeks ago until today
                rest = span[recent.end():]
                span = (
                    rest
                    if re.match(_NUMBER, rest, re.IGNORECASE) and not re.match(_UNIT, rest, re.IGNORECASE)
                    else "1 " + rest
                ) + " ago"
            if languages == ("en",):
                span = re.sub(
                    r"^(?:in|during|of|from|since|after|before|until|till|prior\s+to|end\s+of|beginning\s+of|early|late|mid|on)\s+",
                    "",
                    span,
                    flags=re.IGNORECASE,
                )
                span = re.sub(r"(?i)\s+back$", " ago", span)
                dotted = re.fullmatch(r"(\d{1,2})\.(\d{1,2})\.(\d{4})", span)
                if dotted:  # dateparser would read 03.11.2026 as March 11
                    span = f"{dotted[3]}-{int(dotted[2]):02d}-{int(dotted[1]):02d}"
                lowered = span.lower()
                for vague, digit in _VAGUE.items():
                    if lowered.startswith(vague + " "):
                        span = digit + span[len(vague):]
                        break
            else:
                span = _normalise_cjk(span)
                languages = ("en",) if span.startswith("last ") or span.isdigit() else languages
            parsed = _parse(span, languages, base)
            if parsed is None:
                continue
            window = _window(*parsed, text)
            if recent:
                window = TimeWindow(window.start, base.date(), text)
            lead = _LEAD_OPEN.search(before) or re.match(rf"(?i){_OPEN_BEFORE}|{_OPEN_AFTER}", text)
            if lead:
                word = lead.group(0).strip().lower()
                text = text if text.lower().startswith(word) else f"{word} {text}"
                if re.match(_OPEN_BEFORE, word):
                    window = TimeWindow(None, window.start - timedelta(days=1), text) if window.start else window
                else:
                    window = TimeWindow(window.start, None, text)
            windows.append(window)
            said_at.append(m.start())
            if languages == ("en",) and not lead and not recent:
                items, first_year = _listed_after(query, m.end(), span)
                if first_year and (parsed := _parse(f"{span} {first_year}", ("en",), base)):
                    windows[-1] = _window(*parsed, text)  # "in May and June 2022": May of 2022
                for item, said, where in items:
                    if parsed := _parse(item, ("en",), base):
                        windows.append(_window(*parsed, said))
                        said_at.append(where[0])
                        taken.append(where)
    return _distinct([w for _, w in sorted(zip(said_at, windows), key=lambda pair: pair[0])])


def _distinct(windows: list[TimeWindow]) -> list[TimeWindow]:
    """One window per span of days (a text naming 五月三日 a thousand times names one day)."""
    seen: set[tuple[Any, Any]] = set()
    out = []
    for w in windows:
        if (w.start, w.end) not in seen:
            seen.add((w.start, w.end))
            out.append(w)
    return out


# "in March and April", "on Monday or Tuesday", "in 2021, 2022 and 2023": more of the same kind
# after a spotted one, each its own window (a trailing year is shared: "in May and June 2022").
_LIST_SEP = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+)"
_MAY_ENDS_ITEM = re.compile(r"\s*(?:[,.;:!?)]|$|(?:and|or)\b|\d)", re.IGNORECASE)
_KINDS = {"month": rf"{_MONTH}(?:\s+{_YEAR})?", "weekday": _WEEKDAY, "year": _YEAR}


def _listed_after(query: str, pos: int, first: str) -> tuple[list[tuple[str, str, tuple[int, int]]], str | None]:
    """The items listed right after a spotted bare month, weekday or year `first` (its span as
    parsed, the introducing word removed), each as (text to parse, text as written, position),
    and the year the last month gives `first` when only the last has one. A year written after
    the first month goes to the months after it. Nothing for any other kind of span."""
    kind = next((k for k, pat in _KINDS.items() if re.fullmatch(pat, first, re.IGNORECASE)), None)
    if kind is None:
        return [], None
    item_re = re.compile(rf"{_LIST_SEP}({_KINDS[kind]})\b(?![-/.:]\d)", re.IGNORECASE)
    items: list[tuple[str, str, tuple[int, int]]] = []
    while (m := item_re.match(query, pos)) is not None:
        if m.group(1).lower() == "may" and not _MAY_ENDS_ITEM.match(query, m.end()):
            break  # "in March and may it be": the modal
        items.append((m.group(1), m.group(1), m.span(1)))
        pos = m.end()
    if not items or kind != "month":
        return items, None
    first_year = re.search(rf"\s({_YEAR})$", first)
    last_year = re.search(rf"\s({_YEAR})$", items[-1][0])
    year = first_year or last_year
    if year:  # "in March 2022 and April", "in May and June 2022": the other months are of that year
        items = [(_with_year(parse, year.group(1)), said, where) for parse, said, where in items]
    return items, (last_year.group(1) if last_year and not first_year else None)


def _with_year(month: str, year: str) -> str:
    return month if re.search(_YEAR, month) else f"{month} {year}"


_TODAY = re.compile(r"(?i)\b(?:(?:so\s+far\s+)?today|tonight|this\s+evening)\b|今天|今日|今晚|今夜|本日")


def today_window(query: str, now: float | None = None, zone: str | None = None) -> TimeWindow | None:
    """Today, when the question says "today" or "tonight" (今天, 今日). `find_time_windows` does
    not read these: a question about now ("a film for tonight?", "I'm at the store today, what
    did I buy last time?") is not about today's notes. The caller takes this window only for a
    question that asks nothing else ("what did I do today?")."""
    m = _TODAY.search(query or "")
    if m is None:
        return None
    day = wall_clock(now, zone).date()
    return TimeWindow(day, day, m.group(0), zone)


def without_time_expressions(query: str, windows: list[TimeWindow]) -> str:
    """The question without the time expressions its windows were read from (for a search tool
    that wants every word to occur, such as QMD's BM25), or the question itself if nothing remains."""
    out = query
    for w in windows:
        out = re.sub(re.escape(w.text), " ", out, flags=re.IGNORECASE)
    out = " ".join(out.split())
    return out if _HAS_DIGIT_OR_WORD.search(out) else query


# --- explicit filters ----------------------------------------------------------------------------


MAX_TIME_VALUE_CHARS = 100  # a since/until value: a date or a phrase, never a paragraph
MAX_WINDOWS = 16  # the times one question may name (a long pasted text names hundreds)


def _shown(text: str, limit: int = 60) -> str:
    """A value as an error echoes it: its start, never all of a long one."""
    return text if len(text) <= limit else text[:limit] + "…"


def parse_day(value: str | date | datetime | float | int, *, now: float | None = None, what: str = "date",
              end: bool = False, hemisphere: str = "northern", zone: str | None = None) -> date:
    """A `--since`/`--until` value: an ISO date, POSIX seconds, or a phrase ("last week", "last
    March", "2 days ago"). A phrase names a window: its first day, or with `end` its last (so
    `--until "last week"` keeps last week's Sunday)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, (int, float)):
        if not is_moment(value):  # NaN, 1e20, a bool: no day (the calendar failed deep inside)
            raise ValueError(f"{what} {str(value)[:40]!r} is not a date: POSIX seconds go from 0 to {LAST_SECOND}")
        return wall_clock(float(value), zone).date()
    if not isinstance(value, str):
        raise ValueError(f"{what} {str(value)[:40]!r} is not a date: use YYYY-MM-DD, a date, a datetime, POSIX "
                         "seconds or a phrase like \"last week\"")
    text = compat_form(value).strip()  # `２０２６-１１-０５` typed full-width, as a question is read
    if len(text) > MAX_TIME_VALUE_CHARS:  # no date or phrase is this long: refused before any parsing
        raise ValueError(f"{what} {_shown(text)!r} is not a date: {len(text)} characters, use YYYY-MM-DD or a short "
                         f"phrase like \"last week\" (at most {MAX_TIME_VALUE_CHARS})")
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}(?:[T ].*)?", text):
            return date.fromisoformat(text[:10])
        base = wall_clock(now, zone)
        window = calendar_window(text, base.date(), hemisphere)
        if window is not None:
            return window[1] if end else window[0]
        return _phrase_day(text, base, end)
    except ValueError as exc:
        raise ValueError(
            f'{what} {_shown(text)!r} is not a date: use YYYY-MM-DD or a phrase like "last week" ({exc})'
        ) from None


def _phrase_day(text: str, base: datetime, end: bool = False) -> date:
    languages = ("zh", "ja") if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text) else ("en",)
    spoken = re.sub(r"^(?:in|during|on)\s+", "", text, flags=re.IGNORECASE)
    parsed = _parse(_normalise_cjk(spoken) if languages != ("en",) else spoken, languages, base)
    if parsed is None:
        raise ValueError("not understood")
    window = _window(*parsed, text)
    return (window.end if end else window.start) or parsed[0]


class BadTimeBound(ValueError):
    """A since/until value that is no date, or a range that is empty; `bound` names the option
    ("since" or "until"), so every door can spell it its own way."""

    def __init__(self, bound: str, problem: str) -> None:
        super().__init__(problem)
        self.bound = bound


def time_filter_for(since: TimeBound, until: TimeBound, now: float | None = None, *,
                    hemisphere: str = "northern", zone: str | None = None) -> TimeWindow | None:
    """The since/until filter's window (both days inclusive), or None when neither is set: a
    phrase gives its first day to `since` and its last to `until`, so `--since "last March"
    --until "last March"` is that month. ValueError says which value is not a date, or that the
    range is empty."""
    if since in (None, "") and until in (None, ""):
        return None
    said_since, said_until = since, until
    since = _bound(since, now=now, what="since", hemisphere=hemisphere, zone=zone)
    until = _bound(until, now=now, what="until", end=True, hemisphere=hemisphere, zone=zone)
    if since is not None and until is not None and since > until:
        raise BadTimeBound("until", f"since ({since}) is after until ({until}): nothing can match; swap them")
    # The phrase the user gave, where it was one ("since last October"), so the answer says what it read.
    since_text, until_text = _as_said(said_since, since), _as_said(said_until, until)
    if since is not None and until is not None:
        plain = since_text == str(since) and until_text == str(until)
        text = f"{since}..{until}" if plain else f"since {since_text} until {until_text}"
    else:
        text = f"since {since_text}" if until is None else f"until {until_text}"
    return TimeWindow(since, until, text, zone)


def _bound(value: TimeBound, *, what: str, **how: Any) -> date | None:
    if value in (None, ""):
        return None
    try:
        return parse_day(value, what=what, **how)  # type: ignore[arg-type]
    except ValueError as exc:
        raise BadTimeBound(what, str(exc)) from None


def _as_said(said: TimeBound, day: date | None) -> str:
    if day is None or isinstance(said, date) or str(said).strip() == day.isoformat():
        return str(day)
    return " ".join(str(said).split())
