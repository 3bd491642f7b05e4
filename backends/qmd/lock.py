"""One writer per QMD index (QMD crashes on concurrent writers): an in-process lock plus an flock
on `<home>/qmd.lock` shared by every memsift process of the agent.

The holder writes who it is into the lock file (pid, what, since when), so a waiter can say what
it waits for, and a search can give up within its budget and say whom it gave up on. The flock is
polled (never a blocking call in a thread), so a cancelled wait returns at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import anyio

from memsift.engine.logging import get_logger
from memsift.engine.limits import waiting_on

from .process import QmdError

__all__ = ["WriterLock", "LockBusy"]

log = get_logger("memsift.qmd.lock")

POLL_S = 0.05
STILL_WAITING_EVERY_S = 10.0


class LockBusy(QmdError):
    """Another writer held the QMD lock for longer than the caller could wait."""

    def __init__(self, holder: str, what: str | None = None) -> None:
        super().__init__(f"{holder} is changing QMD's index")
        self.holder = holder
        self.what = what  # the holder's current step ("qmd update", "qmd embed"), when known


class WriterLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._inproc = anyio.Lock()
        self._fd: int | None = None
        self.what: str | None = None  # what this process holds it for
        self.since: float = 0.0

    def held_here(self) -> bool:
        return self._inproc.locked()

    def describe_holder(self) -> str | None:
        """Who holds the lock now ('qmd update in this process for 3.1 s', 'another memsift process
        (pid 42) running qmd update for 35 s'), or None when it is free."""
        if self._inproc.locked() and self.what:
            return f"{self.what} (this process, for {time.monotonic() - self.since:.1f} s)"
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return None
            except BlockingIOError:
                return self._read_holder(fd)[0]
        finally:
            os.close(fd)

    def _read_holder(self, fd: int) -> tuple[str, str | None]:
        """('another memsift process (pid 42) running qmd update for 35 s', 'qmd update')."""
        try:
            info = json.loads(os.pread(fd, 4096, 0) or b"{}")
            age = time.time() - float(info["since"])
            return f"another memsift process (pid {int(info['pid'])}) running {info['what']} for {age:.0f} s", str(
                info["what"]
            )
        except (OSError, ValueError, KeyError, TypeError):
            return "another memsift process", None

    def note(self, what: str) -> None:
        """Record the holder's current step in the lock file (for other processes' messages)."""
        if self._fd is not None:
            self._write_holder(self._fd, what)

    @staticmethod
    def _write_holder(fd: int, what: str) -> None:
        """Best effort: the flock is the lock; who holds it only makes other processes' messages
        clearer (a full disk must not turn into a failed search)."""
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what, "since": time.time()}).encode(), 0)
        except OSError as exc:
            log.debug("cannot write the QMD lock's holder", error=exc.strerror or str(exc))

    async def acquire(self, what: str, *, timeout: float | None = None) -> None:
        """Take the lock for `what`; with a timeout, raise LockBusy when it is not free in time."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        if deadline is None:
            await self._inproc.acquire()
        else:
            got = False
            try:
                self._inproc.acquire_nowait()
                got = True
            except anyio.WouldBlock:
                with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                    await self._inproc.acquire()
                    got = True
            if not got:
                raise LockBusy(self.describe_holder() or "another task of this process")
        try:
            await self._flock(what, deadline)
        except BaseException:
            self._inproc.release()
            raise
        self.what, self.since = what, time.monotonic()

    async def _flock(self, what: str, deadline: float | None) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        waited_since = time.monotonic()
        told = 0.0
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    raise LockBusy(*self._read_holder(fd))
                if now - told >= STILL_WAITING_EVERY_S or not told:
                    told = now
                    log.info(f"waiting for the QMD lock before {what}: held by {self._read_holder(fd)[0]}",
                             waited=f"{now - waited_since:.1f} s")
                with waiting_on(f"the QMD lock (held by {self._read_holder(fd)[0]})"):
                    await anyio.sleep(POLL_S)
        except BaseException:
            os.close(fd)
            raise
        self._write_holder(fd, what)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                try:
                    os.ftruncate(self._fd, 0)
                except OSError:
                    pass  # a read-only or full state folder: the unlock below is what matters
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None
        self.what = None
        if self._inproc.locked():
            self._inproc.release()
