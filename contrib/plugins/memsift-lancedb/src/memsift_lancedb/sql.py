"""Filters for LanceDB's SQL `where` (no lancedb import: the manager builds them before it opens the store)."""

from __future__ import annotations

__all__ = ["quote"]


def quote(value: str) -> str:
    """A string literal for a LanceDB filter."""
    return "'" + value.replace("'", "''") + "'"
