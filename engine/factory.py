"""The composition layer: config → a ready `SearchManager`. The only engine module that imports backends."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import structlog

from .config import ResolvedConfig, load_config, resolve_agent
from .embeddings import ProviderSelection, select_provider
from .errors import ConfigError
from .manager import SearchManager

__all__ = ["open_manager", "resolve_config"]

log = structlog.get_logger("memsift.factory")


def resolve_config(
    config_path: str | os.PathLike[str] | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    agent: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """Load the config file (and environment) and resolve it for one agent."""
    config, path = load_config(config_path, environ=environ, overrides=overrides)
    return resolve_agent(config, agent_id=agent, workspace=workspace, config_path=path, environ=environ)


def open_manager(
    settings: ResolvedConfig | None = None,
    *,
    config_path: str | os.PathLike[str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    agent: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SearchManager:
    """Build the manager the config asks for. Raises ConfigError when memory search is disabled."""
    if settings is None:
        settings = resolve_config(config_path, workspace=workspace, agent=agent)
    if not settings.memory_search.enabled:
        raise ConfigError(
            f"memory search is disabled for agent {settings.agent_id!r} (memorySearch.enabled is false)",
            key_path="memorySearch.enabled",
        )
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415

    selection: ProviderSelection = select_provider(settings.memory_search)
    if settings.memory.backend == "qmd":
        # The QMD sidecar backend is not part of this version: answer from builtin, visibly.
        reason = "the qmd backend is not available in this memsift version"
        log.warning("using the builtin backend", reason=reason)
        selection = ProviderSelection(
            selection.provider,
            selection.requested,
            selection.unavailable_reason,
            fallback_from="qmd",
            fallback_reason=reason,
        )
    return BuiltinSearchManager(settings, selection=selection, progress=progress)
