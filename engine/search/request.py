"""One search's arguments as every backend reads them: the query cut and cleaned, the mode, the
result bounds, the since/until filter and the times the question names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .fts_query import MAX_QUERY_CHARS, clean_query
from .modes import parse_search_mode
from .time_query import TimeBound, TimeWindow, find_time_windows, time_filter_for

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

    @classmethod
    def parse(cls, query: str, config: QueryConfig, *, max_results: int | None, min_score: float | None,
              mode: str | None, since: TimeBound, until: TimeBound, now: float | None) -> SearchRequest:
        """ValueError for a mode or a since/until that cannot be read, before any work."""
        requested = parse_search_mode(mode)
        time_filter = time_filter_for(since, until, now)
        query = (query or "")[:MAX_QUERY_CHARS]
        q = clean_query(query).strip()
        return cls(
            query=query,
            q=q,
            mode=requested,
            max_results=max(1, int(max_results if max_results is not None else config.max_results)),
            min_score=min(1.0, max(0.0, float(min_score if min_score is not None else config.min_score))),
            time_filter=time_filter,
            windows=find_time_windows(q, now) if q and config.time.enabled else [],
        )

    def time_facts(self) -> dict[str, Any]:
        """The answer's `time_windows` and `time_filter`."""
        return {"time_windows": [w.describe() for w in self.windows] or None,
                "time_filter": self.time_filter.describe() if self.time_filter else None}
