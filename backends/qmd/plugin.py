"""The QMD backend's registration (entry point `memsift.backends: qmd`): the sidecar, guarded by
the builtin index (unless `memory.qmd.fallback` is "none")."""

from __future__ import annotations

from memsift.engine.config import ResolvedConfig
from memsift.engine.config.coverage import qmd_not_covered
from memsift.engine.plugins import BackendContext, BackendPlugin, FallbackPolicy


def _open(ctx: BackendContext):  # noqa: ANN202
    from .manager import QmdSearchManager  # noqa: PLC0415

    return QmdSearchManager(ctx.settings)


def _fallback(ctx: BackendContext) -> FallbackPolicy:
    qmd = ctx.settings.memory.qmd
    return FallbackPolicy(
        fail_closed=qmd.fallback == "none",
        primary_budget_s=qmd.limits.timeout_ms / 1000,  # a search answers within it (or falls back)
        not_covered=qmd_not_covered(ctx.settings),
    )


def _default_max_results(settings: ResolvedConfig) -> int:
    # QMD answers at most memory.qmd.limits.maxResults hits: its default cut is that, not builtin's.
    return int(settings.memory.qmd.limits.max_results)


backend = BackendPlugin(
    name="qmd",
    open=_open,
    fallback=_fallback,
    default_max_results=_default_max_results,
    description="the QMD command-line tool as a sidecar in its own XDG home, falling back to builtin",
)
