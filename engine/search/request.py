"""One search's arguments as every backend reads them: the query cut and cleaned, the mode, the
result bounds, the since/until filter, the times the question names, and whether it names only
a time ("what did I do yesterday?": its answer is that time's notes, see `time_only`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .fts_query import MAX_QUERY_CHARS, clean_query
from .modes import parse_search_mode
from .time_only import names_only_a_time
from .time_query import TimeBound, TimeWindow, find_time_windows, time_filter_for, today_window

if TYPE_CHECKING:
    from ..config.models import QueryConfig

__all__ = ["SearchRequest"]


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

    def time_facts(self, *, time_only: bool) -> dict[str, Any]:
        """The answer's `time_windows`, `time_filter` and `time_only` (whether it was answered as a
        time's notes: a window without notes is answered by the ordinary blend)."""
        return {"time_windows": [w.describe() for w in self.windows] or None,
                "time_filter": self.time_filter.describe() if self.time_filter else None,
                "time_only": True if time_only else None}
