"""Every command's time budget, and the watchdog that keeps the user told while it waits.

A command runs within its budget (`memory.limits.<command>`, `--timeout`, `$MEMSIFT_TIMEOUT`);
`index` also gives up when nothing has moved for `memory.limits.stall` (a hanging endpoint costs
that, not its retries' full length). While nothing moves the watchdog prints a line every
`QUIET_S` seconds naming what the command waits on. When the budget runs out the work is cancelled:
the Markdown files are never written, an index keeps what it held (a sync commits file by file; a
rebuild swaps only when complete), and `CommandTimeout` says what happened and what to do.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator

import anyio

from .durations import check_duration
from .errors import CommandTimeout

__all__ = [
    "CommandTimeout",
    "budget_s",
    "stall_s",
    "run_within",
    "QUIET_S",
    "TIMEOUT_ENV",
    "waiting_on",
    "current_wait",
    "progressed",
    "last_progress",
]

QUIET_S = 10.0  # nothing moved for this long: say what the command waits on
TIMEOUT_ENV = "MEMSIFT_TIMEOUT"


# --- what the command waits on, and when its work last moved -------------------------------------
# Process-wide on purpose: the CLI runs one command per process, and whoever waits (an HTTP call, a
# lock, a sidecar) says so here without being handed anything.
_waits: list[tuple[str, float]] = []
_last_progress = [time.monotonic()]


@contextmanager
def waiting_on(what: str) -> Iterator[None]:
    """While inside: the command waits on `what` ("openai at api.openai.com", "the QMD lock")."""
    entry = (what, time.monotonic())
    _waits.append(entry)
    try:
        yield
    finally:
        try:
            _waits.remove(entry)
        except ValueError:
            pass


def current_wait() -> tuple[str, float] | None:
    """The innermost wait and since when (monotonic), or None."""
    return _waits[-1] if _waits else None


def progressed() -> None:
    """The work moved on (a file checked, a batch embedded)."""
    _last_progress[0] = time.monotonic()


def last_progress() -> float:
    return _last_progress[0]


# --- budgets -------------------------------------------------------------------------------------


def budget_s(settings: Any, command: str, override: str | None = None) -> float | None:
    """The command's budget in seconds: `--timeout` / `$MEMSIFT_TIMEOUT` when given, else
    `memory.limits.<command>`; None for a command without one (watch, mcp serve for ever)."""
    if override:
        return check_duration(override, bare_unit="s") / 1000 or None
    value = getattr(settings.memory.limits, command, None)
    return (check_duration(value, bare_unit="s") / 1000 or None) if value is not None else None


def stall_s(settings: Any) -> float | None:
    value = settings.memory.limits.stall
    return check_duration(value, bare_unit="s") / 1000 or None


def _seconds(value: float) -> str:
    """`0.5 s`, `30 s`: a short budget is not told as "0 s"."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


def _waiting_words() -> str:
    wait = current_wait()
    return f"waiting on {wait[0]} for {time.monotonic() - wait[1]:.0f} s" if wait else "working"


async def run_within(
    fn: Callable[[], Awaitable[Any]],
    *,
    command: str,
    budget: float | None,
    stall: float | None = None,
    say: Callable[[str], None] | None = None,
    budget_from: str = "memory.limits",
    started: float | None = None,
) -> Any:
    """`fn()` within `budget` seconds (and `stall` seconds without progress); `say` gets a line while
    nothing moves for QUIET_S. `started` (monotonic): when the command began, if before this call
    (its config was loaded first: that time counts too)."""
    started = time.monotonic() if started is None else started
    progressed()
    outcome: dict[str, Any] = {}
    every = min([QUIET_S, *(b / 3 for b in (budget, stall) if b)])  # a short budget is told of too

    async def watchdog(scope: anyio.CancelScope) -> None:
        told = started
        while True:
            await anyio.sleep(min(1.0, every / 2))
            now = time.monotonic()
            quiet = now - max(last_progress(), started)
            if budget is not None and now - started >= budget:
                source = f"memory.limits.{command}" if budget_from == "memory.limits" else budget_from
                outcome["why"] = f"it ran out of its {_seconds(budget)} budget ({source})"
            elif stall is not None and quiet >= stall:
                outcome["why"] = f"nothing moved for {_seconds(stall)} (memory.limits.stall)"
            if "why" in outcome:
                outcome["waiting"] = _waiting_words()
                scope.cancel()
                return
            if say is not None and quiet >= every and now - told >= every:
                told = now
                say(f"memsift {command}: still {_waiting_words()} ({now - started:.0f} s so far)")

    failed: list[Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog, tg.cancel_scope)
        try:
            result = await fn()
        except Exception as exc:  # noqa: BLE001  (raised as it is below, not wrapped in the task group's ExceptionGroup)
            failed.append(exc)
        else:
            tg.cancel_scope.cancel()
            return result
        tg.cancel_scope.cancel()
    if failed:
        raise failed[0]
    # Only reached when the watchdog cancelled the work.
    raise CommandTimeout(
        f"{command} gave up after {_seconds(time.monotonic() - started)}: {outcome['why']}, {outcome['waiting']}. "
        "Nothing was lost: the Markdown files are untouched and the index keeps what it held; run it again "
        "when that answers, or give it longer (--timeout, memory.limits)")
