"""The composition layer: config → a ready `SearchManager`. The only engine module that imports backends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from ..logging import get_logger
from ..config import ResolvedConfig, load_config, resolve_agent
from ..errors import ConfigError
from ..manager import SearchManager

__all__ = ["open_manager", "resolve_config", "reranked", "ranked"]

log = get_logger("memsift.factory")


def resolve_config(
    config_path: str | os.PathLike[str] | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    agent: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> ResolvedConfig:
    """Load the config file (and environment) and resolve it for one agent. Relative paths start
    from `cwd` (default: the current folder)."""
    if config_path is not None and cwd is not None:
        config_path = os.path.join(cwd, os.path.expanduser(config_path))
    config, path = load_config(config_path, environ=environ, overrides=overrides)
    return resolve_agent(config, agent_id=agent, workspace=workspace, config_path=path, environ=environ, cwd=cwd)


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

    Raises ConfigError when memory search is disabled. For `qmd`, the QMD sidecar is wrapped with
    a lazily built builtin fallback (unless `memory.qmd.fallback` is "none"); for `postgres`, with
    one when `memory.postgres.fallback` is "builtin". With `memorySearch.query.rerank.enabled`, the
    rerank stage wraps the backend (with its fallback as one). Every backend is wrapped with the
    scope rules (`memory.qmd.scope`), which then hold for search, read and status.
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
    if chosen not in ("builtin", "qmd", "postgres"):
        raise ConfigError(f"unknown backend {chosen!r}; allowed: builtin, qmd, postgres", key_path="memory.backend")
    from memsift.backends.builtin import BuiltinSearchManager  # noqa: PLC0415

    from ..files.coverage import qmd_not_covered, with_qmd_coverage  # noqa: PLC0415

    # The builtin index also covers QMD's own collections: a QMD fallback (and parity) searches the same files.
    builtin_settings = with_qmd_coverage(settings)

    def builtin() -> SearchManager:
        return BuiltinSearchManager(builtin_settings, progress=progress)  # selects its provider when first needed

    from .scoped import scoped  # noqa: PLC0415

    if chosen == "builtin":
        return scoped(reranked(ranked(builtin(), settings, chosen), settings, chosen), settings)
    from .fallback import FallbackSearchManager  # noqa: PLC0415

    if chosen == "postgres":
        from memsift.backends.postgres import PostgresSearchManager  # noqa: PLC0415

        pg = settings.memory.postgres
        primary = PostgresSearchManager(settings)  # checks the driver and the DSN now: a config error is told at once
        return scoped(reranked(ranked(FallbackSearchManager(
            lambda: primary,
            builtin,
            name="postgres",
            fail_closed=pg.fallback == "none",
            retry_after_s=POSTGRES_RETRY_S,
            # connecting, then the statements of one search: past that the answer is an error or the fallback
            primary_budget_s=(pg.connect_timeout_ms + pg.statement_timeout_ms) / 1000,
        ), settings, chosen), settings, chosen), settings)
    from memsift.backends.qmd import QmdSearchManager  # noqa: PLC0415

    qmd = settings.memory.qmd
    return scoped(reranked(ranked(FallbackSearchManager(
        lambda: QmdSearchManager(settings),
        builtin,
        name="qmd",
        fail_closed=qmd.fallback == "none",
        primary_budget_s=qmd.limits.timeout_ms / 1000,  # a search answers within it (or falls back)
        not_covered=qmd_not_covered(settings),
    ), settings, chosen), settings, chosen), settings)


# After a Postgres failure the next search within this many seconds answers at once with the
# failure (and when the next try is); the first one after it connects again. A restarted server
# is used by the first search after it is up, give or take this interval.
POSTGRES_RETRY_S = 3.0


def _default_max_results(settings: ResolvedConfig, backend: str) -> int:
    # QMD answers at most memory.qmd.limits.maxResults hits: its default cut is that, not builtin's.
    if backend == "qmd":
        return int(settings.memory.qmd.limits.max_results)
    return settings.memory_search.query.max_results


def ranked(manager: SearchManager, settings: ResolvedConfig, backend: str) -> SearchManager:
    """`manager` under the evidence ranker when `memorySearch.query.ranker.enabled` (the default)."""
    config = settings.memory_search.query.ranker
    if not config.enabled:
        return manager
    from ..rerank.evidence_stage import EvidenceRankedSearchManager  # noqa: PLC0415

    return EvidenceRankedSearchManager(manager, config, mmr=settings.memory_search.query.hybrid.mmr,
                                       default_max_results=_default_max_results(settings, backend))


def reranked(manager: SearchManager, settings: ResolvedConfig, backend: str) -> SearchManager:
    """`manager` under the rerank stage when `memorySearch.query.rerank.enabled`, else as it is."""
    config = settings.memory_search.query.rerank
    if not config.enabled:
        return manager
    from ..rerank import create_reranker  # noqa: PLC0415
    from ..rerank.stage import RerankingSearchManager  # noqa: PLC0415

    query = settings.memory_search.query
    return RerankingSearchManager(
        manager, config, mmr=query.hybrid.mmr, default_max_results=_default_max_results(settings, backend),
        circuit_path=Path(f"{settings.store_path}.rerank-circuit"), reranker=lambda: create_reranker(config),
    )
