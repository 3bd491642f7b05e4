"""`FallbackSearchManager`: a primary backend (QMD) with a lazily built fallback.

- Scope rules are not applied here but above every backend (`scoped.py`), so a denied chat never
  reaches the primary or the fallback.
- A primary failure (missing binary, spawn failure, non-zero exit, timeout, unparseable output)
  answers from the fallback backend, recording `fallback: {from, reason}` on the answer and in
  status. The primary is tried again after `retry_after_s`, so it recovers by itself (it is kept,
  not rebuilt: a long-running host's updates and schedule belong to it). QMD waits a minute (a
  failing sidecar costs a process and a timeout); Postgres a few seconds (a refused connection
  costs milliseconds, and a fleet wants its database back as soon as it is).
- `not_covered`: what the primary indexes that the fallback cannot, stated on every fallback.
- `primary_budget_s`: however the primary spends its time (processes, locks, updates), a search
  that has not answered by then is stopped and the fallback answers, saying so.
- `fail_closed` (`memory.qmd.fallback: "none"`): no second index; the answer (and status)
  carries `unavailable`: what was tried, when, what failed, and when the next try is.
"""

from __future__ import annotations

import errno
import time
from typing import Any, Callable

import anyio

from ..logging import get_logger
from ..errors import BackendError
from ..manager import CountsSearchSyncs, IndexesSessions, MarksDirty, SearchManager, SyncReport, WatchesChanges
from ..results import Fallback, ManagerStatus, ReadResult, SearchAnswer
from ..search.request import KeywordSearch, SearchRequest
from .wrapped import declaring

__all__ = ["FallbackSearchManager"]

log = get_logger("memsift.fallback")

BUDGET_SLACK_S = 1.0


