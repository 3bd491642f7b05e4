"""A workspace of daily notes dated relative to a given day (its "today"), for questions that name a topic and a time
(issue "time that holds"): the right note is in the window the question names, and older notes
share its words ("week", "meeting", "fixed", the month's name, the day's number)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

# Days the time questions are asked on (the doors fix their clock with $MEMSIFT_NOW): month and year
# ends, and a leap year's 1 March, so no test depends on the day it runs.
FIXED_DAYS = [date(2026, 12, 2), date(2026, 12, 31), date(2027, 1, 1), date(2027, 3, 1), date(2028, 3, 1)]
DOORS_DAY = date(2027, 1, 1)  # the door matrix's day: "last month" and "last week" cross a year


def noon(day: date) -> float:
    """POSIX seconds of `day` at noon, local time: the `now` a test asks its questions at."""
    return datetime(day.year, day.month, day.day, 12).timestamp()


def note_days(root: Path) -> set[date]:
    """The days a workspace already has daily notes of (memory/YYYY-MM-DD.md)."""
    days = set()
    for note in (root / "memory").glob("*.md"):
        try:
            days.add(date.fromisoformat(note.stem[:10]))
        except ValueError:
            pass
    return days


@dataclass(frozen=True)
class TimeWorkspace:
    root: Path
    today: date
    empty_day: date  # a day without notes (its number is in a note months away)
    nearest_to_empty: date  # the note closest to it, 3 days before

    def question_for_empty_day(self) -> str:
        return f"what did I do on {self.empty_day.strftime('%B')} {self.empty_day.day}?"

    @property
    def last_month(self) -> str:
        return (self.today.replace(day=1) - timedelta(days=1)).strftime("%B")


def _last_month_day(today: date, day: int) -> date:
    return (today.replace(day=1) - timedelta(days=1)).replace(day=day)


def _empty_day(today: date, taken: set[date]) -> date:
    """A day 20-60 days ago numbered 10-23, with no note within 2 days of it."""
    for back in range(25, 61):
        d = today - timedelta(days=back)
        if 10 <= d.day <= 23 and all(abs((d - t).days) > 2 for t in taken):
            return d
    raise AssertionError("no free day")


def write_time_workspace(root: Path, today: date, *, with_memory_md: bool = True) -> TimeWorkspace:
    monday = today - timedelta(days=today.weekday())
    notes: dict[date, str] = {
        today: "- 10:00 Lea found a memory leak in the upload service and sent a patch.\n",
        today
        - timedelta(days=1): "- 12:30 Met Björn Hansen from the platform team for lunch; he runs the build farm.\n",
        monday - timedelta(days=5): "- 15:00 Fixed HER-95: invoices were rounded twice when the currency changed.\n",
        _last_month_day(today, 2): "- 11:00 Decided to move the event bus to NATS; Kafka stays for the audit log.\n",
        # Older notes that share the questions' words.
        today - timedelta(days=140): "- 09:00 Lea joined the mobile team; she will pair with Sam after one week.\n"
        "- 16:00 Lea asked for a week of onboarding before taking tickets.\n",
        today - timedelta(days=250): "- 14:00 Architecture meeting: we meet every second Tuesday to review designs.\n",
        today - timedelta(days=110): "- 10:30 Fixed the flaky login test and fixed the bug in the retry helper.\n",
    }
    # A September-like note, two months back, about a decision postponed into last month.
    two_back = (_last_month_day(today, 1) - timedelta(days=1)).replace(day=15)
    notes[two_back] = (
        notes.get(two_back, "")
        + f"- 17:00 The vote on the schema was postponed to {_last_month_day(today, 12).strftime('%B')} 12; we decide "
          f"then.\n"
    )
    # In the margin of last month (a week before it): its words and meaning are closer to "what did we
    # decide in <last month>?" than the decision itself; the in-window decision must still come first.
    margin = _last_month_day(today, 1) - timedelta(days=7)
    notes[margin] = (
        notes.get(margin, "")
        + f"- 16:00 The vote on the queue was postponed to {_last_month_day(today, 12).strftime('%B')} 12; nothing "
          f"decided yet.\n"
    )
    empty = _empty_day(today, set(notes) | note_days(root))  # no day of the workspace's own notes either
    near = empty - timedelta(days=3)
    notes[near] = notes.get(near, "") + "- 09:30 Wrote the quarterly report draft and sent it to Priya.\n"
    far = today - timedelta(days=300)
    notes[far] = (
        notes.get(far, "") + f"- {empty.day}:00 Dinner with the neighbours; the {empty.day}th is their anniversary.\n"
    )
    memory = root / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    for day, body in notes.items():
        note = memory / f"{day.isoformat()}.md"
        if note.exists():  # a workspace that has a note of that day already (the door matrix's yesterday)
            note.write_text(note.read_text(encoding="utf-8").rstrip("\n") + "\n" + body, encoding="utf-8")
        else:
            note.write_text(f"# {day.isoformat()}\n\n{body}", encoding="utf-8")
    if with_memory_md:
        (root / "MEMORY.md").write_text(
            "# Memory\n\n- Lea is the backend lead; Björn runs the build farm.\n", encoding="utf-8"
        )
    return TimeWorkspace(root, today, empty, near)


# The questions of the issue, each with a word of its in-window note (checked on the first hit).
TOPIC_QUESTIONS = [
    ("what did Lea do this week?", "memory leak"),
    ("who did I meet yesterday?", "Björn Hansen"),
    ("what bug did I fix last week?", "HER-95"),
]


def topic_questions(tw: TimeWorkspace) -> list[tuple[str, str]]:
    return [*TOPIC_QUESTIONS, (f"what did we decide in {tw.last_month}?", "event bus")]
