"""The days a chunk of memory speaks of, line by line.

A line's day is the timestamp opening it (`[2023-05-07 23:50] …`, `- 2026-09-03: chose …`; a date
followed by a time or a separator — a date a sentence merely mentions is no timestamp), carried
over the continuation lines of that entry; else the nearest dated heading above it; else a date in
the file's name (`memory/2023-05-08.md`). A chunk speaks of every day its lines do (`days`, what
filters and windows judge); its `day` is the timestamp of its first line of content when it has
one, else the heading or file day in force there (what it is shown and grouped by).

Computed once per file at index time by every backend and stored with each chunk, so time windows
and decay read columns instead of re-reading files; `chunk_line_days` recomputes a chunk's line
days from its text and its day at query time (to show the lines of a window, and to decay by the
day of the lines that matched). Only unambiguous forms count: ISO and slashed year-first dates, and
"8 May 2023" / "May 8, 2023" in headings.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import date
from typing import Iterable, Protocol

__all__ = ["ChunkDay", "chunk_days", "chunk_line_days", "file_name_day", "date_in_text", "day_at", "SOURCES",
           "NOTE_DATES_REVISION"]

SOURCES = ("timestamp", "heading", "file name")
# Bumped whenever the rules change: indexes store the days, so a new rule means a rebuild.
# 2: days per line (a chunk speaks of every day its lines do); a timestamp needs a time or separator after it.
# 3: file names dated 2023_05_08, 2023.05.08, 20230508 or memory/2023/05/08.md.
# 4: file names dated in words, as Roam exports its daily pages ("November 2nd, 2026.md").
# 5: a sync tool's conflict copy is dated as its note (not by the moment of the conflict its name adds).
NOTE_DATES_REVISION = 5


@dataclass(frozen=True)
class ChunkDay:
    day: str | None  # ISO YYYY-MM-DD
    source: str | None  # one of SOURCES
    days: tuple[str, ...] = ()  # every day the chunk's lines speak of, sorted (`day` included)


class _ChunkLike(Protocol):
    @property
    def start_line(self) -> int: ...

    @property
    def text(self) -> str: ...


_ISO = re.compile(r"(?<![\d.])(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?![\d/])")
_MONTHS = "january february march april may june july august september october november december".split()
_MONTH_WORD = "|".join([f"{m[:3]}(?:{m[3:]})?" for m in _MONTHS] + ["sept"])  # May, Sep, Sept, September
_NAMED = re.compile(
    rf"\b(?:(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_WORD})\b\.?,?\s+(\d{{4}})"
    rf"|({_MONTH_WORD})\b\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}}))\b",
    re.IGNORECASE,
)
# A day in a file's name, one separator throughout: 2023-05-08, Logseq's journals 2023_05_08, Dendron's
# 2023.05.08, or none, 20230508 (a year from 1900 on: eight digits are often an id); or the last three
# folders and name of a year/month/day layout, 2023/05/08.md.
_FILE_DAY = re.compile(r"(?<!\d)(\d{4})([-_.]?)(\d{2})\2(\d{2})(?!\d)")
# What a sync tool adds to a note's name when two machines changed it: Syncthing's
# `.sync-conflict-20261103-101010-ABCDEFG`, ownCloud's `_conflict-20261103-101010`, Dropbox's, Nextcloud's
# and Obsidian Sync's ` (… conflicted copy …)`. Its date is the conflict's, not the note's.
_CONFLICT_MARK = re.compile(r"\.sync-conflict-\d{8}-\d{6}(?:-[A-Z0-9]{7})?|_conflict-\d{8}-\d{6}"
                            r"| \([^()]*\bconflicted copy\b[^()]*\)", re.IGNORECASE)
_FOLDERS_DAY = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})(?!\d)[^/]*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# A line that opens with a timestamp: "2023-05-08 14:02 …", "[2023-05-08] …", "- 2023/05/08: …". A
# date followed by neither a time nor a separator ("  2026-11-30." wrapping a sentence) is a mention.
_LINE_STAMP = re.compile(r"^\s*(?:[-*+]\s+)?[\[(]?\s*(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?![\d/])"
                         r"(?=\s*(?:[\]),:;|–—-]|T?\d{1,2}[:.h]\d{2}\b))")
_BULLET = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s")


def _iso(y: str, m: str, d: str) -> str | None:
    try:
        return date(int(y), int(m), int(d)).isoformat()
    except ValueError:
        return None  # 2023-02-30 is not a day


def date_in_text(text: str) -> str | None:
    """The first unambiguous date in a heading's text, as ISO."""
    for m in _ISO.finditer(text):
        day = _iso(*m.groups())
        if day:
            return day
    return _named_day(text)


def _named_day(text: str) -> str | None:
    """"8 May 2023", "May 8th, 2023" in a text, as ISO."""
    m = _NAMED.search(text)
    if m is None:
        return None
    if m.group(1):
        d, mon, y = m.group(1), m.group(2), m.group(3)
    else:
        mon, d, y = m.group(4), m.group(5), m.group(6)
    return _iso(y, str([x[:3] for x in _MONTHS].index(mon[:3].lower()) + 1), d)


