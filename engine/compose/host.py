"""Keeping a manager fresh in a long-running process (`memsift watch`, the MCP server).

Starts, in one task group: a first sync, the file watcher (`sync.watch`), interval syncs
(`sync.intervalMinutes`), the session-transcript delta watcher (`sessions` source), and the QMD
sidecar's own schedule (boot, `update.interval`, `embedInterval`). Cancelling the group stops all.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import anyio

from ..logging import get_logger
from ..config import ResolvedConfig
from ..manager import CountsSearchSyncs, HasPrimary, IndexesSessions, RunsInBackground, SearchManager, WatchesChanges
from ..config.coverage import with_qmd_coverage
from .wrapped import declaring
from ..files.session_watch import SessionDeltaTracker, SessionWatcher
from ..files.watcher import MemoryWatcher

__all__ = ["serve_freshness", "SessionDeltaTracker"]

log = get_logger("memsift.host")



async def serve_freshness(
    manager: SearchManager,
    settings: ResolvedConfig,
    *,
    on_event: Callable[[str, Any], None] | None = None,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run until cancelled. `on_event(kind, payload)` reports syncs for status lines."""
    ms = settings.memory_search
    emit = on_event or (lambda *_: None)

    search_syncs = [_search_syncs(manager)]

    async def sync(reason: str, **kw: Any) -> None:
        started = time.perf_counter()
        try:
            report = await manager.sync(reason=reason, **kw)
            payload = {"reason": reason, "report": report, "seconds": time.perf_counter() - started}
            if reason == "watch":
                # A search in the debounce window synced the change first: say so, not "0 indexed".
                by_search = _search_syncs(manager) > search_syncs[0]
                search_syncs[0] = _search_syncs(manager)
                if by_search and not (report.files_indexed or report.files_removed):
                    payload["alreadyIndexed"] = True
            emit("synced", payload)
        except Exception as exc:  # logged and reported; the next trigger retries
            log.warning("sync failed", reason=reason, error=str(exc))
            emit("error", {"reason": reason, "error": str(exc)})

    # Armed before the first sync, so no change slips between that sync's scan and the probe.
    probe = _install_probe(manager, settings)
    try:
        await _serve(manager, settings, ms, sync, emit, task_status)
    finally:
        if probe is not None and (watching := declaring(manager, WatchesChanges)) is not None:
            watching.watch_changes(None)
            probe.close()


def _install_probe(manager: SearchManager, settings: ResolvedConfig) -> Any:
    """Give the backend an exact "did memory files change?" check for its searches."""
    watching = declaring(manager, WatchesChanges)
    if watching is None or "memory" not in settings.memory_search.sources:
        return None
    from ..files.change_probe import memory_change_probe  # noqa: PLC0415

    probe = memory_change_probe(settings)  # the same files as the index and the watcher
    watching.watch_changes(probe)
    return probe


async def _serve(manager: SearchManager, settings: ResolvedConfig, ms: Any, sync: Callable[..., Any],
                 emit: Callable[[str, Any], None], task_status: anyio.abc.TaskStatus[None]) -> None:
    async with anyio.create_task_group() as tg:
        sessions = _session_watcher(manager, settings, lambda: sync("session-delta", include_sessions=True))
        if sessions is not None:
            sessions.baseline()  # before the first sync: a transcript that grows while it runs is counted
        await sync("start")
        guard = declaring(manager, HasPrimary)
        backend = guard.primary() if guard is not None else None  # QMD's, behind its fallback
        if isinstance(backend, RunsInBackground):
            try:
                await backend.start_background(tg)
            except Exception as exc:
                log.warning("qmd scheduler not started", error=str(exc))
        if ms.sync.watch and "memory" in ms.sources:
            async def on_change(paths: set[str]) -> None:
                emit("changed", {"files": len(paths)})
                await sync("watch", include_sessions=False) if _accepts_sessions(manager) else await sync("watch")

            # The files the builtin index covers, QMD's collections included (config/coverage.py).
            watcher = MemoryWatcher(with_qmd_coverage(settings), on_change)
            await tg.start(lambda task_status: watcher.run(task_status=task_status))
        if ms.sync.interval_minutes and ms.sync.interval_minutes > 0:
            tg.start_soon(_every, ms.sync.interval_minutes * 60, lambda: sync("interval"))
        if sessions is not None:
            await tg.start(lambda task_status: sessions.run(task_status=task_status))
        task_status.started()
        emit("ready", {})
        await anyio.sleep_forever()


def _search_syncs(manager: SearchManager) -> int:
    """How many syncs searches have run (the builtin index counts them, also as a fallback; 0 for
    other backends)."""
    counting = declaring(manager, CountsSearchSyncs)
    return counting.search_syncs if counting is not None else 0


def _accepts_sessions(manager: SearchManager) -> bool:
    """Whether the backend indexes session transcripts itself (builtin, Postgres, the kit's plugins;
    not QMD, which exports them on its own schedule): it says so (`IndexesSessions`)."""
    indexing = declaring(manager, IndexesSessions)
    return indexing is not None and indexing.indexes_sessions


async def _every(seconds: float, fn: Callable[[], Any]) -> None:
    while True:
        await anyio.sleep(seconds)
        await fn()


def _session_watcher(manager: SearchManager, settings: ResolvedConfig,
                     sync: Callable[[], Any]) -> SessionWatcher | None:
    """The transcripts' watch, where they are a source the backend indexes itself."""
    if "sessions" not in settings.memory_search.sources or not _accepts_sessions(manager):
        return None
    from ..files.transcripts import sessions_folder  # noqa: PLC0415

    # Not made when missing (it may be OpenClaw's): the watch starts once it appears.
    s = settings.memory_search.sync.sessions
    return SessionWatcher(sessions_folder(settings), SessionDeltaTracker(int(s.delta_bytes), int(s.delta_messages)),
                          sync)
