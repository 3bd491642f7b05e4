"""The Postgres backend's registration (entry point `memsift.backends: postgres`): one shared
database, guarded by the builtin index when `memory.postgres.fallback` is "builtin"."""

from __future__ import annotations

from memsift.engine.plugins import BackendContext, BackendPlugin, FallbackPolicy

# After a Postgres failure the next search within this many seconds answers at once with the
# failure (and when the next try is); the first one after it connects again. A restarted server
# is used by the first search after it is up, give or take this interval.
RETRY_S = 3.0


def _open(ctx: BackendContext):  # noqa: ANN202
    from .manager import PostgresSearchManager  # noqa: PLC0415

    return PostgresSearchManager(ctx.settings)  # checks the driver and the DSN now: a config error is told at once


def _fallback(ctx: BackendContext) -> FallbackPolicy:
    pg = ctx.settings.memory.postgres
    return FallbackPolicy(
        fail_closed=pg.fallback == "none",
        retry_after_s=RETRY_S,
        # connecting, then the statements of one search: past that the answer is an error or the fallback
        primary_budget_s=(pg.connect_timeout_ms + pg.statement_timeout_ms) / 1000,
        eager=True,
    )


backend = BackendPlugin(
    name="postgres",
    open=_open,
    fallback=_fallback,
    description="PostgreSQL + pgvector shared by a fleet, rows keyed by agent, falling back to builtin",
)
