"""The Postgres backend: many memsift processes index into and search one database, rows keyed by agent."""

from __future__ import annotations

from .manager import PostgresSearchManager

__all__ = ["PostgresSearchManager"]
