"""Watching memory files with `watchfiles` (one inotify descriptor and one thread per watch).

Two watches, whatever the number of files: a recursive one over `memory/` and the extra-path
folders, and a flat one over the workspace root (for `MEMORY.md`, `memory.md`, extra files, and
a `memory/` folder created later, which restarts the recursive watch). Changes are collected until
they stay quiet for `sync.watchDebounceMs`, then handed over as one batch. Searches in the
meantime do not rely on it: they ask the exact `ChangeProbe` (change_probe.py) first.

A watch follows a folder, not a path: a workspace or an extra folder deleted and made again, or
swapped for another (`git clone` anew, a restore, `mv ws.new ws`), would leave the watches on the
old folder and the new notes unseen. A guard looks at those folders every `GUARD_S`: gone, it says
so; back (another folder at the path), both watches start again on it and its files are synced.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable

import anyio
import watchfiles

from ..logging import get_logger
from .discovery import ignored_dir, ignored_file
from .multimodal import extensions_for

if TYPE_CHECKING:
    from ..config import ResolvedConfig

__all__ = ["MemoryWatcher", "watch_roots", "identity"]

log = get_logger("memsift.watch")

ARM_DELAY_S = 0.3
GUARD_S = 2.0  # how often the workspace and extra folders are checked for being gone or replaced
POLL_MS = 1000  # how often a watch polls once the system's inotify limits are reached


class MemoryWatcher:
    def __init__(
        self,
        settings: ResolvedConfig,
        on_change: Callable[[set[str]], Awaitable[None]],
        *,
        debounce_ms: int | None = None,
    ) -> None:
        self.settings = settings
        ms = settings.memory_search
        self.on_change = on_change
        self.debounce_s = (debounce_ms if debounce_ms is not None else ms.sync.watch_debounce_ms) / 1000
        mm = ms.multimodal
        self.extensions = (".md",) + (extensions_for(mm.modalities) if mm.enabled else ())
        ws = settings.workspace
        self._extra = [Path(os.path.normpath(p if Path(p).is_absolute() else ws / p)) for p in ms.extra_paths]
        self._tree_roots = [ws / "memory", *self._extra]  # watched recursively, where they are folders
        self._send, self._receive = anyio.create_memory_object_stream[set[str]](100)
        # Set to start a watch again on what is at its roots now: "tree" (memory/ and the extra
        # folders, recursive) and "flat" (the workspace folder and the extra files' folders).
        self._restarts = {"tree": anyio.Event(), "flat": anyio.Event()}
        self._stop = anyio.Event()
        self.batches = 0  # handed-over batches, for status lines

    # --- what to watch --------------------------------------------------------------------------

    def recursive_roots(self) -> list[Path]:
        return [r for r in self._tree_roots if r.is_dir() and not r.is_symlink()]

    def flat_roots(self) -> list[Path]:
        roots = {self.settings.workspace}
        roots.update(p.parent for p in self._extra if not p.is_dir())
        return [r for r in roots if r.is_dir()]

    def _relevant(self, path: str) -> bool:
        if not path.lower().endswith(self.extensions):
            return False
        p = Path(path)
        if ignored_file(p.name):
            return False
        root = next((r for r in self._tree_roots if p.is_relative_to(r)), None)
        below = p.relative_to(root).parts[:-1] if root is not None else p.parts[:-1]
        return not any(ignored_dir(part) for part in below)  # the folders above a root are the user's

    def _flat_relevant(self, path: str) -> bool:
        p = Path(path)
        if p.parent == self.settings.workspace and p.name in ("MEMORY.md", "memory.md", "memory"):
            return True
        return any(p == e or (p.is_dir() and p == e) for e in self._extra)

    # --- the loops ------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, "flat", self.flat_roots, self._flat_relevant, False, self._on_flat)
            tg.start_soon(self._watch, "tree", self.recursive_roots, self._relevant, True, self._send.send)
            tg.start_soon(self._folder_guard)
            try:
                # watchfiles registers its inotify watches when its generator first runs, in a
                # worker thread: give both a moment before reporting "armed".
                await anyio.sleep(ARM_DELAY_S)
                task_status.started()
                await self._debounce_loop()
            finally:
                # Cancelling cannot interrupt a watch thread: it would run to its timeout (5 s)
                # before the task group could end. Their stop events end them within a step.
                self._stop.set()
                self._rearm("tree", "flat")

    def _rearm(self, *which: str) -> None:
        for name in which:
            self._restarts[name].set()

    async def _watch(self, name: str, roots: Callable[[], list[Path]], relevant: Callable[[str], bool],
                     recursive: bool, handle: Callable[[set[str]], Awaitable[None]]) -> None:
        await watch_roots(roots, relevant, recursive, handle, restarts=self._restarts, name=name, stop=self._stop)

    async def _on_flat(self, paths: set[str]) -> None:
        if any(Path(p).is_dir() or not Path(p).exists() for p in paths):
            self._rearm("tree")  # memory/ (or an extra folder) appeared or went away
        await self._send.send(paths)

    async def _folder_guard(self) -> None:
        """Start both watches again when the workspace folder or an extra folder was deleted and made
        again, or replaced; an extra folder gone is synced too (its files leave the index, as a
        search's own check would drop them). Nothing else watches an extra folder's parent."""
        ws = self.settings.workspace
        guarded = [ws, *self._extra]
        armed = [identity(p) for p in guarded]
        while not self._stop.is_set():
            await anyio.sleep(GUARD_S)
            now = [identity(p) for p in guarded]
            changed = [(p, before, after) for p, before, after in zip(guarded, armed, now) if before != after]
            armed = now
            if not changed:
                continue
            for path, before, after in changed:
                what = "workspace folder" if path == ws else "extra folder"
                if after is None:
                    log.warning(f"the {what} is gone; watching for it to come back", path=str(path))
                else:
                    back = "is back; watching it again" if before is None else "was replaced; watching the new one"
                    log.warning(f"the {what} {back}", path=str(path))
            synced = {str(p) for p, _before, after in changed if after is not None or p != ws}
            if not synced:
                continue  # the workspace alone went away: nothing to watch until it is back
            self._rearm("tree", "flat")
            await anyio.sleep(ARM_DELAY_S)  # the new watches are armed before the sync reads the files
            await self._send.send(synced)  # their files are synced: the index follows the folders there now

    async def _debounce_loop(self) -> None:
        """Hand over a batch once changes have been quiet for the debounce window."""
        async with self._receive:
            while True:
                pending = set(await self._receive.receive())
                while True:
                    with anyio.move_on_after(self.debounce_s) as quiet:
                        pending |= await self._receive.receive()
                    if quiet.cancelled_caught:
                        break
                self.batches += 1
                log.info("memory files changed", files=len(pending))
                try:
                    await self.on_change(pending)
                except Exception as exc:  # a failed sync only logs; the next change retries
                    log.warning("sync after a change failed", error=str(exc))



async def watch_roots(roots: Callable[[], list[Path]], relevant: Callable[[str], bool], recursive: bool,
                      handle: Callable[[set[str]], Awaitable[None]], *, restarts: dict[str, anyio.Event], name: str,
                      stop: anyio.Event, debounce_ms: int = 1600) -> None:
    """Watch `roots()` until `restarts[name]` is set (a root appeared, went away or was replaced),
    then watch what is there again; with no root, wait for the event; end once `stop` is set. Where
    the system's inotify limits are reached (an editor and a few dev servers take the default 128
    instances; a big repository the watches), the watch polls instead, and says so once."""
    polling = False
    while not stop.is_set():
        found = roots()
        restart = restarts[name] = anyio.Event()
        if not found:
            await restart.wait()
            continue
        try:
            async for changes in watchfiles.awatch(
                *found, watch_filter=lambda _c, p: relevant(p), recursive=recursive, stop_event=restart, step=50,
                debounce=debounce_ms, force_polling=polling or None, poll_delay_ms=POLL_MS,
            ):
                await handle({p for _c, p in changes})
        except (OSError, RuntimeError) as exc:  # watchfiles: "OS file watch limit reached", "Too many open files"
            if polling:
                raise
            polling = True
            log.warning(
                f"cannot watch for changes with inotify: the system's limit is reached ({exc}); checking every "
                f"{POLL_MS / 1000:g} s instead (raise it: sysctl fs.inotify.max_user_watches=524288 "
                "fs.inotify.max_user_instances=1024)",
                path=str(found[0]),
            )


def identity(folder: Path) -> tuple[int, int] | None:
    """Which folder is at `folder` now (device, inode), or None when there is none."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if os.path.isdir(folder) else None
