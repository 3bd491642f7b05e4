"""`FallbackSearchManager`: a primary backend (QMD) with a lazily built fallback.

- Scope rules are not applied here but above every backend (`scoped.py`), so a denied chat never
  reaches the primary or the fallback.
- A primary failure (missing binary, spawn failure, non-zero exit, timeout, unparseable output)
  answers from the fallback backend, recording `fallback: {from, reason}` on the answer and in
  status. The failed primary is dropped and a fresh one is tried again after `retry_after_s`, so
  the primary recovers by itself.
- `fail_closed` (`memory.qmd.fallback: "none"`): no second index; the answer carries
  `unavailable` with the reason instead.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from .logging import get_logger
from .errors import BackendError
from .manager import SearchManager, SyncReport
from .results import Fallback, ManagerStatus, ReadResult, SearchAnswer

__all__ = ["FallbackSearchManager"]

log = get_logger("memsift.fallback")


class FallbackSearchManager:
    def __init__(
        self,
        primary_factory: Callable[[], SearchManager],
        fallback_factory: Callable[[], SearchManager],
        *,
        name: str,
        fail_closed: bool = False,
        retry_after_s: float = 60.0,
    ) -> None:
        self._primary_factory = primary_factory
        self._fallback_factory = fallback_factory
        self.backend = name
        self.fail_closed = fail_closed
        self.retry_after_s = retry_after_s
        self._primary: SearchManager | None = None
        self._fallback: SearchManager | None = None
        self._failure: tuple[str, float] | None = None  # (reason, when)

    # --- plumbing -------------------------------------------------------------------------------

    @property
    def failure_reason(self) -> str | None:
        return self._failure[0] if self._failure else None

    def _primary_usable(self) -> bool:
        return self._failure is None or time.monotonic() - self._failure[1] >= self.retry_after_s

    def primary(self) -> SearchManager:
        if self._primary is None:
            self._primary = self._primary_factory()
        return self._primary

    def fallback(self) -> SearchManager:
        if self._fallback is None:
            self._fallback = self._fallback_factory()
        return self._fallback

    def mark_dirty(self) -> None:
        """Files changed: tell the managers that keep their own freshness state."""
        for m in (self._primary, self._fallback):
            if m is not None and hasattr(m, "mark_dirty"):
                m.mark_dirty()

    async def _mark_failed(self, exc: Exception) -> str:
        reason = str(exc) or type(exc).__name__
        log.warning("backend failed; answering from the fallback" if not self.fail_closed else "backend failed", backend=self.backend, reason=reason)
        self._failure = (reason, time.monotonic())
        if self._primary is not None:
            await self._primary.aclose()
            self._primary = None  # evicted: the next try builds a fresh one
        return reason

    # --- SearchManager --------------------------------------------------------------------------

    async def search(self, query: str, *, max_results: int | None = None, min_score: float | None = None,
                     session_key: str | None = None, explain: bool = False, **kw: Any) -> SearchAnswer:
        args = dict(max_results=max_results, min_score=min_score, session_key=session_key, explain=explain, **kw)
        reason = self.failure_reason
        if self._primary_usable():
            try:
                answer = await self.primary().search(query, **args)
                self._failure = None
                return answer
            except (BackendError, OSError) as exc:
                reason = await self._mark_failed(exc)
        if self.fail_closed:
            return SearchAnswer(query=query, results=[], backend=self.backend, mode="none", min_score=min_score or 0.0,
                                max_results=max_results or 0, took_ms=0.0, unavailable=f"{self.backend} unavailable: {reason}")
        answer = await self.fallback().search(query, **args)
        answer.fallback = Fallback(**{"from": self.backend, "reason": reason or "unknown"})
        return answer

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, **kw: Any) -> ReadResult:
        # Reading a file needs no QMD process, so the primary's (path-mapping) reader always serves.
        return await self.primary().read(path, from_line, lines, **kw)

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        if self._primary_usable():
            st = await self.primary().status(deep=deep)
            if st.qmd and st.qmd.get("error") and "not found" in st.qmd["error"]:
                self._failure = (st.qmd["error"], time.monotonic())
            else:
                return st
        if self.fail_closed:
            st = await self.primary().status(deep=deep)
            return st.model_copy(update={"fallback": None})
        st = await self.fallback().status(deep=deep)
        return st.model_copy(update={"fallback": Fallback(**{"from": self.backend, "reason": self.failure_reason or ""})})

    async def sync(self, *, force: bool = False, reason: str = "manual", **_ignored: Any) -> SyncReport:
        try:
            report = await self.primary().sync(force=force, reason=reason)
            self._failure = None
            return report
        except (BackendError, OSError) as exc:
            failure = await self._mark_failed(exc)
            if self.fail_closed:
                raise
            report = await self.fallback().sync(force=force, reason=reason)
            return report.model_copy(update={"reason": f"{reason} (builtin fallback: {failure})"})

    async def aclose(self) -> None:
        for m in (self._primary, self._fallback):
            if m is not None:
                await m.aclose()
        self._primary = self._fallback = None
