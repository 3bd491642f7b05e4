"""A `SearchManager` around another one: the stages above a backend (scope rules, the rerank stage,
the evidence ranker, the plugin guard) change some calls and pass the rest on, each by name here; a search is passed
whole, as one `SearchRequest`.

Nothing else is passed through: the optional protocols of engine/manager.py (`WatchesChanges`,
`CountsSearchSyncs`, …) belong to the backend that declares them, and the host finds it with
`declaring(manager, Protocol)` down the `inner` chain, rather than every stage pretending to have
whatever the backend has."""

from __future__ import annotations

from typing import Any

from ..manager import SearchManager, SyncReport
from ..results import ManagerStatus, ReadResult, SearchAnswer
from ..search.request import KeywordSearch, SearchRequest

__all__ = ["WrappedManager", "declaring", "backend_of"]


class WrappedManager(KeywordSearch):
    """Subclasses set `_inner` (through `__init__`) and override what their stage changes. A search
    comes down as one `SearchRequest` (`answer`); `search(query, …)` is its keyword form."""

    def __init__(self, inner: SearchManager) -> None:
        self._inner = inner

    @property
    def inner(self) -> SearchManager:
        return self._inner

    @property
    def backend(self) -> str:
        return self._inner.backend

    @property
    def query_config(self) -> Any:  # what the keyword form reads a request with: the backend's
        return self._inner.query_config

    async def answer(self, request: SearchRequest) -> SearchAnswer:
        return await self._inner.answer(request)

    async def read(
        self, path: str, from_line: int | None = None, lines: int | None = None, **options: Any
    ) -> ReadResult:
        return await self._inner.read(path, from_line, lines, **options)

    async def status(self, **options: Any) -> ManagerStatus:
        return await self._inner.status(**options)

    async def sync(self, **options: Any) -> SyncReport:
        return await self._inner.sync(**options)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> WrappedManager:  # `async with open_manager(...) as m:`
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def declaring(manager: Any, protocol: Any) -> Any:
    """The manager of the stack that declares `protocol` (the first, from the top), or None.
    (Typed loosely: mypy refuses a Protocol class where `type[P]` is expected.)"""
    while manager is not None:
        if isinstance(manager, protocol):
            return manager
        manager = manager.inner if isinstance(manager, WrappedManager) else None
    return None


def backend_of(manager: Any) -> Any:
    """The manager at the bottom of the stack: the backend (or the fallback router above it)."""
    while isinstance(manager, WrappedManager):
        manager = manager.inner
    return manager
