"""The builtin backend: a SQLite index (FTS5 BM25 + sqlite-vec) of the Markdown memory files."""

from __future__ import annotations

from .manager import BuiltinSearchManager

__all__ = ["BuiltinSearchManager"]