def file_name_day(path: str) -> str | None:
    """The day in the file's name (`2023-05-08.md`, `2023_05_08.md`, `2023.05.08.md`, `20230508.md`,
    `standup-2023-05-08.md`, `May 8th, 2023.md`), or in a year/month/day layout (`2023/05/08.md`);
    not a folder's alone: `2023-05-08/notes.md` is a folder of that day's files, which may speak of any."""
    path = _CONFLICT_MARK.sub("", path.replace("\\", "/"))
    name = path.rsplit("/", 1)[-1]
    for m in _FILE_DAY.finditer(name):
        year, _sep, month, day = m.groups()
        if _sep or year >= "1900":
            found = _iso(year, month, day)
            if found:
                return found
    layout = _FOLDERS_DAY.search(path)
    if layout:
        return _iso(*layout.groups())
    return _named_day(name)  # Roam's daily pages, "November 2nd, 2026.md"; "Monday, 2 November 2026.md"


def _heading_days(lines: list[str]) -> tuple[list[int], list[str | None]]:
    """For each heading line (1-based), the date in force below it: its own, else its nearest
    dated ancestor's (a `## Ideas` under `# 2023-05-08` is still that day's; a new `# Ideas`
    at the same level ends it)."""
    starts: list[int] = []
    days: list[str | None] = []
    stack: list[tuple[int, str | None]] = []  # (level, date in force)
    in_fence = False
    for n, line in enumerate(lines, start=1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        m = None if in_fence else _HEADING.match(line)
        if not m:
            continue
        level = len(m.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        own = date_in_text(m.group(2))
        inherited = next((d for _lvl, d in reversed(stack) if d), None)
        stack.append((level, own or inherited))
        starts.append(n)
        days.append(own or inherited)
    return starts, days


def _stamp(line: str) -> str | None:
    m = _LINE_STAMP.match(line)
    return _iso(*m.groups()) if m else None


def _line_days(lines: list[str], base: list[str | None]) -> list[str | None]:
    """Each line's day: its own timestamp, carried over the indented continuation of that entry,
    else `base` (the heading or file day in force there). Blank lines and headings speak of no day."""
    out: list[str | None] = []
    carry: str | None = None
    for line, fallback in zip(lines, base):
        if not line.strip() or _HEADING.match(line):
            carry = None
            out.append(None)
            continue
        stamp = _stamp(line)
        if stamp:
            carry = stamp
        elif _BULLET.match(line) or not line[:1].isspace():
            carry = None  # a new entry: the stamp of the one before does not run on
        out.append(stamp or carry or fallback)
    return out


def _file_line_days(path: str, lines: list[str]) -> tuple[list[str | None], list[str | None]]:
    """(each line's day, each line's heading-or-file day) of a whole file."""
    from_name = file_name_day(path)
    starts, days = _heading_days(lines)
    base: list[str | None] = []
    for n in range(1, len(lines) + 1):
        i = bisect.bisect_right(starts, n) - 1
        base.append((days[i] if i >= 0 else None) or from_name)
    return _line_days(lines, base), base


def _chunk_day(lines: list[str], line_days: list[str | None], base: list[str | None]) -> ChunkDay:
    days = tuple(sorted({d for d in line_days if d}))
    first = next((k for k, line in enumerate(lines) if line.strip() and not _HEADING.match(line)), None)
    if first is None:
        return ChunkDay(None, None, days)
    stamp = _stamp(lines[first])
    if stamp:
        return ChunkDay(stamp, "timestamp", days)
    if base[first]:
        return ChunkDay(base[first], "heading", days)  # chunk_days tells a heading's day from the file name's
    return ChunkDay(None, None, days)


def chunk_days(path: str, text: str, chunks: Iterable[_ChunkLike]) -> list[ChunkDay]:
    """Each chunk's day and days (and where its day came from), in the chunks' order."""
    from_name = file_name_day(path)
    lines = text.splitlines()
    line_days, base = _file_line_days(path, lines)
    starts, heading_days = _heading_days(lines)
    out: list[ChunkDay] = []
    for c in chunks:
        own = c.text.splitlines()
        lo = max(0, c.start_line - 1)
        span_days = line_days[lo: lo + len(own)]
        span_base = base[lo: lo + len(own)]
        if len(span_days) < len(own):  # a chunk that is not the file's lines (a transcript's flattened text)
            span_days = _line_days(own, [from_name] * len(own))
            span_base = [from_name] * len(own)
        day = _chunk_day(own, span_days, span_base)
        if day.source == "heading":  # the heading's or the file name's?
            first = next(k for k, line in enumerate(own) if line.strip() and not _HEADING.match(line))
            i = bisect.bisect_right(starts, c.start_line + first) - 1
            if not (i >= 0 and heading_days[i] == day.day):
                day = ChunkDay(day.day, "file name", day.days)
        out.append(day)
    return out


def chunk_line_days(path: str, text: str, day: str | None, source: str | None) -> list[str | None]:
    """At query time: the days of a chunk's lines from its path, text and stored day. Unstamped
    lines fall back to a dated heading inside the chunk, else the heading or file day the chunk was
    dated by (when its day is not a line's own timestamp), else the file name's date."""
    lines = text.split("\n")
    base: list[str | None] = []
    current = day if source in ("heading", "file name") else file_name_day(path)
    for line in lines:
        m = _HEADING.match(line)
        if m:
            current = date_in_text(m.group(2)) or current
        base.append(current)
    return _line_days(lines, base)


@dataclass(frozen=True)
class _Line:
    start_line: int
    text: str


def day_at(path: str, text: str, line: int, shown: str = "") -> ChunkDay:
    """The day (and days) of a hit another tool found (QMD): the file's lines from `line` on, as
    many as the shown text has."""
    return chunk_days(path, text, [_Line(line, shown)])[0]

