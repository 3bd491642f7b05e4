"""structlog set-up: logs always go to stderr (stdout belongs to results and to MCP's JSON-RPC)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

from .secrets import redact_processor

__all__ = ["configure_logging", "get_logger"]


def configure_logging(verbosity: int = 0) -> None:
    """WARNING by default, INFO with -v, DEBUG with -vv; `MEMSIFT_LOG_LEVEL` overrides."""
    level_name = os.environ.get("MEMSIFT_LOG_LEVEL")
    if level_name:
        level = logging.getLevelName(level_name.upper())
        level = level if isinstance(level, int) else logging.WARNING
    else:
        level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbosity, 2)]
    structlog.configure(
        processors=[
            redact_processor,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # sys.stderr is looked up per call, so a redirected stderr (a test's capture) is honoured.
        logger_factory=lambda *_args: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    """A structlog logger, with memsift's stderr set-up applied first if nobody configured
    logging yet (structlog's own default would print to stdout, which belongs to results)."""
    if not structlog.is_configured():
        configure_logging()
    return structlog.get_logger(name)
