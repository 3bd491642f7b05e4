"""The composition layer: config → a ready `SearchManager`. Backends come from the plugin registry
(engine/plugins): nothing here names one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from ..logging import get_logger
from ..config import ResolvedConfig
from ..config.plugin_blocks import plugin_block, plugin_config
from ..errors import BackendError, ConfigError, MemsiftError
from ..manager import SearchManager
from ..plugins import BackendContext, BackendPlugin
from ..plugins import registry

__all__ = ["open_manager", "resolve_config", "reranked", "ranked", "backend_context"]

log = get_logger("memsift.factory")

MANAGER_CALLS = ("answer", "read", "status", "sync", "aclose")  # what the stages above a backend call


def resolve_config(
    config_path: str | os.PathLike[str] | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    agent: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    openclaw_config: str | os.PathLike[str] | None = None,
    trace: dict[str, Any] | None = None,
) -> ResolvedConfig:
    """Load the config file (and an OpenClaw config under it, and the environment) and resolve it
    for one agent. Relative paths start from `cwd` (default: the current folder). `trace`: see
    `resolve_agent`."""
    from ..config.load import load_config, resolve_agent  # noqa: PLC0415  (pydantic: a config is read)

    if config_path is not None and cwd is not None:
        config_path = os.path.join(cwd, os.path.expanduser(config_path))
    if openclaw_config is not None and cwd is not None:
        openclaw_config = os.path.join(cwd, os.path.expanduser(openclaw_config))
    config, path = load_config(config_path, environ=environ, overrides=overrides, openclaw_config=openclaw_config)
    return resolve_agent(config, agent_id=agent, workspace=workspace, config_path=path, environ=environ, cwd=cwd,
                         trace=trace)


def open_manager(
    settings: ResolvedConfig | None = None,
    *,
    config_path: str | os.PathLike[str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    agent: str | None = None,
    backend: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> SearchManager:
    """Build the manager the config asks for (`backend` overrides `memory.backend`).

    The backend comes from the plugin registry (memsift's own and installed ones alike, see
    engine/plugins). Raises ConfigError when memory search is disabled, or the backend is unknown
    or broken. A backend with a fallback policy (QMD, Postgres) is guarded by its fallback backend;
    above it come the evidence ranker, the rerank stage (`memorySearch.query.rerank.enabled`) and
    the scope rules (`memory.qmd.scope`), which then hold for search, read and status.
    """
    if settings is None:
        settings = resolve_config(config_path, workspace=workspace, agent=agent)
    if not settings.memory_search.enabled:
        raise ConfigError(
            f"memory search is disabled for agent {settings.agent_id!r} (memorySearch.enabled is false)",
            key_path="memorySearch.enabled",
        )
    chosen = backend or settings.memory.backend
    log.debug("config resolved", config=str(settings.config_path or "-"), agent=settings.agent_id,
              workspace=str(settings.workspace), store=str(settings.store_path), backend=chosen,
              provider=settings.memory_search.provider)
    plugin = registry.backend(chosen)
    manager = _guarded(plugin, backend_context(plugin, settings, progress), progress)
    from .scoped import scoped  # noqa: PLC0415

    return scoped(reranked(ranked(manager, settings, plugin.name), settings, plugin.name), settings)


def backend_context(plugin: BackendPlugin, settings: ResolvedConfig,
                    progress: Callable[[str, int, int], None] | None = None) -> BackendContext:
    """What `plugin.open` gets: the settings and its own block (`memory.<name>`), validated by its
    model with the config file's errors ("did you mean …")."""
    if plugin.config_model is None and plugin_block(settings.memory, plugin.name):
        raise ConfigError(f"memory.{plugin.name}: the {plugin.name} backend takes no settings here",
                          key_path=f"memory.{plugin.name}")
    config = plugin_config(plugin, settings.memory, "memory").get("config")
    return BackendContext(settings=settings, config=config, progress=progress)


def _guarded(
    plugin: BackendPlugin, ctx: BackendContext, progress: Callable[[str, int, int], None] | None
) -> SearchManager:
    """`plugin`'s manager, under a FallbackSearchManager when it has a fallback policy."""
    policy = plugin.fallback(ctx) if plugin.fallback else None
    if policy is None:
        return _opened(plugin, ctx)
    from .fallback import FallbackSearchManager  # noqa: PLC0415

    to = registry.backend(policy.to)
    to_ctx = backend_context(to, ctx.settings, progress)
    primary = _opened(plugin, ctx) if policy.eager else None  # its config errors are told at once
    return FallbackSearchManager(
        (lambda: primary) if primary is not None else (lambda: _opened(plugin, ctx)),
        lambda: _opened(to, to_ctx),
        name=plugin.name,
        fail_closed=policy.fail_closed,
        retry_after_s=policy.retry_after_s,
        primary_budget_s=policy.primary_budget_s,
        not_covered=policy.not_covered,
    )


def _opened(plugin: BackendPlugin, ctx: BackendContext) -> SearchManager:
    """`plugin.open(ctx)`; another package's backend under the guard that turns its crashes into
    BackendErrors naming it (compose/guarded.py)."""
    found = registry.origin("backend", plugin.name)
    if found is None or found.builtin:
        return plugin.open(ctx)
    from .guarded import PluginGuard  # noqa: PLC0415

    where = f"the {plugin.name} backend ({found.package} {found.version})"
    try:
        opened = plugin.open(ctx)
    except (MemsiftError, ValueError):
        raise
    except Exception as exc:  # noqa: BLE001
        raise BackendError(f"{where} failed to open: {type(exc).__name__}: {exc}") from None
    missing = [call for call in MANAGER_CALLS if not callable(getattr(opened, call, None))]
    if missing:  # told before any search, not as an AttributeError inside one
        raise ConfigError(
            f"{where} is no SearchManager for this memsift: it has no {', '.join(missing)}() (a plugin written before "
            "searches came down as one request answers search(query, ...) where answer(request) is called now); "
            "update that package, or pick another backend (`memsift plugins` lists what is installed)",
            key_path="memory.backend")
    return PluginGuard(opened, where)


def _default_max_results(settings: ResolvedConfig, backend: str) -> int:
    plugin = registry.backend(backend)
    if plugin.default_max_results is not None:
        return plugin.default_max_results(settings)
    return settings.memory_search.query.max_results


def ranked(manager: SearchManager, settings: ResolvedConfig, backend: str) -> SearchManager:
    """`manager` under the evidence ranker when `memorySearch.query.ranker.enabled` (the default)."""
    config = settings.memory_search.query.ranker
    if not config.enabled:
        return manager
    from .evidence_stage import EvidenceRankedSearchManager  # noqa: PLC0415

    return EvidenceRankedSearchManager(manager, config, mmr=settings.memory_search.query.hybrid.mmr,
                                       default_max_results=_default_max_results(settings, backend),
                                       expansion=settings.memory_search.query.expansion)


def reranked(manager: SearchManager, settings: ResolvedConfig, backend: str) -> SearchManager:
    """`manager` under the rerank stage when `memorySearch.query.rerank.enabled`, else as it is."""
    config = settings.memory_search.query.rerank
    if not config.enabled:
        return manager
    from ..rerank import create_reranker  # noqa: PLC0415
    from .rerank_stage import RerankingSearchManager  # noqa: PLC0415

    query = settings.memory_search.query
    return RerankingSearchManager(
        manager, config, mmr=query.hybrid.mmr, default_max_results=_default_max_results(settings, backend),
        circuit_path=Path(f"{settings.store_path}.rerank-circuit"), reranker=lambda: create_reranker(config),
    )
