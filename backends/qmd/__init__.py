"""The QMD backend: the `qmd` command-line tool as a sidecar, in an isolated home per agent."""

from __future__ import annotations

from .manager import QmdSearchManager

__all__ = ["QmdSearchManager"]
