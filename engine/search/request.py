"""One search's arguments as every backend reads them: the query cut and cleaned, the mode, the
result bounds, the since/until filter, the times the question names, and whether it names only
a time ("what did I do yesterday?": its answer is that time's notes, see `time_only`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..text import has_cjk
from .fts_query import MAX_QUERY_CHARS, clean_query
from .modes import parse_search_mode
from .time_only import NEARBY_DAYS, names_only_a_time
from .time_query import TimeBound, TimeWindow, find_time_windows, time_filter_for, today_window, without_time_expressions

if TYPE_CHECKING:
    from ..config.models import QueryConfig
    from ..results import SearchAnswer

__all__ = ["SearchRequest", "window_note", "renote_window"]


@dataclass
class SearchRequest:
    query: str  # as given, cut to MAX_QUERY_CHARS (the answer's echo)
    q: str  # cleaned: what is searched
    mode: str  # auto, hybrid, keyword or vector
    max_results: int
    min_score: float
    time_filter: TimeWindow | None = None
    windows: list[TimeWindow] = field(default_factory=list)
    time_only: bool = False  # the question names a time and nothing else to look for

    @classmethod
    def parse(cls, query: str, config: QueryConfig, *, max_results: int | None, min_score: float | None,
              mode: str | None, since: TimeBound, until: TimeBound, now: float | None) -> SearchRequest:
        """ValueError for a mode or a since/until that cannot be read, before any work."""
        requested = parse_search_mode(mode)
        hemisphere = config.time.hemisphere
        time_filter = time_filter_for(since, until, now, hemisphere=hemisphere)
        query = (query or "")[:MAX_QUERY_CHARS]
        q = clean_query(query).strip()
        windows = find_time_windows(q, now, hemisphere=hemisphere) if q and config.time.enabled else []
        if q and config.time.enabled and not windows:  # "what did I do today?": today, and nothing else asked
            today = today_window(q, now)
            windows = [today] if today is not None and names_only_a_time(q, [today]) else []
        return cls(
            query=query,
            q=q,
            mode=requested,
            max_results=max(1, int(max_results if max_results is not None else config.max_results)),
            min_score=min(1.0, max(0.0, float(min_score if min_score is not None else config.min_score))),
            time_filter=time_filter,
            windows=windows,
            time_only=bool(windows) and names_only_a_time(q, windows),
        )

    @property
    def topic(self) -> str:
        """The question without the times it names: the words the keyword side looks for ("week",
        "October" or "20" in "what did I do on October 20?" name a time, not a topic). A time said
        in CJK stays: a CJK run has no word breaks, so taking it out cuts the words around it
        ("五月艾", a plant, is not May), and its characters are the text's own (the CJK question
        sets lost keyword hit@1 without them: 0.970 → 0.966, 0.932 → 0.930, 0.893 → 0.885)."""
        spoken = [w for w in self.windows if not has_cjk(w.text)]
        return without_time_expressions(self.q, spoken) if spoken else self.q

    def time_facts(self, *, time_only: bool | dict[str, Any] | None) -> dict[str, Any]:
        """The answer's `time_windows`, `time_filter`, `time_only` (whether it was answered as a
        time's notes), and for a time-only answer what it says of the window (`time_only` is then
        the pipeline's window facts: see engine/search/pipeline.time_only_answer): how many days of
        it hold notes, and a sentence when it holds none or more days than are shown."""
        facts = {"time_windows": [w.describe() for w in self.windows] or None,
                 "time_filter": self.time_filter.describe() if self.time_filter else None,
                 "time_only": True if time_only else None}
        if isinstance(time_only, dict):
            facts["time_window_days"] = time_only.get("window_days")
            facts["time_note"] = window_note(facts["time_windows"] or [], facts["time_window_days"] or 0,
                                             time_only.get("shown", 0))
        return facts


def window_note(windows: list[str], window_days: int, shown: int) -> str | None:
    """What a time-only answer says of its windows (as the answer describes them): that they hold no
    notes (and whether the nearest days' are shown instead), or that they hold more days than the
    `shown` notes cover (a time-only answer takes a day's first note before any day's second, so
    `shown` notes cover that many days) and how to see them all."""
    named = "; ".join(windows)
    if window_days == 0:
        if shown:
            return f"no notes in {named}; shown instead: the nearest days' notes, at most {NEARBY_DAYS} days away"
        return f"no notes in {named}, nor within {NEARBY_DAYS} days of it"
    if window_days > shown:
        return (f"{named} holds notes on {window_days} days, {shown} shown: ask for {window_days} results "
                f"(`-n {window_days}`, MCP `maxResults`) for a note of each")
    return None


def renote_window(answer: SearchAnswer) -> None:
    """After a stage above the backend cut a time-only answer to fewer hits, say so again."""
    if answer.time_only and answer.time_window_days is not None:
        answer.time_note = window_note(answer.time_windows or [], answer.time_window_days, len(answer.results))
