"""Has any memory file changed since the last look? Exact and cheap, for searches in a long-running memsift.

A watcher hears of a change 50 ms to 1.6 s after it happened (watchfiles batches its events), so
a search that trusts the watcher alone misses a note written just before it. The kernel, though,
queues an inotify event before the write returns: a non-blocking read of our own inotify queue
at search time sees every change that completed before the search started, at the cost of one
system call when nothing changed (instead of stat-ing every file).

`ChangeProbe.changed()` drains the queue and says whether anything relevant arrived: a Markdown
(or multimodal) file or a folder under `memory/` or an extra-path folder, or `MEMORY.md`,
`memory.md`, `memory/` or an extra path itself. New folders are watched as they appear. Where
inotify is unavailable (not Linux, or the watch limit is reached), `changed()` always answers
True: every search then syncs first, which is slower but never misses a change.

Watches follow folders, not paths: when the workspace (or an extra path's folder) is deleted or
moved away, the queue is made again on whatever is at those paths, and, while one is missing, each
check looks (one stat) for it to come back (a restore, a fresh clone, `mv ws.new ws`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..logging import get_logger
from .multimodal import extensions_for
from .discovery import ignored_dir, ignored_file

if TYPE_CHECKING:
    from ..config import ResolvedConfig

__all__ = ["ChangeProbe", "ChangeView", "memory_change_probe"]

log = get_logger("memsift.probe")

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_IN_ONLYDIR, _IN_DONT_FOLLOW, _IN_ISDIR = 0x01000000, 0x02000000, 0x40000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
         | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR | _IN_DONT_FOLLOW)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then `len` bytes of NUL-padded name


def memory_change_probe(settings: ResolvedConfig) -> ChangeProbe:
    """A probe over the files the index and the watcher cover (QMD's collections included): what a
    host hands its manager, and what a manager no host watches makes for itself."""
    from ..config.coverage import with_qmd_coverage  # noqa: PLC0415

    return ChangeProbe(with_qmd_coverage(settings))


class ChangeProbe:
    """One inotify queue over the memory folders (see the module docstring)."""

    def __init__(self, settings: ResolvedConfig) -> None:
        ms = settings.memory_search
        ws = settings.workspace
        mm = ms.multimodal
        self.extensions = (".md",) + (extensions_for(mm.modalities) if mm.enabled else ())
        extra = [Path(os.path.normpath(Path(p).expanduser() if Path(p).expanduser().is_absolute() else ws / p))
                 for p in ms.extra_paths]
        self._trees = [ws / "memory", *extra]  # watched recursively when they are folders
        # Folders watched flat, with the names in them that matter (created, removed, edited).
        self._names: dict[str, set[str]] = {str(ws): {"MEMORY.md", "memory.md", "memory"}}
        for p in extra:
            self._names.setdefault(str(p.parent), set()).add(p.name)
        self._wds: dict[int, str] = {}
        self._tree_wds: set[int] = set()
        self._fd: int | None = None
        self._libc: Any = None
        self._rearm = False  # a watched top folder went away: make the queue again at the next check
        self._missing: list[str] = []  # top folders not there when the queue was made
        self.exact = False  # False: every call answers True (no inotify here)
        self.changes = 0  # how many calls found a change: what each ChangeView compares
        self._arm()

    def _arm(self) -> None:
        """A new inotify queue over the top folders and the trees (the old one closed)."""
        self.close()
        self._wds, self._tree_wds, self._rearm = {}, set(), False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        except (AttributeError, OSError) as exc:
            log.info("exact change checks unavailable: every search syncs first", error=str(exc))
            return
        self._libc, self._fd = libc, fd
        try:
            for folder in self._names:
                self._add(folder, tree=False)
            for root in self._trees:
                self._add_tree(root)
        except OSError as exc:  # ENOSPC: fs.inotify.max_user_watches reached
            log.warning("exact change checks unavailable: every search syncs first", error=str(exc))
            self.close()
            return
        self._missing = [folder for folder in self._names if not os.path.isdir(folder)]
        self.exact = True

    # --- watches ----------------------------------------------------------------------------

    def _add(self, folder: str, *, tree: bool) -> None:
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), _MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP):
                return  # not there (yet), or not a real folder: its parent's watch covers it
            raise OSError(err, f"{os.strerror(err)}: {folder}")
        self._wds[wd] = folder
        if tree:
            self._tree_wds.add(wd)

    def _add_tree(self, root: Path | str) -> None:
        """Watch `root` and every folder below it (never entering symlinks or ignored folders)."""
        if os.path.islink(root) or not os.path.isdir(root):
            return
        stack = [str(root)]
        while stack:
            folder = stack.pop()
            self._add(folder, tree=True)
            try:
                with os.scandir(folder) as entries:
                    stack.extend(
                        e.path for e in entries if not ignored_dir(e.name) and e.is_dir(follow_symlinks=False)
                    )
            except OSError:
                continue

    # --- the check --------------------------------------------------------------------------

    def changed(self) -> bool:
        """True when a memory file may have changed since the last call (always, without inotify)."""
        found = self._look()
        self.changes += found
        return found

    def view(self) -> ChangeView:
        """A reader of its own: for several backends in one process (QMD and its builtin fallback)."""
        return ChangeView(self)

    def _look(self) -> bool:
        if self.exact and any(os.path.isdir(folder) for folder in self._missing):
            self._arm()  # a top folder came back: watch it
            return True
        fd = self._fd
        if not self.exact or fd is None:
            return True
        relevant = self._drain(fd)
        if self._rearm:
            self._arm()  # a top folder went away: watch what is at its path now (or look for it)
            return True
        return relevant

    def _drain(self, fd: int) -> bool:
        """Read every queued event; whether one was relevant."""
        relevant = False
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                return relevant
            except OSError as exc:
                log.warning("change check failed: syncing to be safe", error=str(exc))
                return True
            pos = 0
            while pos + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, pos)
                name = data[pos + _EVENT.size : pos + _EVENT.size + size].rstrip(b"\0")
                pos += _EVENT.size + size
                relevant = self._event(wd, mask, os.fsdecode(name)) or relevant

    def _event(self, wd: int, mask: int, name: str) -> bool:
        if mask & _IN_Q_OVERFLOW:
            return True  # events were dropped: anything may have changed
        if mask & _IN_IGNORED:
            self._wds.pop(wd, None)
            self._tree_wds.discard(wd)
            return False
        folder = self._wds.get(wd)
        if folder is None:
            return False
        if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF):
            if folder in self._names:
                self._rearm = True  # the workspace (or an extra path's folder) itself: watch the path anew
            return True  # a watched folder went away
        path = os.path.join(folder, name)
        is_dir = bool(mask & _IN_ISDIR)
        if wd in self._tree_wds:
            if is_dir:
                if ignored_dir(name):
                    return False
                if mask & (_IN_CREATE | _IN_MOVED_TO):
                    self._add_tree(path)  # before the sync scans it, so no later write is missed
                return True
            if name.lower().endswith(self.extensions) and not ignored_file(name):
                return True
        if name in self._names.get(folder, ()):
            if is_dir and mask & (_IN_CREATE | _IN_MOVED_TO) and Path(path) in self._trees:
                self._add_tree(path)  # memory/ (or an extra folder) appeared
            return True
        return False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self.exact = None, False

    def __del__(self) -> None:  # a manager never closed still gives its inotify queue back
        try:
            self.close()
        except (OSError, AttributeError):  # AttributeError: __init__ failed before the queue existed
            pass


class ChangeView:
    """One backend's "changed since I last asked?" over a probe several backends ask: the probe
    drains its queue for whoever asks first, so each view counts the changes it has seen."""

    def __init__(self, probe: ChangeProbe) -> None:
        self.probe = probe
        self.seen = probe.changes

    def changed(self) -> bool:
        self.probe.changed()
        found, self.seen = self.probe.changes != self.seen, self.probe.changes
        return found
