"""A circuit breaker for query embeddings (and the rerank stage): after repeated failures, stop asking the provider for
a
while instead of paying its timeout on every search.

Closed: every search embeds its query (within its budget). After `threshold` failures in a row
the circuit opens for `cooldown_s` (doubling while the provider keeps failing, up to
`max_cooldown_s`): searches answer by keyword at once and say why. Then one search tries again:
success closes the circuit, failure opens it again. With a `path`, the state is shared through a
small file beside the index, so cold CLI processes (each a new one) benefit too; it is keyed by
the provider's fingerprint, so another model or endpoint starts closed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["QueryCircuit"]


class QueryCircuit:
    def __init__(self, fingerprint: str, path: Path | None = None, *, threshold: int = 3, cooldown_s: float = 60.0,
                 max_cooldown_s: float = 600.0) -> None:
        self.fingerprint = fingerprint
        self.path = path
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self.failures = 0
        self.opened_at = 0.0  # when the last failure that kept it open happened
        self.last_error: str | None = None
        self._load()

    # --- shared state ---------------------------------------------------------------------------

    def _load(self) -> None:
        if self.path is None:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                data: Any = json.loads(fh.read(65536))
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("fingerprint") == self.fingerprint:
            self.failures = int(data.get("failures") or 0)
            self.opened_at = float(data.get("openedAt") or 0.0)
            self.last_error = data.get("lastError")

    def _save(self) -> None:
        if self.path is None:
            return
        data = {"fingerprint": self.fingerprint, "failures": self.failures, "openedAt": self.opened_at,
                "lastError": self.last_error}
        tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.path)  # replaces the name, never follows a symlink there
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass

    # --- decisions ------------------------------------------------------------------------------

    def _pause_s(self) -> float:
        extra = max(0, self.failures - self.threshold)  # each failed new try doubles the pause
        return min(self.max_cooldown_s, self.cooldown_s * 2**extra)

    def paused_for(self) -> float | None:
        """Seconds the circuit stays open, or None (closed, or time for a new try)."""
        self._load()
        if self.failures < self.threshold:
            return None
        wait = self.opened_at + self._pause_s() - time.time()
        return wait if wait > 0 else None

    def open_reason(self, provider: str) -> str | None:
        """Why the query must not be embedded now, or None (closed, or time for a new try)."""
        wait = self.paused_for()
        if wait is None:
            return None
        return (f"embedding provider {provider} failed {self.failures} searches in a row (last: {self.last_error}); "
                f"vector search paused for {wait:.0f} s more, keyword results only")

    def record_failure(self, reason: str) -> None:
        self._load()
        self.failures += 1
        self.last_error = reason
        self.opened_at = time.time()
        self._save()

    def record_success(self) -> None:
        self._load()
        if self.failures:
            self.failures, self.opened_at, self.last_error = 0, 0.0, None
            self._save()
