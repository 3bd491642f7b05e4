"""Time-only questions: "what did I do yesterday?", "what happened last week?" — questions that name a
time and little else, asked of daily logs whose days are known.

From the LongMemEval sessions (`lme`, one workspace) and the chats set (`chats`, 10 workspaces),
both written as `memory/YYYY-MM-DD.md`, each template is asked about days that have notes, at a
`now` that makes the phrase name that day (or its week, month, quarter, season). Scored at the
default minScore (0.35), as a user gets it:

- `top1`: the first hit is a note of the window;
- `top5`: one of the first five is;
- `empty`: no hit at all, although the window has notes.

    python contrib/bench/timeonly.py                 # both sets, hybrid, the local model
    python contrib/bench/timeonly.py --per-template 20 --sets chats
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Callable

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import load_chats, load_longmemeval  # noqa: E402
from metrics import mean  # noqa: E402
from quality import open_mode, warm_index  # noqa: E402

__all__ = ["TEMPLATES", "time_only", "questions_for"]

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
SEASONS = {"spring": (3, 4, 5), "summer": (6, 7, 8), "autumn": (9, 10, 11), "winter": (12, 1, 2)}  # northern


@dataclass
class Ask:
    template: str
    text: str
    now: float
    start: date
    end: date
    workspace: Path


def _noon(d: date) -> float:
    return datetime(d.year, d.month, d.day, 12, 0).timestamp()


def _month_end(d: date) -> date:
    return (d.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)


def _week(d: date) -> tuple[date, date]:
    monday = d - timedelta(days=d.weekday())
    return monday, monday + timedelta(days=6)


def _season(d: date) -> tuple[str, date, date]:
    for name, months in SEASONS.items():
        if d.month in months:
            year = d.year - (1 if name == "winter" and d.month <= 2 else 0)
            start = date(year, months[0], 1)
            end = _month_end(date(year + (1 if name == "winter" else 0), months[-1], 1))
            return name, start, end
    raise AssertionError(d)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


# Each template: the day a question is about (and the chat's two people, when the set has them) →
# (question, the day it is asked, the window's first and last day), or None when it does not apply.
Template = Callable[[date, random.Random, "tuple[str, str] | None"], "tuple[str, date, date, date] | None"]
TEMPLATES: dict[str, Template] = {
    "on <date>": lambda d, r, _p: (
        r.choice(
            [
                f"What did we talk about on {MONTHS[d.month - 1]} {d.day}?",
                f"What happened on {d.isoformat()}?",
                f"What did I do on the {_ordinal(d.day)} of {MONTHS[d.month - 1]}?",
                f"Can you give me a recap of {MONTHS[d.month - 1]} {d.day}?",
            ]
        ),
        d + timedelta(days=r.randint(3, 20)),
        d,
        d,
    ),
    "yesterday": lambda d, r, _p: (
        r.choice(
            [
                "What did I do yesterday?",
                "What did we talk about yesterday?",
                "Anything new from yesterday?",
                "Remind me what we discussed yesterday.",
            ]
        ),
        d + timedelta(days=1),
        d,
        d,
    ),
    # The chats name their two people: a question that names them names no topic (every note is theirs).
    "A and B on <date>": lambda d, r, p: (
        None
        if p is None
        else (
            f"What did {p[0]} and {p[1]} talk about on {MONTHS[d.month - 1]} {d.day}?",
            d + timedelta(days=r.randint(3, 20)),
            d,
            d,
        )
    ),
    "<person> yesterday": lambda d, r, p: (
        None
        if p is None
        else (
            r.choice([f"What did {p[0]} do yesterday?", f"What did {p[1]} and I talk about yesterday?"]),
            d + timedelta(days=1),
            d,
            d,
        )
    ),
    "N days ago": lambda d, r, _p: (lambda n: (f"What did we talk about {n} days ago?", d + timedelta(days=n), d, d))(
        r.randint(2, 6)
    ),
    "the day before yesterday": lambda d, r, _p: (
        "What happened the day before yesterday?",
        d + timedelta(days=2),
        d,
        d,
    ),
    "a couple of days ago": lambda d, r, _p: (
        "What did we discuss a couple of days ago?",
        d + timedelta(days=2),
        d - timedelta(days=1),
        d + timedelta(days=1),
    ),
    "last week": lambda d, r, _p: (
        "What happened last week?",
        _week(d)[1] + timedelta(days=r.randint(1, 7)),
        *_week(d),
    ),
    "earlier this week": lambda d, r, _p: (
        None if d.weekday() == 6 else ("What did I do earlier this week?", d + timedelta(days=1), _week(d)[0], d)
    ),
    "the weekend": lambda d, r, _p: (
        None
        if d.weekday() < 5
        else (
            "What did we talk about over the weekend?",
            _week(d)[1] + timedelta(days=1),
            _week(d)[1] - timedelta(days=1),
            _week(d)[1],
        )
    ),
    "in <month>": lambda d, r, _p: (
        f"What did we discuss in {MONTHS[d.month - 1]}?",
        _month_end(d) + timedelta(days=r.randint(1, 25)),
        d.replace(day=1),
        _month_end(d),
    ),
    "last <month>": lambda d, r, _p: (
        f"What happened last {MONTHS[d.month - 1]}?",
        _month_end(d) + timedelta(days=r.randint(20, 200)),
        d.replace(day=1),
        _month_end(d),
    ),
    "mid-/early/late <month>": lambda d, r, _p: (
        lambda part, lo, hi: (
            f"What did we talk about in {part} {MONTHS[d.month - 1]}?",
            _month_end(d) + timedelta(days=r.randint(5, 60)),
            lo,
            hi,
        )
    )(
        *(
            ("early", d.replace(day=1), d.replace(day=10))
            if d.day <= 10
            else ("mid-", d.replace(day=11), d.replace(day=20))
            if d.day <= 20
            else ("late", d.replace(day=21), _month_end(d))
        )
    ),
    "in Q<n>": lambda d, r, _p: (
        lambda q: (
            f"What did we talk about in Q{q}?",
            _month_end(date(d.year, 3 * q, 1)) + timedelta(days=r.randint(5, 60)),
            date(d.year, 3 * q - 2, 1),
            _month_end(date(d.year, 3 * q, 1)),
        )
    )((d.month - 1) // 3 + 1),
    "last <season>": lambda d, r, _p: (
        lambda name, lo, hi: (f"What happened last {name}?", hi + timedelta(days=r.randint(10, 80)), lo, hi)
    )(*_season(d)),
    # Last, so that the other templates draw the same questions as before it was added.
    "today": lambda d, r, _p: (
        r.choice(
            [
                "What did I do today?",
                "What have we talked about today?",
                "Anything new so far today?",
                "Recap today for me.",
            ]
        ),
        d,
        d,
        d,
    ),
}


def _people(ws: Path) -> tuple[str, str] | None:
    """The chats set's two people, as its MEMORY.md names them ("- Priya and Tomas are …")."""
    try:
        m = re.search(r"^- (\w+) and (\w+) ", (ws / "MEMORY.md").read_text(encoding="utf-8"), re.M)
    except OSError:
        return None
    return (m.group(1), m.group(2)) if m else None


