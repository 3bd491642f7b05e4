"""Config: pydantic models for the reference keys, sources (file, env), merge and normalisation."""

from __future__ import annotations

from .load import ResolvedConfig, load_config, normalise_memory_search, resolve_agent
from .models import MemoryConfig, MemorySearchConfig, MemsiftConfig
from .sources import default_config_path

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
