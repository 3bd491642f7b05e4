"""Rerankers for the optional rerank stage (`memorySearch.query.rerank`): remote APIs and a local
ONNX cross-encoder, built lazily from config. The stage itself is `stage.py`."""

from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

from ..config.models import RerankConfig
from ..embeddings.keys import resolve_api_key
from ..errors import ProviderUnavailableError
from ..secrets import register_header_secrets
from .base import Reranker, RerankBudgetExceeded, to_relevance

__all__ = ["Reranker", "RerankBudgetExceeded", "create_reranker", "to_relevance", "RERANK_PROVIDERS"]

# id → (module, class); imported when used, so httpx or onnxruntime load only when needed.
_ADAPTERS = {
    "voyage": ("remote", "VoyageReranker"),
    "cohere": ("remote", "CohereReranker"),
    "jina": ("remote", "JinaReranker"),
    "endpoint": ("remote", "EndpointReranker"),
    "local": ("local", "LocalCrossEncoder"),
}
RERANK_PROVIDERS = tuple(_ADAPTERS)
KEY_PATH = "memorySearch.query.rerank.remote.apiKey"


def create_reranker(config: RerankConfig, *, environ: Mapping[str, str] | None = None, **kw: Any) -> Reranker:
    """Build the configured reranker (cheap: no model load, no network). Raises
    ProviderUnavailableError with the fix (a missing key, a folder without its files)."""
    module, name = _ADAPTERS[config.provider]
    cls = getattr(importlib.import_module(f".{module}", __name__), name)
    if config.provider == "local":
        reranker = cls(config.model_path or "", max_tokens=config.max_tokens, batch_size=config.batch_size, **kw)
        reranker.check_setup()
        return reranker
    remote = config.remote
    configured = remote.api_key.get_secret_value() if remote.api_key else None
    # A self-hosted endpoint usually has no key; the hosted APIs need one.
    key = resolve_api_key(config.provider, configured, required=config.provider != "endpoint",
                          environ=os.environ if environ is None else environ, key_path=KEY_PATH)
    register_header_secrets(remote.headers)
    base_url = remote.base_url or cls.default_base_url
    if not base_url:
        raise ProviderUnavailableError("the endpoint reranker needs memorySearch.query.rerank.remote.baseUrl")
    return cls(model=config.model or cls.default_model, base_url=base_url, headers=dict(remote.headers), api_key=key,
               batch_size=config.batch_size, max_tokens=config.max_tokens, **kw)
