"""One search as every layer below the door reads it (`SearchRequest`): the query cut and
cleaned, the mode, the result bounds, the since/until filter, the times the question names, and
whether it names only a time ("what did I do yesterday?": its answer is that time's notes, see
`time_only`), with who asks (the session key, and the scope rules' decision once made).

A door builds it once (engine/compose/scoped.build_search: key, scope, options, times read with
the configured hemisphere and clock) and every stage and backend takes it whole (`answer`); a
stage that asks its backend for more hits passes a changed copy (`but`). `KeywordSearch` gives a
manager that answers requests the keyword form `search(query, max_results=…)`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..text import has_cjk
from . import clock
from .fts_query import MAX_QUERY_CHARS, clean_query
from .modes import parse_search_mode
from .time_only import NEARBY_DAYS, names_only_a_time
from .time_query import (
    TimeBound,
    TimeWindow,
    find_time_windows,
    time_filter_for,
    today_window,
    without_time_expressions,
)

if TYPE_CHECKING:
    from ..config.models import QueryConfig
    from ..config.scope import ScopeDecision
    from ..results import SearchAnswer

__all__ = ["SearchRequest", "KeywordSearch", "window_note", "renote_window"]


@dataclass(frozen=True)
class SearchRequest:
    query: str  # as given, cut to MAX_QUERY_CHARS (the answer's echo)
    q: str  # cleaned: what is searched
    mode: str  # auto, hybrid, keyword or vector
    max_results: int | None = None  # as asked; None: the default (`limit`; a stage or QMD may have its own)
    min_score: float | None = None  # as asked; None: the default (`floor`)
    session_key: str | None = None  # the asking chat (None: a local caller)
    explain: bool = False
    now: float | None = None  # what relative times and decay count from (None: the clock)
    candidates: int | None = None  # hits each retrieval side gathers (None: maxResults × candidateMultiplier)
    time_filter: TimeWindow | None = None
    windows: list[TimeWindow] = field(default_factory=list)
    time_only: bool = False  # the question names a time and nothing else to look for
    default_max_results: int = 6  # query.maxResults and query.minScore of the config it was read with
    default_min_score: float = 0.35
    scope: ScopeDecision | None = None  # the scope rules' decision, made once at the door (None: not yet)
    corpus: str | None = None  # memory, sessions or all (None: all); every stage and backend keeps only its hits

    def keeps(self, source: str | None) -> bool:
        """Does a hit of `source` (memory or sessions) belong to the corpus asked for?"""
        return self.corpus in (None, "all") or (source or "memory") == self.corpus

    @classmethod
    def parse(cls, query: str, config: QueryConfig, *, max_results: int | None = None, min_score: float | None = None,
              mode: str | None = None, since: TimeBound = None, until: TimeBound = None, now: float | None = None,
              session_key: str | None = None, explain: bool = False, candidates: int | None = None,
              scope: ScopeDecision | None = None, corpus: str | None = None) -> SearchRequest:
        """ValueError for a mode or a since/until that cannot be read (`BadTimeBound` names which),
        before any work."""
        requested = parse_search_mode(mode)
        hemisphere, zone = config.time.hemisphere, config.time.timezone
        if now is None:  # one moment for the request: $MEMSIFT_NOW or the clock, unless given
            now = clock.now(zone=zone)
        else:
            try:
                clock.check_now(now)
            except ValueError as exc:
                raise ValueError(f"now: {exc}") from None
        time_filter = time_filter_for(since, until, now, hemisphere=hemisphere, zone=zone)
        query = (query or "")[:MAX_QUERY_CHARS]
        q = clean_query(query).strip()
        windows = find_time_windows(q, now, hemisphere=hemisphere, zone=zone) if q and config.time.enabled else []
        if q and config.time.enabled and not windows:  # "what did I do today?": today, and nothing else asked
            today = today_window(q, now, zone)
            windows = [today] if today is not None and names_only_a_time(q, [today]) else []
        return cls(
            query=query, q=q, mode=requested, max_results=max_results, min_score=min_score, session_key=session_key,
            explain=bool(explain), now=now, candidates=candidates, time_filter=time_filter, windows=windows,
            time_only=bool(windows) and names_only_a_time(q, windows),
            default_max_results=config.max_results, default_min_score=config.min_score, scope=scope, corpus=corpus,
        )

    @classmethod
    def denied(cls, query: Any, session_key: str | None, scope: ScopeDecision) -> SearchRequest:
        """A chat the scope rules deny: nothing else of its request is read."""
        return cls(query=query[:MAX_QUERY_CHARS] if isinstance(query, str) else "", q="", mode="auto",
                   session_key=session_key, scope=scope)

    @property
    def limit(self) -> int:
        """Most hits to return: as asked, else the config's query.maxResults."""
        return max(1, int(self.max_results if self.max_results is not None else self.default_max_results))

    @property
    def floor(self) -> float:
        """Lowest score to keep: as asked, else the config's query.minScore."""
        return min(1.0, max(0.0, float(self.min_score if self.min_score is not None else self.default_min_score)))

    def but(self, **changes: Any) -> SearchRequest:
        """A copy with some fields changed (a stage asking its backend for a larger pool)."""
        return replace(self, **changes)

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
        facts: dict[str, Any] = {"time_windows": [w.describe() for w in self.windows] or None,
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


class KeywordSearch:
    """The keyword form of a search, `search(query, max_results=…, since=…)`, for a manager that
    answers `SearchRequest`s (`answer`): the request is read with the manager's own `query_config`.
    It is the caller's own form (tests, benchmarks, a script over one backend): no door's checks,
    no scope rules (those are the scoped stage's, whose `search` is the Python API's door)."""

    @property
    def query_config(self) -> QueryConfig:  # the manager's memorySearch.query
        raise NotImplementedError

    async def answer(self, request: SearchRequest) -> SearchAnswer:
        raise NotImplementedError

    async def search(self, query: str, *, max_results: int | None = None, min_score: float | None = None,
                     session_key: str | None = None, explain: bool = False, now: float | None = None,
                     mode: str | None = None, since: TimeBound = None, until: TimeBound = None,
                     candidates: int | None = None, corpus: str | None = None) -> SearchAnswer:
        return await self.answer(SearchRequest.parse(
            query, self.query_config, max_results=max_results, min_score=min_score, mode=mode, since=since,
            until=until, now=now, session_key=session_key, explain=explain, candidates=candidates, corpus=corpus))
