"""Logging with structlog, always to stderr (stdout belongs to results and to MCP's JSON-RPC).

`get_logger` returns a small proxy that checks the level first and imports structlog only for an
event that passes it. A CLI call at the default WARNING level usually logs nothing, and importing
structlog (whose console renderer imports rich) would cost ~50 ms of every call.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from .secrets import redact_processor

__all__ = ["configure_logging", "get_logger", "is_verbose"]

_level: int | None = None  # set by configure_logging; None: WARNING, or MEMSIFT_LOG_LEVEL
_applied: int | None = None  # the level structlog was last configured with by us


def _wanted_level(verbosity: int) -> int:
    level_name = os.environ.get("MEMSIFT_LOG_LEVEL")
    if level_name:
        level = logging.getLevelName(level_name.upper())
        return level if isinstance(level, int) else logging.WARNING
    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(max(verbosity, 0), 2)]


def is_verbose() -> bool:
    """-v or more was asked (or MEMSIFT_LOG_LEVEL is INFO or lower)."""
    return (_level if _level is not None else _wanted_level(0)) <= logging.INFO


def configure_logging(verbosity: int = 0) -> None:
    """WARNING by default, INFO with -v, DEBUG with -vv; `MEMSIFT_LOG_LEVEL` overrides."""
    global _level
    _level = _wanted_level(verbosity)
    if "structlog" in sys.modules:
        _apply(_level)  # already in use: switch now; otherwise when the first event passes


def _apply(level: int) -> None:
    global _applied
    import structlog  # noqa: PLC0415

    structlog.configure(
        processors=[
            redact_processor,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            # No colours through the CLI's terminal stream, which shows escape sequences as text
            # (a logged file name or provider error could hold some: cli/streams.py).
            structlog.dev.ConsoleRenderer(
                colors=sys.stderr.isatty() and not getattr(sys.stderr, "shows_control_characters", False)
            ),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # sys.stderr is looked up per call, so a redirected stderr (a test's capture) is honoured.
        logger_factory=lambda *_args: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _applied = level


class _Logger:
    """structlog's `log.info("event", key=value)` calls, with structlog loaded on demand."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _log(self, level: int, method: str, event: str, kw: dict[str, Any]) -> None:
        wanted = _level if _level is not None else _wanted_level(0)
        if level < wanted:
            return
        import structlog  # noqa: PLC0415

        # Ours unless the application configured structlog itself (then its set-up stays).
        if _applied != wanted and (_applied is not None or not structlog.is_configured()):
            _apply(wanted)
        getattr(structlog.get_logger(self.name), method)(event, **kw)

    def debug(self, event: str, **kw: Any) -> None:
        self._log(logging.DEBUG, "debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._log(logging.INFO, "info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._log(logging.WARNING, "warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        self._log(logging.ERROR, "error", event, kw)


def get_logger(name: str) -> _Logger:
    return _Logger(name)
