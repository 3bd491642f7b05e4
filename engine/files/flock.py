"""Waiting for another process's flock, within a bound: a writer that holds a lock for long (a
rebuild) makes the others wait, never hang."""

from __future__ import annotations

import fcntl
import time
from typing import Callable

__all__ = ["flock_within"]


def flock_within(fd: int, seconds: float, *, poll_s: float = 0.05, check: Callable[[], None] | None = None) -> bool:
    """Take an exclusive flock on `fd`, waiting up to `seconds` while another process holds it;
    False when it stayed taken. `check` runs between tries and may raise to stop the wait."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if check is not None:
                check()
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
