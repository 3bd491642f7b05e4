"""Config: the records of the reference keys (`models.py`), their sources (file, env), merge,
validation and normalisation (`load.py`, which imports pydantic: loaded on first use, so code that
only reads settings never pays for it)."""

from __future__ import annotations

from typing import Any

from .models import MemoryConfig, MemorySearchConfig, MemsiftConfig
from .resolved import ResolvedConfig

__all__ = [
    "MemoryConfig",
    "MemorySearchConfig",
    "MemsiftConfig",
    "ResolvedConfig",
    "default_config_path",
    "load_config",
    "normalise_memory_search",
    "resolve_agent",
]

_LAZY = {"load_config": ".load", "normalise_memory_search": ".load", "resolve_agent": ".load",
         "default_config_path": ".sources"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib  # noqa: PLC0415

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
