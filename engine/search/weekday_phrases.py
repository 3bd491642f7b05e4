"""Weekdays a date parser does not read (time_phrases.py reads them first, in its list's order).

- a weekday said alone at the end of a clause or owning something: "what did I eat Monday?", "the
  gym Sunday and Monday", "who won Sunday's game?" (the latest before today, as "on Monday" is
  read); not before a noun ("the Monday standup"), nor after a word that makes it a habit, a
  deadline or a name ("every Monday", "the deadline is Friday", "by Friday", "Ash Wednesday");
- "this past Friday", "the previous Tuesday" (as "last Friday"); "the Monday before last";
- a weekday of a named week: "Monday of last week", "on Friday last week", "last week's Tuesday",
  "Tuesday the week before last", "Wednesday this week" (weeks run Monday to Sunday).
"""

from __future__ import annotations

import re
from datetime import date
from ..lazy import lazy_re
from .calendar_spans import Resolver, latest_weekday, weekday_of_week

__all__ = ["WEEKDAY_RULES"]

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WD = rf"(?P<wd>{'|'.join(_WEEKDAYS)})"
_WEEKS_BACK = {"this week": 0, "last week": 1, "the week before last": 2}
# Words before a weekday that make it a name, a habit, a deadline or another rule's ("Ash
# Wednesday", "every Monday", "the deadline is Friday", "by Friday", "next Friday", "last Friday").
_NOT_A_DAY_AFTER = lazy_re(
    r"\b(?:ash|good|black|cyber|super|holy|palm|easter|maundy|shrove|fat|blue|spy|girl|man|is|was|are|were|be|"
    r"been|s|by|every|each|next|coming|of|the|a|an|this|that|these|those|some|any|on|last|past|previous|until|"
    r"till|since|after|before|from|to|through|than|for|and|or)\s+$",
    re.IGNORECASE,
)
_DAY_AND_OR = lazy_re(r"day\s+(?:and|or)\s+$", re.IGNORECASE)  # "Monday and Tuesday": both


def _weekday(m: re.Match[str]) -> int:
    return _WEEKDAYS.index(m["wd"].lower())


def _said_weekday(m: re.Match[str], today: date) -> tuple[date, date] | None:
    """A weekday said alone, "what did I eat Monday?", "Sunday's game": the latest one before today
    (as "on Monday"), unless the word before it makes it something else."""
    # The words just before it (a pasted text's many weekdays must not each search all before them).
    start = max(0, m.start() - 40)
    before = m.string[start : m.start()]
    if start:
        before = re.sub(r"^\S*", "", before)  # not a cut word's tail ("…flash Monday" is not "ash Monday")
    owning = m.string.startswith("'s", m.end())
    if not (owning or re.search(r"\w\s+$", before)):
        return None  # "Monday?" alone; `--since Monday` is the date parser's
    if _NOT_A_DAY_AFTER.search(before) and not _DAY_AND_OR.search(before):
        return None
    day = latest_weekday(_weekday(m), today)
    return day, day


def _weekday_of_week(m: re.Match[str], today: date) -> tuple[date, date]:
    day = weekday_of_week(_weekday(m), _WEEKS_BACK[" ".join(m["w"].lower().split())], today)
    return day, day

WEEKDAY_RULES: list[tuple[str, Resolver]] = [
    # Monday of last week, on Friday last week, last week's Tuesday, Monday the week before last: that day
    (
        rf"\b(?:on\s+)?(?:the\s+)?{_WD}\s+(?:of\s+)?(?P<w>last\s+week|this\s+week|the\s+week\s+before\s+last)\b",
        lambda m, t, h: _weekday_of_week(m, t),
    ),
    (
        rf"\b(?P<w>last\s+week|this\s+week|the\s+week\s+before\s+last)(?:'s)?\s+{_WD}\b",
        lambda m, t, h: _weekday_of_week(m, t),
    ),
    # the Monday before last; this past Monday, the previous Friday (as "last Friday")
    (rf"\bthe\s+{_WD}\s+before\s+last\b", lambda m, t, h: (latest_weekday(_weekday(m), t, 1),) * 2),
    (
        rf"\b(?:(?:this|the)\s+)?(?:past|previous)\s+{_WD}\b",
        lambda m, t, h: (latest_weekday(_weekday(m), t),) * 2,
    ),
    # a weekday at the end of a clause ("what did I eat Monday?", "the gym Sunday and…") or owning
    # something ("Sunday's game"); not before a noun ("the Monday standup") nor as a habit ("on Mondays")
    (
        rf"\b{_WD}(?='s\b|(?:\s+(?:morning|afternoon|evening|night))?\s*(?:[?.!,;:)]|$)"
        r"|\s+(?:and|or|at|with|when|while|after|before|around)\b)",
        lambda m, t, h: _said_weekday(m, t),
    ),
]
