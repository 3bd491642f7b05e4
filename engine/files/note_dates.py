"""The day a chunk of memory speaks of: a timestamp opening one of its lines, else the nearest dated
heading above it, else a date in the file's name (`memory/2023-05-08.md`).

Computed once per file at index time by every backend and stored with each chunk, so time windows
and decay read one column instead of re-reading files. Only unambiguous forms count: ISO and
slashed year-first dates, and "8 May 2023" / "May 8, 2023" in headings.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Iterable, Protocol

__all__ = ["ChunkDay", "chunk_days", "file_name_day", "date_in_text", "day_at", "day_timestamp", "SOURCES", "NOTE_DATES_REVISION"]

SOURCES = ("timestamp", "heading", "file name")
# Bumped whenever the rules change: indexes store the days, so a new rule means a rebuild.
NOTE_DATES_REVISION = 1


@dataclass(frozen=True)
class ChunkDay:
    day: str | None  # ISO YYYY-MM-DD
    source: str | None  # one of SOURCES


class _ChunkLike(Protocol):
    start_line: int
    text: str


_ISO = re.compile(r"(?<![\d.])(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?![\d/])")
_MONTHS = "january february march april may june july august september october november december".split()
_NAMED = re.compile(
    r"\b(?:(\d{1,2})(?:st|nd|rd|th)?\s+(" + "|".join(m[:3] for m in _MONTHS) + r")[a-z]*\.?,?\s+(\d{4})"
    r"|(" + "|".join(m[:3] for m in _MONTHS) + r")[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}))\b",
    re.IGNORECASE,
)
_FILE_DAY = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# A line that opens with a timestamp: "2023-05-08 14:02 …", "[2023-05-08] …", "- 2023/05/08: …".
_LINE_STAMP = re.compile(r"^\s*(?:[-*+]\s+)?[\[(]?\s*(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?![\d/])")


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
    m = _NAMED.search(text)
    if m:
        if m.group(1):
            d, mon, y = m.group(1), m.group(2), m.group(3)
        else:
            mon, d, y = m.group(4), m.group(5), m.group(6)
        return _iso(y, str([x[:3] for x in _MONTHS].index(mon[:3].lower()) + 1), d)
    return None


def file_name_day(path: str) -> str | None:
    """A YYYY-MM-DD in the file's name (not its folders: `2023-05-08/notes.md` is a folder's date)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    m = _FILE_DAY.search(name)
    return _iso(*m.groups()) if m else None


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


def chunk_days(path: str, text: str, chunks: Iterable[_ChunkLike]) -> list[ChunkDay]:
    """Each chunk's day and where it came from, in the chunks' order."""
    from_name = file_name_day(path)
    lines = text.splitlines()
    starts, days = _heading_days(lines)
    out: list[ChunkDay] = []
    for c in chunks:
        stamp = None
        for line in c.text.splitlines():
            m = _LINE_STAMP.match(line)
            if m and (stamp := _iso(*m.groups())):
                break
        if stamp:
            out.append(ChunkDay(stamp, "timestamp"))
            continue
        # The day in force at the chunk's first line of content (a chunk may open with headings).
        first = next((k for k, line in enumerate(c.text.splitlines()) if line.strip() and not _HEADING.match(line)), 0)
        i = bisect.bisect_right(starts, c.start_line + first) - 1
        if i >= 0 and days[i]:
            out.append(ChunkDay(days[i], "heading"))
        elif from_name:
            out.append(ChunkDay(from_name, "file name"))
        else:
            out.append(ChunkDay(None, None))
    return out


@dataclass(frozen=True)
class _Line:
    start_line: int
    text: str


def day_at(path: str, text: str, line: int, shown: str = "") -> ChunkDay:
    """The day of a hit another tool found (QMD): its shown text's timestamp, else the nearest
    dated heading above `line`, else the file name's date."""
    return chunk_days(path, text, [_Line(line, shown)])[0]


def day_timestamp(day: str) -> float:
    """Local midnight of an ISO day, in POSIX seconds."""
    return datetime.fromisoformat(day).timestamp()
