"""A plugin's own block (`memory.<backend>`, `memorySearch.<provider>`,
`memorySearch.query.rerank.<reranker>`): kept as written when the file is read (the plugin may
not be imported yet), validated by the plugin's model when it is used, with the config file's
errors ("memory.lancedb.keepGeneration: unknown key (did you mean …)")."""

from __future__ import annotations

from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pydantic import BaseModel


__all__ = ["plugin_block", "plugin_blocks", "plugin_config", "validate_block"]


def plugin_blocks(section: Any) -> dict[str, dict[str, Any]]:
    """The blocks of a section (`memory`, `memorySearch`, `query.rerank`) that are no key of
    memsift's own: each a plugin's."""
    return dict(section.model_extra or {})


def plugin_block(section: Any, name: str) -> dict[str, Any] | None:
    return plugin_blocks(section).get(name)


def plugin_config(plugin: Any, section: Any, prefix: str) -> dict[str, Any]:
    """`{"config": validated block}` for a plugin with a `config_model`, else {} (nothing to pass)."""
    if getattr(plugin, "config_model", None) is None:
        return {}
    return {
        "config": validate_block(
            plugin.config_model, plugin_block(section, plugin.name) or {}, prefix=f"{prefix}.{plugin.name}"
        )
    }


def validate_block(model: type[BaseModel], data: Any, *, prefix: str) -> BaseModel:
    from .load import _validate  # noqa: PLC0415  (load imports the models; this module is imported by them)

    return _validate(model, data, prefix)
