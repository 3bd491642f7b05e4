"""The registration memsift finds through the `memsift.backends` entry point, and the settings of
`memory.qdrant` (validated by memsift with its "did you mean" errors)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memsift.engine.kit import BackendContext, BackendPlugin, FallbackPolicy


class QdrantConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    url: str | None = Field(
        None, description="A Qdrant server (`http://host:6333`); unset: Qdrant's local mode in `path` (one process at a time)."
    )
    api_key_env: str | None = Field(
        None, description="The environment variable holding the server's API key (the key itself never sits in the config)."
    )
    path: str | None = Field(
        None, description="Local mode's folder; default `<stateDir>/agents/<agent>/qdrant`."
    )
    collection_prefix: str = Field(
        "memsift", pattern=r"^[A-Za-z0-9_-]{1,40}$", description="Collections are named `<prefix>_<agent>_…`."
    )
    timeout_s: float = Field(10.0, gt=0, description="Seconds a request to the server may take.")
    fallback: Literal["builtin", "none"] = Field(
        "none", description="`builtin`: when Qdrant fails (a server down), the builtin index answers, saying so."
    )
    keep_generations: int = Field(
        2, ge=1, description="Complete generations kept after a rebuild (a search that began on the old one finishes on it)."
    )


def _open(ctx: BackendContext):  # noqa: ANN202
    from .manager import QdrantSearchManager  # noqa: PLC0415  (qdrant-client loads only when used)

    return QdrantSearchManager(ctx.settings, ctx.config, ctx.progress)


def _fallback(ctx: BackendContext) -> FallbackPolicy | None:
    if ctx.config.fallback == "none":
        return None
    return FallbackPolicy(to="builtin", retry_after_s=10.0)


backend = BackendPlugin(
    name="qdrant",
    open=_open,
    config_model=QdrantConfig,
    fallback=_fallback,
    description="Qdrant (local mode or a server): BM25 sparse vectors plus dense vectors, ranked by memsift",
)
