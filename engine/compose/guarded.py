"""`PluginGuard`: a backend from another package answers through memsift's error model. A crash
inside it (an AttributeError, a KeyError: the plugin's bug) becomes a BackendError naming the
plugin and its package, so the CLI prints one line and exits 7, MCP returns a value, and a
fallback policy (if the plugin has one) answers instead; the traceback goes to the debug log.
Errors memsift defines (MemsiftError) and memsift's own bad-value errors (ValueError raised by
memsift's request parsing: a date that is no date) pass as they are; a ValueError from the plugin or
its storage library ("table not found") is the plugin failing, not the user. memsift's own backends
are not wrapped: a bug of ours should show its traceback."""

from __future__ import annotations

from typing import Any

from ..errors import BackendError, MemsiftError
from ..logging import get_logger
from .wrapped import WrappedManager

__all__ = ["PluginGuard"]

log = get_logger("memsift.plugins")


class PluginGuard(WrappedManager):

    def __init__(self, inner: Any, origin: str) -> None:
        super().__init__(inner)
        self._origin = origin  # "the notes-grep backend (memsift-throwaway 0.0.1)"

    async def _call(self, doing: str, name: str, *args: Any, **kw: Any) -> Any:
        try:
            return await getattr(self._inner, name)(*args, **kw)
        except MemsiftError:
            raise
        except Exception as exc:  # noqa: BLE001  (a plugin's bug, told in one line)
            if isinstance(exc, ValueError) and _raised_by_memsift(exc):
                raise
            log.debug("plugin crashed", plugin=self._origin, doing=doing, exc_info=True)
            raise BackendError(f"{self._origin} failed while {doing}: {type(exc).__name__}: {exc}") from None

    async def answer(self, request: Any) -> Any:
        return await self._call("searching", "answer", request)

    async def read(self, path: str, *args: Any, **kw: Any) -> Any:
        return await self._call("reading", "read", path, *args, **kw)

    async def status(self, **kw: Any) -> Any:
        return await self._call("reading its status", "status", **kw)

    async def sync(self, **kw: Any) -> Any:
        return await self._call("syncing", "sync", **kw)

    async def aclose(self) -> None:
        await self._call("closing", "aclose")


def _raised_by_memsift(exc: BaseException) -> bool:
    """The error was raised in memsift's own code (the innermost frame is memsift.engine's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).startswith("memsift.engine.")
