"""Changing QMD's index (collections, `qmd update`, `qmd embed`), its schedule, and how long a search
may wait for it.

Every mutating call runs under the writer lock (lock.py): QMD crashes on concurrent writers. An
explicit sync (`memsift index`) waits for the lock and runs to the end. A search never waits past
its share of the budget (half of `limits.timeoutMs`; 80 % while no collection is registered yet,
since there is nothing to search before that): it joins the update already
running, or starts one, waits at most that long, then searches what QMD has and says so. In a
long-running host (`start`) the update goes on in the background; in a one-shot process (the CLI)
an update that outlives the wait is stopped, and the answer says how to finish it. Embeds never
run before a search: `memsift index` and the host's schedule run them.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio

from memsift.engine.logging import get_logger
from memsift.engine.manager import SyncReport

from .collections import ManagedCollection, read_index_yml
from .lock import LockBusy, WriterLock
from .process import QmdError, QmdExitError, QmdResult
from .sessions import export_sessions

__all__ = ["QmdMaintenance", "Freshness", "UPDATE_WAIT_SHARE"]

log = get_logger("memsift.qmd")

UPDATE_WAIT_SHARE = 0.5  # of a search's budget, at most, spent waiting for an update first
START_UP_WAIT_SHARE = 0.8  # ... or for the first `collection add`, when there is nothing to search before it
EMBED_BACKOFF_BASE_S = 60.0
EMBED_BACKOFF_CAP_S = 3600.0
_BUSY = ("sqlite_busy", "database is locked", "timed out")
EMBED_STEP = "qmd embed"
_INDEXED_RE = re.compile(r"Indexed:\s*(\d+) new,\s*(\d+) updated,\s*(\d+) unchanged,\s*(\d+) removed")

RunQmd = Callable[..., Awaitable[QmdResult]]


def memory_file_stamps(settings: Any) -> dict[str, tuple[int, int]]:
    """The memory files on disk now (as every backend finds them), path → (mtime_ns, size)."""
    from memsift.engine.files.discovery import discover_memory_files  # noqa: PLC0415

    stamps = {}
    for f in discover_memory_files(settings.workspace, settings.memory_search.extra_paths)[0]:
        try:
            st = os.lstat(f.abs_path)
        except OSError:
            continue
        stamps[f.rel_path] = (st.st_mtime_ns, st.st_size)
    return stamps


@dataclass
class Freshness:
    """What a search learnt while bringing QMD up to date: notes for the answer, whether changes
    may be missing (an update still running or not done), and what it waited for."""

    notes: list[str] = field(default_factory=list)
    pending: bool = False
    waited: list[str] = field(default_factory=list)


@dataclass
class _Job:
    done: anyio.Event = field(default_factory=anyio.Event)
    error: QmdError | None = None


class QmdMaintenance:
    def __init__(self, *, home: Path, index_yml: Path, collections: list[ManagedCollection], run: RunQmd,
                 settings: Any, sessions_dir: Path, export_dir: Path, models_available: Callable[[], bool],
                 models_dir: Path, timeouts: dict[str, float], debounce_s: float, interval_s: float,
                 embed_interval_s: float) -> None:
        self.home, self.index_yml, self.collections, self._run = home, index_yml, collections, run
        self.qmd = settings.memory.qmd
        self.on_search = settings.memory_search.sync.on_search
        self.sessions_dir, self.export_dir = sessions_dir, export_dir
        self.models_available, self.models_dir = models_available, models_dir
        self.command_timeout, self.update_timeout, self.embed_timeout = (
            timeouts["command"], timeouts["update"], timeouts["embed"])
        self.debounce_s, self.interval_s, self.embed_interval_s = debounce_s, interval_s, embed_interval_s
        self.state_file = home / "memsift-state.json"
        self.stamps_file = home / "memsift-files.json"  # the memory files QMD's last update saw: status's changes
        self.settings = settings
        self.lock = WriterLock(home / "qmd.lock")
        self.step: str | None = None  # what the running maintenance is doing right now
        self.host: anyio.abc.TaskGroup | None = None  # a long-running host's task group

    # --- persisted state ------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def save_state(self, **updates: Any) -> None:
        """Best effort: the state (last update, back-off) only informs schedules and status; a full
        disk or a read-only state folder must not stop a search."""
        state = {**self.state(), **updates}
        tmp = self.state_file.with_suffix(f".tmp-{os.getpid()}")
        try:
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.state_file)
        except OSError as exc:
            log.warning("cannot record QMD's state", file=str(self.state_file), error=exc.strerror or str(exc))
            try:
                tmp.unlink()
            except OSError:
                pass

    def stamps(self) -> dict[str, tuple[int, int]] | None:
        """The memory files as QMD's last update saw them (path → (mtime_ns, size)); None before one."""
        try:
            return {path: (int(m), int(size)) for path, (m, size) in json.loads(self.stamps_file.read_text()).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return None

    def save_stamps(self, stamps: dict[str, tuple[int, int]]) -> None:
        tmp = self.stamps_file.with_suffix(f".tmp-{os.getpid()}")
        try:
            tmp.write_text(json.dumps(stamps))
            os.replace(tmp, self.stamps_file)
        except OSError as exc:  # best effort, as the state: status then says the changes are unknown
            log.warning("cannot record the files QMD saw", file=str(self.stamps_file), error=exc.strerror or str(exc))
            tmp.unlink(missing_ok=True)

    # --- collections ----------------------------------------------------------------------------

    def needs_reconcile(self) -> bool:
        registered = read_index_yml(self.index_yml)
        return any(c.path.is_dir() and registered.get(c.name) != (str(c.path), c.pattern) for c in self.collections)

    async def _call(self, *args: str, timeout: float, doing: str, step: str, check: bool = True) -> QmdResult:
        self.step = step
        self.lock.note(step)  # other processes' searches read what this one is doing
        return await self._run(*args, timeout=timeout, doing=doing, check=check)

    async def reconcile(self, report: SyncReport | None = None) -> None:
        """Make QMD's collections match the managed ones (add, rebind, drop stale). Lock held.
        What it did goes into `report` (notes, and the files a `collection add` indexed)."""
        existing = read_index_yml(self.index_yml)
        wanted = {c.name for c in self.collections}
        done: list[str] = []
        for c in self.collections:
            if not c.path.is_dir():
                continue
            current = existing.get(c.name)
            if current == (str(c.path), c.pattern):
                continue
            if current is not None:
                await self._remove(c.name)
            try:
                res = await self._add(c)
            except QmdExitError as exc:
                if "already" not in exc.stderr.lower() and "already" not in exc.stdout.lower():
                    raise
                holder = next(
                    (n for n, spec in existing.items() if spec == (str(c.path), c.pattern) and n != c.name), None
                )
                if holder is None:
                    raise
                await self._remove(holder)
                res = await self._add(c)
            counts = _indexed(res.stdout)
            done.append(f"collection {c.name} added" + (f" ({counts[0]} new)" if counts else ""))
            if report is not None and counts:
                report.files_indexed += counts[0]
        agent_suffix = f"-{self.collections[0].name.rsplit('-', 1)[-1]}" if self.collections else None
        for name in existing:
            if name not in wanted and agent_suffix and name.endswith(agent_suffix):
                await self._remove(name)
                done.append(f"collection {name} removed (no longer configured)")
        if report is not None:
            report.notes += done

    async def _add(self, c: ManagedCollection) -> QmdResult:
        return await self._call(
            "collection",
            "add",
            str(c.path),
            "--name",
            c.name,
            "--glob",
            c.pattern,
            timeout=self.update_timeout,
            doing=f"adding collection {c.name}",
            step="qmd collection add",
        )

    async def _remove(self, name: str) -> QmdResult:
        return await self._call("collection", "remove", name, timeout=self.command_timeout,
                                doing=f"removing collection {name}", step="qmd collection remove")

    async def repair(self, until: float) -> None:
        """QMD said a collection is missing: register it again, if the lock is free in time."""
        await self.lock.acquire("qmd collection repair", timeout=until - time.monotonic())
        try:
            await self.reconcile()
        finally:
            self.step = None
            self.lock.release()

    # --- update and embed -----------------------------------------------------------------------

    async def sync(self, reason: str, *, force_embed: bool = False) -> SyncReport:
        """An explicit sync: wait for the lock (logging whom for), then update and embed."""
        await self.lock.acquire(f"qmd update ({reason})")
        try:
            return await self._update_locked(reason, embed=True, force_embed=force_embed)
        finally:
            self.step = None
            self.lock.release()

    async def _update_locked(self, reason: str, *, embed: bool, force_embed: bool = False) -> SyncReport:
        started = time.perf_counter()
        report = SyncReport(reason=reason, backend="qmd")
        self.save_state(lastUpdateAttemptAt=time.time())
        vanished = [
            str(c.path) for c in self.collections if c.name in read_index_yml(self.index_yml) and not c.path.is_dir()
        ]
        if vanished:
            # QMD would mark every document of a vanished folder as removed: keep the index.
            self.save_state(lastError=f"update skipped: folder missing: {', '.join(vanished)}")
            log.warning("qmd update skipped: a collection folder is missing", folders=vanished)
            raise QmdError(f"collection folder missing: {', '.join(vanished)}; update skipped to keep the index")
        if self.qmd.sessions.enabled:
            exported = export_sessions(self.sessions_dir, self.export_dir, self.qmd.sessions.retention_days,
                                       manifest=self.home / "sessions-export-manifest.json")
            report.notes.extend(exported.notes())
        await self.reconcile(report)
        seen = memory_file_stamps(self.settings)  # before the update: a file changed meanwhile stays pending
        res = None
        for attempt in range(3):
            try:
                res = await self._call(
                    "update", timeout=self.update_timeout, doing="updating its index", step="qmd update"
                )
                break
            except QmdError as exc:
                if attempt == 2 or not any(b in str(exc).lower() for b in _BUSY):
                    self.save_state(lastError=str(exc))
                    raise
                await anyio.sleep(0.5 * (attempt + 1))
        self.save_state(lastUpdateAt=time.time(), lastError=None)
        self.save_stamps(seen)
        _count(report, res.stdout if res else "")
        if embed:
            report.notes.append(await self._maybe_embed(force=force_embed))
        report.took_ms = (time.perf_counter() - started) * 1000
        return report

    async def _maybe_embed(self, *, force: bool) -> str:
        state = self.state()
        now = time.time()
        if not force and now < state.get("embedBackoffUntil", 0):
            return f"qmd embed: backing off after {state.get('embedFailures', 0)} failure(s)"
        due = force or state.get("lastEmbedAt") is None or now - state.get("lastEmbedAt", 0) >= self.embed_interval_s
        if not due:
            return "qmd embed: not due yet (update.embedInterval)"
        if not self.models_available():
            # Without local models `qmd embed` would try a download and hang for minutes.
            skipped = f"no local embedding model in {self.models_dir}"
            self.save_state(embedSkipped=skipped)
            return f"qmd embed: skipped ({skipped})"
        try:
            res = await self._call("embed", timeout=self.embed_timeout, doing="embedding documents", step=EMBED_STEP)
            if "already running" in res.stdout.lower():
                return "qmd embed: already running in another process"
            self.save_state(lastEmbedAt=now, embedFailures=0, embedBackoffUntil=0, embedSkipped=None)
            return "qmd embed: done"
        except QmdError as exc:
            failures = state.get("embedFailures", 0) + 1
            backoff = min(EMBED_BACKOFF_CAP_S, EMBED_BACKOFF_BASE_S * 2 ** (failures - 1))
            self.save_state(embedFailures=failures, embedBackoffUntil=now + backoff, lastEmbedError=str(exc))
            log.warning("qmd embed failed; backing off", seconds=backoff, error=str(exc))
            return f"qmd embed: failed, retried in {backoff:.0f} s ({exc})"

    # --- before a search ------------------------------------------------------------------------

    def _update_due(self) -> bool:
        if not self.on_search:
            return False
        state = self.state()
        last = max(state.get("lastUpdateAt") or 0, state.get("lastUpdateAttemptAt") or 0)
        return not last or time.time() - last > self.debounce_s

    async def before_search(self, budget_s: float, *, changed: bool = False) -> Freshness:
        """Register collections and update QMD when due (`changed`: a memory file changed since the
        last search, by an exact check), waiting at most a share of the budget."""
        fresh = Freshness()
        reconcile = self.needs_reconcile()
        changed_at = time.time() if changed and self.on_search else None  # the change came before this
        if not (reconcile or changed_at or self._update_due()):
            return fresh
        registered = read_index_yml(self.index_yml)
        searchable = any(
            registered.get(c.name) == (str(c.path), c.pattern) and c.path.is_dir() for c in self.collections
        )
        share = budget_s * (UPDATE_WAIT_SHARE if searchable else START_UP_WAIT_SHARE)
        wait_until = time.monotonic() + share
        if self.lock.held_here():  # this process is already changing the index (boot, interval, sync)
            what = self.step or self.lock.what or "qmd update"
            log.info(f"waiting up to {share:.1f} s for {what} before searching (it is already running here)")
            # `qmd embed` comes after the update: QMD's text index is current by then, nothing to wait for.
            while self.lock.held_here() and self.step != EMBED_STEP and time.monotonic() < wait_until:
                await anyio.sleep(0.05)
            if self.lock.held_here() and self.step != EMBED_STEP:
                what = self.step or what
                fresh.waited.append(f"{what} was still running after {share:.1f} s")
                fresh.notes.append(f"{what} was still running after {share:.1f} s; searched QMD's index as it was "
                                   "(the update goes on in the background)")
                fresh.pending = True
                return fresh
            if self.step == EMBED_STEP or not self._began_before(changed_at) or time.monotonic() >= wait_until:
                return fresh
            # That update began before the change this search saw: one more, in what is left of the wait.
            share = wait_until - time.monotonic()
        what = "qmd collection add" if reconcile else "qmd update"
        log.info(f"waiting up to {share:.1f} s for {what} before searching")
        # Give up on another process's lock a moment before the wait ends, so the answer names the
        # holder instead of a wait that merely ran out (the two deadlines raced on a loaded machine).
        lock_until = wait_until - min(0.3, share / 4)
        job = _Job()
        stopped = False
        if self.host is not None:  # a long-running host: the update outlives this search
            self.host.start_soon(self._update_for_search, job, lock_until, changed_at)
            with anyio.move_on_after(share):
                await job.done.wait()
            what = self.step or what
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._update_for_search, job, lock_until, changed_at)
                with anyio.move_on_after(share):
                    await job.done.wait()
                what = self.step or what
                if not job.done.is_set():
                    stopped = True
                    tg.cancel_scope.cancel()  # one-shot process: the update is stopped with its qmd process
        if isinstance(job.error, LockBusy) and job.error.what == EMBED_STEP:
            log.info(f"{job.error.holder}: QMD's text index is current, searching it")
        elif isinstance(job.error, LockBusy):
            log.info(f"not waiting for {job.error.holder}; searching QMD's index as it is")
            fresh.waited.append(f"{job.error.holder} was changing QMD's index")
            fresh.notes.append(f"{job.error.holder} is changing QMD's index; searched QMD's index as it was")
            fresh.pending = True
        elif job.error is not None:
            fresh.notes.append(f"qmd update failed ({job.error}); searched QMD's index as it was")
        elif stopped or not job.done.is_set():
            fresh.waited.append(
                f"{what} was still running after {share:.1f} s" + (" and was stopped" if stopped else "")
            )
            then = ("it was stopped; run `memsift -b qmd index` to finish it" if stopped
                    else "the update goes on in the background")
            fresh.notes.append(f"{what} was still running after {share:.1f} s; searched QMD's index as it was ({then})")
            fresh.pending = True
            log.info(
                f"{what} still running after {share:.1f} s; not waiting longer" + ("; it is stopped" if stopped else "")
            )
            if stopped:
                self.save_state(
                    lastError=f"{what} did not finish within a search's {share:.1f} s wait and was stopped; "
                    "run `memsift -b qmd index` to finish it"
                )
        return fresh

    def _began_before(self, changed_at: float | None) -> bool:
        """Did the last update begin before a change seen at `changed_at` (so it may not hold it)?"""
        return changed_at is not None and (self.state().get("lastUpdateAttemptAt") or 0) < changed_at

    async def _update_for_search(self, job: _Job, lock_until: float, changed_at: float | None = None) -> None:
        try:
            await self.lock.acquire("qmd update (before a search)", timeout=lock_until - time.monotonic())
        except LockBusy as exc:
            job.error = exc
            job.done.set()
            return
        try:
            # Another search's update may have just done it (one that began after the change holds it).
            if self.needs_reconcile() or self._update_due() or self._began_before(changed_at):
                await self._update_locked("search", embed=False)
        except (QmdError, OSError) as exc:  # OSError: QMD's own files cannot be written (a full disk)
            job.error = (
                exc if isinstance(exc, QmdError) else QmdError(f"cannot write QMD's files: {exc.strerror or exc}")
            )
            log.warning("qmd update before a search failed", error=str(job.error))
        finally:
            self.step = None
            self.lock.release()
            job.done.set()

    # --- the schedule of a long-running host ----------------------------------------------------

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """The boot update (awaited when `waitForBootSync`, else in the background), then updates
        every `update.interval`; embeds follow `embedInterval` with their back-off."""
        self.host = task_group
        if self.qmd.update.on_boot and self.qmd.update.wait_for_boot_sync:
            await self._safe_update("boot")
            task_group.start_soon(self._interval_loop)
        else:
            task_group.start_soon(self._boot_then_interval)

    async def _boot_then_interval(self) -> None:
        if self.qmd.update.on_boot:
            await self._safe_update("boot")
        await self._interval_loop()

    async def _interval_loop(self) -> None:
        if self.interval_s <= 0:  # "0s" disables periodic updates
            return
        while True:
            await anyio.sleep(self.interval_s)
            await self._safe_update("interval")

    async def _safe_update(self, reason: str) -> None:
        try:
            await self.sync(reason)
        except QmdError as exc:
            log.warning("qmd update failed", reason=reason, error=str(exc))


def _indexed(text: str) -> tuple[int, int, int, int] | None:
    """(new, updated, unchanged, removed) summed over every `Indexed:` line, or None."""
    found = [tuple(int(n) for n in m.groups()) for m in _INDEXED_RE.finditer(text or "")]
    return tuple(sum(col) for col in zip(*found)) if found else None  # type: ignore[return-value]


def _count(report: SyncReport, update_out: str) -> None:
    """What QMD really did: the files `collection add` indexed (already counted), then the update's."""
    added = report.files_indexed
    counts = _indexed(update_out)
    if counts is None:
        report.notes.append("qmd update: done (it printed no counts)")
        return
    new, updated, unchanged, removed = counts
    report.files_indexed = added + new + updated
    report.files_unchanged = max(0, unchanged - added)  # a collection added just now shows as unchanged
    report.files_removed = removed
    report.files_seen = new + updated + unchanged
    report.notes.append(f"qmd update: {new} new, {updated} updated, {unchanged} unchanged, {removed} removed")
