"""A plugin backend's own block, `memory.<name>`: kept as written when the file is read (the
plugin may not be imported yet), validated by the plugin's model when the backend is opened,
with the config file's errors ("memory.lancedb.uri: unknown key (did you mean …)")."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .models import MemoryConfig

__all__ = ["plugin_block", "plugin_blocks", "validate_block"]


def plugin_blocks(memory: MemoryConfig) -> dict[str, dict[str, Any]]:
    """The `memory.<name>` blocks that are no key of memsift's own (each a plugin's)."""
    return dict(memory.model_extra or {})


def plugin_block(memory: MemoryConfig, name: str) -> dict[str, Any] | None:
    return plugin_blocks(memory).get(name)


def validate_block(model: type[BaseModel], data: Any, *, prefix: str) -> BaseModel:
    from .load import _validate  # noqa: PLC0415  (load imports the models; this module is imported by them)

    return _validate(model, data, prefix)
