"""Rerankers for the optional rerank stage (`memorySearch.query.rerank`): remote APIs and a local
ONNX cross-encoder, built lazily from config. The stages that apply them live in compose/ (`rerank_stage.py`,
`evidence_stage.py`)."""

from __future__ import annotations

from typing import Any, Mapping

from ..config.models import RerankConfig
from ..errors import ConfigError, ProviderUnavailableError
from .base import Reranker, RerankBudgetExceeded, to_relevance

__all__ = ["Reranker", "RerankBudgetExceeded", "create_reranker", "to_relevance"]

def create_reranker(config: RerankConfig, *, environ: Mapping[str, str] | None = None, **kw: Any) -> Reranker:
    """Build the configured reranker through its plugin (memsift's own register in
    `registered.py`; cheap: no model load, no network). Raises ProviderUnavailableError with the
    fix (a missing key, a folder without its files, a reranker that is not installed)."""
    from ..plugins import registry  # noqa: PLC0415

    from ..config.plugin_blocks import plugin_config  # noqa: PLC0415

    try:
        plugin = registry.load("reranker", config.provider)
    except ConfigError as exc:
        raise ProviderUnavailableError(str(exc)) from None
    return plugin.create(config, environ=environ, **plugin_config(plugin, config, "memorySearch.query.rerank"), **kw)
