"""Logging with structlog, always to stderr (stdout belongs to results and to MCP's JSON-RPC).

`get_logger` returns a small proxy that checks the level first and imports structlog only for an
event that passes it. A CLI call at the default WARNING level usually logs nothing, and importing
structlog (whose console renderer imports rich) would cost ~50 ms of every call.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from .secrets import redact, redact_processor

__all__ = ["configure_logging", "get_logger", "is_verbose", "route_library_logs"]

_level: int | None = None  # set by configure_logging; None: WARNING, or MEMSIFT_LOG_LEVEL
_applied: int | None = None  # the level structlog was last configured with by us


def _wanted_level(verbosity: int) -> int:
    level_name = os.environ.get("MEMSIFT_LOG_LEVEL")
    if level_name:
        level = logging.getLevelName(level_name.upper())
        return level if isinstance(level, int) else logging.WARNING
    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(max(verbosity, 0), 2)]


def _current_level() -> int:
    return _level if _level is not None else _wanted_level(0)


def is_verbose() -> bool:
    """-v or more was asked (or MEMSIFT_LOG_LEVEL is INFO or lower)."""
    return _current_level() <= logging.INFO


def configure_logging(verbosity: int = 0) -> None:
    """WARNING by default, INFO with -v, DEBUG with -vv; `MEMSIFT_LOG_LEVEL` overrides."""
    global _level
    _level = _wanted_level(verbosity)
    if "structlog" in sys.modules:
        _apply(_level)  # already in use: switch now; otherwise when the first event passes


# The libraries whose records are the server's own story (its sessions, its access log): shown at
# memsift's level. Every other library (httpx logs each request at INFO) only from -vv on.
_SERVER_LOGGERS = ("mcp", "uvicorn")


class _OneLine(logging.Handler):
    """The standard library's records (the MCP SDK's, uvicorn's, httpx's) as one line each, in
    memsift's format, secrets masked, on stderr. Without it the MCP SDK's own set-up printed every
    record through rich, wrapped at 80 columns over five lines, and httpx's request lines carried a
    provider URL's password (`http://user:PASSWORD@proxy/v1`) into an MCP host's log."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                message += f"  exception={type(exc).__name__}: {exc}"
            line = f"{self._clock(record)} [{record.levelname.lower():<9}] {message:<30} logger={record.name}"
            sys.stderr.write(redact(line.replace("\r", "\\r").replace("\n", "\\n")) + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001  (a log line never ends the program: a closed stderr, a reader gone)
            pass

    @staticmethod
    def _clock(record: logging.LogRecord) -> str:
        return time.strftime("%H:%M:%S", time.localtime(record.created))


def route_library_logs() -> None:
    """Send the standard library's log records through `_OneLine`, at memsift's level, unless the
    program already set up logging (an application using the Python API keeps its own). The CLI
    calls it for every command; `memsift mcp` before the MCP SDK would set up rich's handler."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _OneLine)]
    if root.handlers and not ours:
        return
    if not ours:
        root.addHandler(_OneLine())
    level = _current_level()
    root.setLevel(logging.INFO if level <= logging.DEBUG else logging.WARNING)
    for name in _SERVER_LOGGERS:
        logging.getLogger(name).setLevel(level)


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
        wanted = _current_level()
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
