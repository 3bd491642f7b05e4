"""The one error hierarchy of memsift.

    MemsiftError
    ├── ConfigError            a config file, key or value is wrong (names the key path)
    ├── PathNotAllowedError    memory_get / read of a path outside the allowed memory files
    ├── IndexUnusableError     the index cannot be opened, created or written
    │   └── IndexCorruptError  the file is damaged: it is moved aside and rebuilt
    ├── ProviderError          an embedding provider failed (no key, bad response, model file)
    │   └── ProviderUnavailableError   the provider cannot be set up at all on this machine
    ├── BackendError           a search backend failed in a way the caller must see
    └── CommandTimeout         a command ran out of its time budget (memory.limits, --timeout)

Expected outages (no provider, vectors unavailable, a fallback taken) are *values* on results
and status, not exceptions; these classes are for bugs and bad input.
"""

from __future__ import annotations

from .text import shorten

__all__ = [
    "MemsiftError",
    "ConfigError",
    "PathNotAllowedError",
    "IndexUnusableError",
    "IndexCorruptError",
    "ProviderError",
    "ProviderUnavailableError",
    "BackendError",
    "CommandTimeout",
    "embedding_failure",
]


class MemsiftError(Exception):
    """Base class of every error memsift raises on purpose."""


class ConfigError(MemsiftError):
    """A config file, key or value is wrong. The message names the key path."""

    def __init__(self, message: str, *, key_path: str | None = None) -> None:
        super().__init__(message)
        self.key_path = key_path


class PathNotAllowedError(MemsiftError):
    """A read asked for a path that is not an allowed memory file."""

    def __init__(self, path: str, reason: str) -> None:
        shown = shorten(path, 200)  # never echo unbounded input
        super().__init__(f"path not allowed: {shown!r}: {reason}")
        self.path = shown
        self.reason = reason


class IndexUnusableError(MemsiftError):
    """The index database cannot be opened, created or written."""


class IndexCorruptError(IndexUnusableError):
    """The index file is damaged or not a database. The files are the truth: rebuild it."""


class ProviderError(MemsiftError):
    """An embedding provider failed."""


class ProviderUnavailableError(ProviderError):
    """An embedding provider cannot be set up here (missing package, model file or key)."""


class BackendError(MemsiftError):
    """A search backend failed in a way the caller must see."""


class CommandTimeout(MemsiftError):
    """A command ran out of its time budget, or `index` saw nothing move for too long."""


def embedding_failure(exc: BaseException) -> str:
    """An embedding call's failure in words, as every backend records it: a provider's own error
    names the provider already; anything else is said with its type."""
    return str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
