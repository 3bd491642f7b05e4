"""memsift's engine: config, the SearchManager protocol, results, and opening a manager.

    import anyio
    from memsift.engine import open_manager

    async def main():
        manager = open_manager(workspace="contrib/example-workspace")
        try:
            answer = await manager.search("what database did we choose?")
            for hit in answer.results:
                print(hit.score, hit.path, hit.start_line, hit.end_line)
        finally:
            await manager.aclose()

    anyio.run(main)
"""

from __future__ import annotations

import structlog

from .config import ResolvedConfig, load_config, resolve_agent
from .errors import (
    BackendError,
    ConfigError,
    IndexUnusableError,
    MemsiftError,
    PathNotAllowedError,
    ProviderError,
    ProviderUnavailableError,
)
from .factory import open_manager, resolve_config
from .logging import configure_logging
from .manager import SearchManager, SyncReport
from .results import ManagerStatus, ReadResult, SearchAnswer, SearchHit

__all__ = [
    "BackendError",
    "ConfigError",
    "IndexUnusableError",
    "ManagerStatus",
    "MemsiftError",
    "PathNotAllowedError",
    "ProviderError",
    "ProviderUnavailableError",
    "ReadResult",
    "ResolvedConfig",
    "SearchAnswer",
    "SearchHit",
    "SearchManager",
    "SyncReport",
    "configure_logging",
    "load_config",
    "open_manager",
    "resolve_agent",
    "resolve_config",
]

if not structlog.is_configured():
    configure_logging()  # structlog's own default prints to stdout; ours goes to stderr