class FallbackSearchManager(KeywordSearch):
    def __init__(
        self,
        primary_factory: Callable[[], SearchManager],
        fallback_factory: Callable[[], SearchManager],
        *,
        name: str,
        fail_closed: bool = False,
        retry_after_s: float = 60.0,
        primary_budget_s: float | None = None,
        not_covered: list[str] | None = None,
    ) -> None:
        self._primary_factory = primary_factory
        self._fallback_factory = fallback_factory
        self.backend = name
        self.fail_closed = fail_closed
        self.retry_after_s = retry_after_s
        self.primary_budget_s = primary_budget_s
        self.not_covered = not_covered or None  # stated on every fallback answer and status
        self._primary: SearchManager | None = None
        self._fallback: SearchManager | None = None
        self._failure: tuple[str, float, float] | None = None  # (reason, monotonic time, wall-clock time)
        self._tried_now = False  # this call tried the primary (and it failed), rather than skipping it
        self._change_probe: Any = None  # handed to each backend that checks freshness itself

    # --- plumbing -------------------------------------------------------------------------------

    @property
    def failure_reason(self) -> str | None:
        return self._failure[0] if self._failure else None

    def _primary_usable(self) -> bool:
        return self._failure is None or time.monotonic() - self._failure[1] >= self.retry_after_s

    def primary(self) -> SearchManager:
        if self._primary is None:
            self._primary = self._with_probe(self._primary_factory())
        return self._primary

    def fallback(self) -> SearchManager:
        if self._fallback is None:
            self._fallback = self._with_probe(self._fallback_factory())
        return self._fallback

    def _with_probe(self, manager: SearchManager) -> SearchManager:
        if self._change_probe is not None and (watching := declaring(manager, WatchesChanges)) is not None:
            watching.watch_changes(self._change_probe.view())  # each side sees every change (QMD, builtin)
        return manager

    def watch_changes(self, probe: Any) -> None:
        """The host's exact change check, for the backends that use one (the builtin index, QMD)."""
        self._change_probe = probe
        for m in (self._primary, self._fallback):
            if (watching := declaring(m, WatchesChanges)) is not None:
                watching.watch_changes(probe.view() if probe is not None else None)

    def mark_dirty(self) -> None:
        """Files changed: tell the managers that keep their own freshness state."""
        for m in (self._primary, self._fallback):
            if (marking := declaring(m, MarksDirty)) is not None:
                marking.mark_dirty()

    @property
    def search_syncs(self) -> int:
        """Syncs run by searches, of whichever side counts them (the builtin index)."""
        counting = [declaring(m, CountsSearchSyncs) for m in (self._primary, self._fallback)]
        return sum(c.search_syncs for c in counting if c is not None)

    def _mark_failed(self, exc: BaseException | str) -> str:
        reason = _describe_failure(exc)
        # Info, not a warning: every answer, sync report and status that the failure touches says it
        # in a sentence of its own; at the default verbosity it is said once, there.
        log.info(
            "backend failed; answering from the fallback" if not self.fail_closed else "backend failed",
            backend=self.backend,
            reason=reason,
        )
        self._failure = (reason, time.monotonic(), time.time())
        self._tried_now = True
        return reason

    def _unavailable(self) -> str:
        """Why no answer: what was tried, when, what failed; and when the next try is, when this
        call did not try (the primary is tried at most every `retry_after_s`)."""
        reason, at, wall = self._failure or ("unknown", time.monotonic(), time.time())
        clock = time.strftime("%H:%M:%S", time.localtime(wall))
        if self._tried_now:
            return f"{self.backend} unavailable: {reason} (tried at {clock})"
        ago = time.monotonic() - at
        wait = max(0.0, self.retry_after_s - ago)
        return (f"{self.backend} unavailable: {reason} (last tried at {clock}, {ago:.1f} s ago; "
                f"the next search tries again in {wait:.1f} s)")

    async def _primary_answer(self, request: SearchRequest) -> SearchAnswer | None:
        """The primary's answer, or None when it ran out of its budget (then it is marked failed)."""
        if self.primary_budget_s is None:
            return await self.primary().answer(request)
        # A little slack over the primary's own budget: it stops its processes at the budget itself.
        limit = self.primary_budget_s + BUDGET_SLACK_S
        with anyio.move_on_after(limit):
            return await self.primary().answer(request)
        self._mark_failed(
            f"{self.backend} did not answer within {self.primary_budget_s:.1f} s (memory.qmd.limits.timeoutMs) and "
            f"was stopped"
        )
        return None

    # --- SearchManager --------------------------------------------------------------------------

    @property
    def query_config(self) -> Any:  # the keyword form's: the primary's (both read the same settings)
        return self.primary().query_config

    async def answer(self, request: SearchRequest) -> SearchAnswer:
        started = time.perf_counter()
        self._tried_now = False
        if self._primary_usable():
            try:
                answer = await self._primary_answer(request)
                if answer is not None:
                    self._failure = None
                    return answer
            except (BackendError, OSError) as exc:
                self._mark_failed(exc)
            except BaseExceptionGroup as group:  # a task group's failure: judged by what is inside it
                self._mark_failed(_expected_failure(group))
        reason = self.failure_reason
        if self.fail_closed:
            return SearchAnswer(
                query=request.query,
                results=[],
                backend=self.backend,
                mode="none",
                min_score=request.min_score or 0.0,
                max_results=request.max_results or 0,
                took_ms=round((time.perf_counter() - started) * 1000, 3),
                unavailable=self._unavailable(),
            )
        answer = await self.fallback().answer(request)
        answer.fallback = Fallback(from_=self.backend, reason=reason or "unknown", kind="backend",
                                   not_covered=self.not_covered)
        answer.took_ms = round((time.perf_counter() - started) * 1000, 3)  # the failed attempt's time included
        return answer

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, **kw: Any) -> ReadResult:
        # Reading a file needs no QMD process, so the primary's (path-mapping) reader always serves.
        return await self.primary().read(path, from_line, lines, **kw)

    async def status(self, *, deep: bool = False, session_key: str | None = None) -> ManagerStatus:
        """What a search would do right now: the primary's status while it works; the fallback's
        (with the primary's own facts kept) when the primary failed or does not answer its probe."""
        self._tried_now = False
        primary = await self.primary().status(deep=deep)
        probe_error = (primary.details or {}).get("error") or primary.unavailable
        if probe_error and self._primary_usable():
            self._mark_failed(probe_error)
        if self.fail_closed:
            if probe_error:
                where = f"memory.{self.backend}.fallback"
                return primary.model_copy(update={
                    "unavailable": self._unavailable(),
                    "search_now": f"fail: {self.backend} is unreachable and {where} is \"none\": searches exit 7 "
                                  "until it is back (see Unreachable)"})
            return primary
        if self._primary_usable():
            return primary
        st = await self.fallback().status(deep=deep)
        return st.model_copy(update={"fallback": Fallback(from_=self.backend, reason=self.failure_reason or "",
                                                          kind="backend", not_covered=self.not_covered),
                                     "details": primary.details})

    @property
    def indexes_sessions(self) -> bool:
        """The primary indexes session transcripts itself (Postgres does; QMD exports them)."""
        return bool(_sessions_arg(self.primary(), True))

    async def sync(self, *, force: bool = False, reason: str = "manual", include_sessions: bool = True,
                   **_ignored: Any) -> SyncReport:
        """The primary's sync (the fallback's when it fails). `include_sessions` reaches a backend that
        indexes session transcripts (builtin, Postgres); QMD exports them on its own schedule."""
        try:
            report = await self.primary().sync(
                force=force, reason=reason, **_sessions_arg(self.primary(), include_sessions)
            )
            self._failure = None
            return report
        except (BackendError, OSError, BaseExceptionGroup) as exc:
            failure = self._mark_failed(_expected_failure(exc) if isinstance(exc, BaseExceptionGroup) else exc)
            if self.fail_closed:
                raise
            report = await self.fallback().sync(
                force=force, reason=reason, **_sessions_arg(self.fallback(), include_sessions)
            )
            return report.model_copy(update={"reason": f"{reason} (builtin fallback: {failure})"})

    async def aclose(self) -> None:
        for m in (self._primary, self._fallback):
            if m is not None:
                await m.aclose()
        self._primary = self._fallback = None


def _sessions_arg(manager: SearchManager, include_sessions: bool) -> dict[str, bool]:
    indexing = declaring(manager, IndexesSessions)
    accepts = indexing is not None and indexing.indexes_sessions
    return {"include_sessions": include_sessions} if accepts else {}


def _expected_failure(group: BaseExceptionGroup) -> BaseException:
    """The backend or OS error inside a task group's exception group; anything else (a bug, a
    cancellation) is raised as it is."""
    inner = group.subgroup(lambda e: isinstance(e, (BackendError, OSError)))
    if inner is None or group.subgroup(lambda e: not isinstance(e, (BackendError, OSError, BaseExceptionGroup))):
        raise group
    leaf: BaseException = inner
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


def _describe_failure(exc: BaseException | str) -> str:
    """A failure in words: an OS error says what it could not do where (a full disk, a read-only
    state folder), never only `[Errno 28]`."""
    if isinstance(exc, OSError) and not isinstance(exc, BackendError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        hint = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
                errno.EDQUOT: "the disk quota is used up"}.get(exc.errno or 0)
        return f"cannot write its files: {exc.strerror}{where}" + (f"; {hint}" if hint else "")
    return str(exc) or type(exc).__name__