def questions_for(days: dict[Path, list[date]], per_template: int, seed: int = 7) -> list[Ask]:
    """`per_template` questions of each template, about days that have notes, spread over the workspaces."""
    rng = random.Random(seed)
    pool = [(ws, d) for ws, ds in sorted(days.items()) for d in ds]
    people = {ws: _people(ws) for ws in days}
    out = []
    for name, make in TEMPLATES.items():
        picked = 0
        for ws, d in rng.sample(pool, len(pool)):
            made = make(d, rng, people[ws])
            if made is None:
                continue
            text, asked, start, end = made
            out.append(Ask(name, text, _noon(asked), start, end, ws))
            picked += 1
            if picked >= per_template:
                break
    return out


def _day_of(path: str) -> date | None:
    stem = Path(path).stem
    try:
        return date.fromisoformat(stem)
    except ValueError:
        return None


def _in(hit: Any, a: Ask) -> bool:
    d = _day_of(hit.path)
    return d is not None and a.start <= d <= a.end


async def time_only(work: Path, sets: tuple[str, ...] = ("lme", "chats"), per_template: int = 40,
                    extra: dict[str, Any] | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for set_name in sets:
        if set_name == "lme":
            lme = load_longmemeval(work / "data")
            workspaces = [lme.workspace]
        else:
            workspaces = load_chats(work / "data").workspaces
        days = {ws: sorted(d for p in (ws / "memory").glob("*.md") if (d := _day_of(str(p)))) for ws in workspaces}
        asks = questions_for(days, per_template)
        per: dict[str, list[dict[str, float]]] = defaultdict(list)
        took: list[float] = []
        state = work / "state" / ("lme" if set_name == "lme" else "evidence-chats")
        for ws in workspaces:
            ws_state = state if set_name == "lme" else state / ws.name
            await warm_index("hybrid", ws, ws_state, lambda _m: None)
            manager = open_mode("hybrid", ws, ws_state, extra)
            try:
                await manager.search("warm up", max_results=1)
                for a in (a for a in asks if a.workspace == ws):
                    t0 = time.perf_counter()
                    answer = await manager.search(a.text, now=a.now)  # the default minScore: as a user asks
                    took.append((time.perf_counter() - t0) * 1000)
                    hits = answer.results
                    per[a.template].append({"top1": float(bool(hits) and _in(hits[0], a)),
                                            "top5": float(any(_in(h, a) for h in hits[:5])), "empty": float(not hits)})
            finally:
                await manager.aclose()
        figures = {
            t: {m: round(mean(x[m] for x in rows), 3) for m in ("top1", "top5", "empty")} | {"questions": len(rows)}
            for t, rows in per.items()
        }
        every = [x for rows in per.values() for x in rows]
        figures["all"] = {m: round(mean(x[m] for x in every), 3) for m in ("top1", "top5", "empty")} | {
            "questions": len(every)
        }
        figures["latency_ms_p50"] = round(sorted(took)[len(took) // 2], 1)
        out[set_name] = figures
        say(f"Time-only questions ({set_name}):")
        for t, f in figures.items():
            if isinstance(f, dict):
                say(f"  {t:26} top1 {f['top1']:.3f}  top5 {f['top5']:.3f}  empty {f['empty']:.3f}  ({f['questions']})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--sets", default="lme,chats")
    ap.add_argument("--per-template", type=int, default=40)
    ap.add_argument("--out", type=Path, help="write the figures as JSON")
    args = ap.parse_args()
    figures = anyio.run(lambda: time_only(args.work, tuple(args.sets.split(",")), args.per_template))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
