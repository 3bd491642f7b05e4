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

The public names load on first use (PEP 562), so importing a small part of memsift (the CLI's
argument check, the errors) does not pay for pydantic, numpy and the rest.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing itself is not imported: the CLI's resident client starts here
if TYPE_CHECKING:
    from typing import Any

# public name -> the module that defines it
_EXPORTS = {
    "BackendError": ".errors",
    "ConfigError": ".errors",
    "IndexUnusableError": ".errors",
    "MemsiftError": ".errors",
    "PathNotAllowedError": ".errors",
    "ProviderError": ".errors",
    "ProviderUnavailableError": ".errors",
    "ManagerStatus": ".results",
    "ReadResult": ".results",
    "SearchAnswer": ".results",
    "SearchHit": ".results",
    "ResolvedConfig": ".config",
    "load_config": ".config",
    "resolve_agent": ".config",
    "SearchManager": ".manager",
    "SyncReport": ".manager",
    "configure_logging": ".logging",
    "open_manager": ".compose.factory",
    "resolve_config": ".compose.factory",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
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
    from .compose.factory import open_manager, resolve_config
    from .logging import configure_logging
    from .manager import SearchManager, SyncReport
    from .results import ManagerStatus, ReadResult, SearchAnswer, SearchHit
