"""A `SearchManager` around another one: the wrappers above the backends (scope rules, the rerank
stage) own a few attributes and pass every other attribute through to the manager they wrap."""

from __future__ import annotations

from typing import Any

from ..manager import SearchManager

__all__ = ["WrappedManager"]


class WrappedManager:
    """Subclasses list their own attributes in `_OWN` and set them with `object.__setattr__`."""

    _OWN: frozenset[str] = frozenset({"_inner"})

    # Everything else is the wrapped manager's (its backend, `primary`, `mark_dirty`, `sync`, …).
    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)

    @property
    def inner(self) -> SearchManager:
        return self._inner

    # `async with open_manager(...) as m:` (looked up on the type, so not through __getattr__).
    async def __aenter__(self) -> WrappedManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
