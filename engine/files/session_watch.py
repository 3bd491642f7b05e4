"""A long-running host's watch over the agent's session transcripts (`sources: ["memory",
"sessions"]`): each transcript's growth is counted, and past `sync.sessions.deltaBytes` or
`deltaMessages` the transcripts are synced, updates batched for `SESSION_DEBOUNCE_S` as OpenClaw does.

As the memory files' watch (watcher.py): armed before the host says it is ready, and what grew
while it armed (or while the host's first sync ran) is counted then, not left for the next message;
where the system's inotify limits are reached it polls (the host ended in an internal error); a
sessions folder deleted and made again is watched again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio

from ..logging import get_logger
from .transcripts import list_transcripts
from .watcher import ARM_DELAY_S, GUARD_S, identity, watch_roots

__all__ = ["SessionDeltaTracker", "SessionWatcher", "SESSION_DEBOUNCE_S"]

log = get_logger("memsift.watch")

SESSION_DEBOUNCE_S = 5.0  # transcript updates are batched (as OpenClaw does; docs/parity.md)


class SessionDeltaTracker:
    """Counts bytes and messages appended to each transcript since it was last indexed."""

    def __init__(self, delta_bytes: int, delta_messages: int) -> None:
        self.delta_bytes, self.delta_messages = delta_bytes, delta_messages
        self.sizes: dict[str, int] = {}
        self.pending: dict[str, list[int]] = {}  # path -> [bytes, messages]

    def baseline(self, paths: list[Path]) -> None:
        for p in paths:
            try:
                self.sizes[str(p)] = p.stat().st_size
            except OSError:
                pass

    def observe(self, path: Path) -> bool:
        """Account for growth of `path`; True when it crossed a threshold (and should sync)."""
        key = str(path)
        try:
            size = path.stat().st_size
        except OSError:
            self.sizes.pop(key, None)
            return True  # deleted: its rows must go
        before = self.sizes.get(key, 0)
        start = 0 if size < before else before  # a shrunk file counts as new
        if size == before and key in self.sizes:
            return False  # nothing appended (a catch-up look, a touch)
        counters = self.pending.setdefault(key, [0, 0])
        counters[0] += size - start
        if counters[0] < self.delta_bytes or self.delta_bytes == 0:
            with open(path, "rb") as fh:
                fh.seek(start)
                counters[1] += fh.read(size - start).count(b"\n")
        self.sizes[key] = size
        hit_bytes = counters[0] >= self.delta_bytes if self.delta_bytes else counters[0] > 0
        hit_msgs = counters[1] >= self.delta_messages if self.delta_messages else counters[1] > 0
        if hit_bytes or hit_msgs:
            # Keep the remainder over the threshold, as the reference does.
            counters[0] = max(0, counters[0] - self.delta_bytes) if self.delta_bytes else 0
            counters[1] = max(0, counters[1] - self.delta_messages) if self.delta_messages else 0
            return True
        return False

    def catch_up(self, paths: list[Path]) -> bool:
        """Count what every transcript (and any gone since the baseline) grew by unseen; True when
        one crossed a threshold."""
        seen = {str(p) for p in paths}
        due = [self.observe(p) for p in paths]
        due += [self.observe(Path(key)) for key in list(self.sizes) if key not in seen]
        return any(due)


class SessionWatcher:
    """Syncs (`sync()`) when the transcripts in `folder` grew past the tracker's thresholds."""

    def __init__(self, folder: Path, tracker: SessionDeltaTracker, sync: Callable[[], Awaitable[Any]]) -> None:
        self.folder, self.tracker, self.sync = folder, tracker, sync
        self._restarts = {"sessions": anyio.Event()}
        self._stop = anyio.Event()

    def baseline(self) -> None:
        """Sizes as indexed: taken before the host's first sync, so what grows while it runs counts."""
        self.tracker.baseline(list_transcripts(self.folder))

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: watch_roots(self._roots, _is_transcript, False, self._on_change,
                                              restarts=self._restarts, name="sessions", stop=self._stop,
                                              debounce_ms=int(SESSION_DEBOUNCE_S * 1000)))
            tg.start_soon(self._folder_guard)
            try:
                await anyio.sleep(ARM_DELAY_S)  # watchfiles arms its watch in a thread when it first runs
                task_status.started()
                await self._catch_up()
                await anyio.sleep_forever()
            finally:
                self._stop.set()
                self._restarts["sessions"].set()

    def _roots(self) -> list[Path]:
        return [self.folder] if self.folder.is_dir() else []  # a linked folder too, as its transcripts are listed

    async def _on_change(self, paths: set[str]) -> None:
        if any([self.tracker.observe(Path(p)) for p in sorted(paths) if _is_transcript(p)]):  # each counted
            await self._sync()

    async def _catch_up(self) -> None:
        if self.tracker.catch_up(list_transcripts(self.folder)):
            await self._sync()

    async def _sync(self) -> None:
        try:
            await self.sync()
        except Exception as exc:  # a failed sync only logs; the next growth retries
            log.warning("sync after a transcript grew failed", error=str(exc))

    async def _folder_guard(self) -> None:
        """Watch the sessions folder again when it was made (or made again) after the watch began."""
        armed = identity(self.folder)
        while not self._stop.is_set():
            await anyio.sleep(GUARD_S)
            now = identity(self.folder)
            if now == armed:
                continue
            armed = now
            self._restarts["sessions"].set()
            await anyio.sleep(ARM_DELAY_S)
            await self._catch_up()  # what was written there before the new watch armed


def _is_transcript(path: str) -> bool:
    return ".jsonl" in Path(path).name
