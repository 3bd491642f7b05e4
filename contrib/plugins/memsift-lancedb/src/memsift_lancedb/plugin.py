"""The registration memsift finds through the `memsift.backends` entry point, and the settings of
`memory.lancedb` (validated by memsift with its "did you mean" errors)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memsift.engine.kit import BackendContext, BackendPlugin, FallbackPolicy


class LanceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    path: str | None = Field(
        None, description="The folder of the agent's Lance database; default `<stateDir>/agents/<agent>/lancedb`."
    )
    fallback: Literal["builtin", "none"] = Field(
        "none", description="`builtin`: when LanceDB fails (a damaged dataset), the builtin index answers, saying so."
    )
    keep_generations: int = Field(
        2, ge=1, description="Complete generations kept after a rebuild (a search that began on the old one finishes on it)."
    )


def _open(ctx: BackendContext):  # noqa: ANN202
    from .manager import LanceSearchManager  # noqa: PLC0415  (lancedb and pyarrow load only when used)

    return LanceSearchManager(ctx.settings, ctx.config, ctx.progress)


def _fallback(ctx: BackendContext) -> FallbackPolicy | None:
    if ctx.config.fallback == "none":
        return None
    return FallbackPolicy(to="builtin", retry_after_s=10.0)


backend = BackendPlugin(
    name="lancedb",
    open=_open,
    config_model=LanceConfig,
    fallback=_fallback,
    description="LanceDB embedded (a Lance dataset per agent): its full-text index and vector search, ranked by memsift",
)
