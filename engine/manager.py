"""The `SearchManager` protocol: one async interface over every backend, and the optional
protocols the runtime looks for (a backend implements those that apply to it; the wrappers above
it pass them through)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Protocol, runtime_checkable

from .records import Record, spec
from .results import Fallback, ManagerStatus, ReadResult, SearchAnswer

__all__ = ["SearchManager", "SyncReport", "WatchesChanges", "MarksDirty", "IndexesSessions", "CountsSearchSyncs",
           "RunsInBackground", "HasPrimary"]


class SyncReport(Record):
    """What one sync did (camelCase in JSON)."""

    reason: str
    backend: str = "builtin"
    full_reindex: bool = False
    reindex_cause: str | None = None
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_skipped: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    chunks_from_cache: int = 0
    took_ms: float = 0.0
    # Why chunks written or found without vectors still have none (the provider failed); they stay
    # searchable by keyword and the next sync tries again.
    vectors_error: str | None = None
    # The embedding provider failed and the index was built (or kept) with the fallback provider.
    fallback: Fallback | None = None
    notes: list[str] = spec(factory=list)  # what the backend did, in words (QMD: collections, update, embed)


@runtime_checkable
class SearchManager(Protocol):
    @property
    def backend(self) -> str:
        """Its name ("builtin", "qmd", a plugin's): answers, status and sync reports carry it."""
        ...

    @property
    def query_config(self) -> Any:
        """The memorySearch.query config its keyword form (`search`) reads a request with."""
        ...

    async def answer(self, request: Any) -> SearchAnswer:
        """One search, as one `SearchRequest` (engine/search/request.py) built once at the door:
        the question read (cut, cleaned, its times with the configured hemisphere and `now`), the
        mode, the bounds as asked (`limit`/`floor` give the defaults), since/until as a window,
        the asking chat, `explain`, and `candidates` (how many hits each retrieval side gathers,
        default maxResults × candidateMultiplier, at most 200; the evidence ranker's stage sets it
        for its pool). Every stage and backend takes it whole; a stage that asks for more passes a
        changed copy (`request.but(...)`)."""
        ...

    async def search(
        self,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        explain: bool = False,
        now: float | None = None,
        mode: str | None = None,
        since: str | date | datetime | float | None = None,
        until: str | date | datetime | float | None = None,
        candidates: int | None = None,
    ) -> SearchAnswer:
        """The keyword form (`KeywordSearch` gives it to every manager): the request built from
        these and answered. `mode`: None or "auto" runs what the config says; "keyword", "vector"
        or "hybrid" picks the retrieval for this search. `since`/`until`: keep hits of those days,
        inclusive (ValueError for a value that is no date). On the stack `open_manager` returns it
        is the Python API's door: the scope rules and every door's checks apply."""
        ...

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   session_key: str | None = None, max_chars: int | None = None, offset: int = 0) -> ReadResult:
        """`session_key`: the asking chat, judged by the scope rules (as for `search`).
        `max_chars`: return at most this many characters (the file is streamed; never more than
        16 Mi characters: `truncated`, `nextFrom` and `nextOffset` say where the rest starts).
        `offset`: skip that many characters (UTF-16 units) of the first line."""
        ...

    async def status(self, *, deep: bool = False, session_key: str | None = None) -> ManagerStatus: ...

    async def sync(self, *, force: bool = False, reason: str = "manual") -> SyncReport: ...

    async def aclose(self) -> None: ...


# --- optional protocols: what the host (compose/host.py) and the fallback use when a backend has it


@runtime_checkable
class WatchesChanges(Protocol):
    """Takes the host's exact "did memory files change?" check (files/change_probe.py), so a
    search syncs only when something changed (builtin, Postgres); None removes it."""

    def watch_changes(self, probe: Any) -> None: ...


@runtime_checkable
class MarksDirty(Protocol):
    """Keeps its own freshness state, told when files changed."""

    def mark_dirty(self) -> None: ...


@runtime_checkable
class IndexesSessions(Protocol):
    """Indexes session transcripts itself (builtin, Postgres; not QMD, which exports them on its own
    schedule) when `indexes_sessions` is true: its `sync` takes `include_sessions`."""

    indexes_sessions: bool

    async def sync(
        self, *, force: bool = False, reason: str = "manual", include_sessions: bool = True
    ) -> SyncReport: ...


@runtime_checkable
class CountsSearchSyncs(Protocol):
    """Counts the syncs its searches ran (so `watch` can say a change was already indexed)."""

    search_syncs: int


@runtime_checkable
class RunsInBackground(Protocol):
    """Has background work of its own to run while a host serves (QMD's update/embed schedule)."""

    async def start_background(self, task_group: Any) -> None: ...


@runtime_checkable
class HasPrimary(Protocol):
    """A guard over a primary backend with a fallback (compose/fallback.py)."""

    def primary(self) -> SearchManager: ...

