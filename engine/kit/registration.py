"""A backend plugin's registration in a few lines: `indexed_backend_plugin` and the settings every
indexed backend has (`IndexedPluginConfig`), which a plugin's own config model extends.

    class QdrantConfig(IndexedPluginConfig):
        url: str | None = Field(None, description="A Qdrant server …")

    backend = indexed_backend_plugin("qdrant", manager="memsift_qdrant.manager:QdrantSearchManager",
                                     config_model=QdrantConfig, description="Qdrant: …")
"""

from __future__ import annotations

import importlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..plugins import BackendContext, BackendPlugin, FallbackPolicy

__all__ = ["IndexedPluginConfig", "indexed_backend_plugin"]

FALLBACK_RETRY_S = 10.0  # how soon a backend that failed is asked again, the builtin index answering meanwhile


class IndexedPluginConfig(BaseModel):
    """`memory.<backend>`: keys in camelCase (as every memsift key), unknown keys refused with a
    "did you mean"."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    fallback: Literal["builtin", "none"] = Field(
        "none", description="`builtin`: when this backend fails (a damaged index, a server down), the builtin index "
                            "answers, saying so."
    )
    keep_generations: int = Field(
        2,
        ge=1,
        description="Complete generations kept after a rebuild (a search that began on the old one finishes on it).",
    )


def indexed_backend_plugin(name: str, *, manager: str, config_model: type[IndexedPluginConfig],
                           description: str) -> BackendPlugin:
    """The `BackendPlugin` of a backend whose manager is an `IndexedManager` subclass taking
    (settings, config, progress). `manager` is "module:Class", imported when the backend is first
    opened, so a command that does not use it never loads its client libraries."""
    module_name, _, class_name = manager.partition(":")
    if not module_name or not class_name:
        raise ValueError(f"manager must be 'module:Class', not {manager!r}")

    def open_manager(ctx: BackendContext):  # noqa: ANN202
        manager_class = getattr(importlib.import_module(module_name), class_name)
        return manager_class(ctx.settings, ctx.config, ctx.progress)

    def fallback(ctx: BackendContext) -> FallbackPolicy | None:
        if ctx.config.fallback == "none":
            return None
        return FallbackPolicy(to="builtin", retry_after_s=FALLBACK_RETRY_S)

    return BackendPlugin(name=name, open=open_manager, config_model=config_model, fallback=fallback,
                         description=description)
