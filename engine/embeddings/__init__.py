"""Embedding providers and their selection from config (`provider`, `fallback`, the auto order).

Adapters are imported lazily from `_ADAPTERS`, so a missing optional dependency is an install
hint, not an ImportError at start-up.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..logging import get_logger
from ..config.models import MemorySearchConfig
from ..errors import ProviderError, ProviderUnavailableError
from ..secrets import register_header_secrets
from .base import EmbeddingProvider, MultimodalInput, l2_normalise
from .keys import MissingKeyError, resolve_api_key

__all__ = [
    "EmbeddingProvider",
    "MultimodalInput",
    "ProviderSelection",
    "create_provider",
    "select_provider",
    "l2_normalise",
    "AUTO_ORDER",
]

log = get_logger("memsift.embeddings")

# id → (module, class). Ollama is never auto-selected.
_ADAPTERS = {
    "openai": ("openai", "OpenAIProvider"),
    "gemini": ("gemini", "GeminiProvider"),
    "voyage": ("voyage", "VoyageProvider"),
    "mistral": ("mistral", "MistralProvider"),
    "ollama": ("ollama", "OllamaProvider"),
}
AUTO_ORDER = ("openai", "gemini", "voyage", "mistral")  # after a configured local.modelPath
_BATCH_APIS = {"openai": "OpenAIBatchApi", "gemini": "GeminiBatchApi"}


def _local(ms: MemorySearchConfig, environ: Mapping[str, str] | None = None) -> EmbeddingProvider:
    from .int8_graph import default_model_cache_dir  # noqa: PLC0415
    from .local import LocalMiniLMProvider  # noqa: PLC0415  (imports numpy/onnx lazily)

    cache_dir = ms.local.model_cache_dir or default_model_cache_dir(os.environ if environ is None else environ)
    provider = LocalMiniLMProvider(ms.local.model_path, cache_dir=cache_dir)
    provider.check_setup()
    if ms.model and ms.model != provider.model:
        # The reference's local model names (hf:…gguf) cannot load here; the file decides.
        log.warning("memorySearch.model is ignored by the local provider; set local.modelPath", model=ms.model)
    return provider


def create_provider(
    provider_id: str,
    ms: MemorySearchConfig,
    *,
    primary: bool = True,
    environ: Mapping[str, str] | None = None,
    **kw: Any,
) -> EmbeddingProvider:
    """Build one adapter and run its cheap setup checks (no model load, no network).

    `remote.*` and `model` apply to the configured (primary) provider only: a fallback adapter
    uses its own default model, endpoint and environment key, so one vendor's key is never sent
    to another.
    """
    if provider_id == "local":
        return _local(ms, environ)
    if provider_id not in _ADAPTERS:
        raise ProviderUnavailableError(f"unknown embedding provider {provider_id!r}")
    remote = ms.remote
    configured_key = remote.api_key.get_secret_value() if (primary and remote.api_key) else None
    # The key first: `auto` with no keys moves on without importing the adapter (and httpx).
    key = resolve_api_key(provider_id, configured_key, required=provider_id != "ollama", environ=environ)
    if primary:
        register_header_secrets(remote.headers)
    module, name = _ADAPTERS[provider_id]
    cls = getattr(importlib.import_module(f".{module}", __name__), name)
    model = cls.normalise_model((ms.model if primary else "") or cls.default_model)
    args: dict[str, Any] = {
        "model": model,
        "base_url": (remote.base_url if primary else None) or cls.default_base_url,
        "headers": dict(remote.headers) if primary else {},
        "api_key": key,
        "concurrency": remote.batch.concurrency if remote.batch.enabled else 4,
        **kw,
    }
    if provider_id == "gemini":
        args["output_dimensionality"] = ms.output_dimensionality
    provider = cls(**args)
    if remote.batch.enabled and provider_id in _BATCH_APIS:
        from . import batch_api  # noqa: PLC0415

        provider.batch_api = getattr(batch_api, _BATCH_APIS[provider_id]).from_config(remote.batch)
    return provider


@dataclass(frozen=True)
class ProviderSelection:
    provider: EmbeddingProvider | None
    requested: str
    unavailable_reason: str | None = None  # why there is no provider (FTS-only mode)
    fallback_from: str | None = None  # the primary that failed when the fallback was taken
    fallback_reason: str | None = None
    fallback_id: str | None = None  # the configured fallback, for a switch at run time


def _auto_reason(failures: list[tuple[str, ProviderUnavailableError]]) -> str:
    """Why `auto` found nothing, the fixable cause first (a broken local model), and the missing
    keys in one clause rather than four sentences."""
    missing = [pid for pid, exc in failures if isinstance(exc, MissingKeyError)]
    parts = [f"{pid}: {exc}" for pid, exc in failures if not isinstance(exc, MissingKeyError)]
    if missing:
        parts.append(f"no API key for {', '.join(missing)} (e.g. set OPENAI_API_KEY)")
    return "; ".join(parts)


def _local_model_file(ms: MemorySearchConfig) -> bool:
    p = ms.local.model_path
    return bool(p) and not p.startswith(("hf:", "http:", "https:")) and Path(p).expanduser().exists()


def select_provider(ms: MemorySearchConfig, *, environ: Mapping[str, str] | None = None, **kw: Any) -> ProviderSelection:
    """Pick the provider as the reference does (spec 3.12), with the embedded model as the keyless default.

    `auto`: a configured local model file first, then openai, gemini, voyage, mistral (each only
    when its key is found), then the embedded local model; if none can be set up, FTS-only with the
    joined reasons. An explicit provider fails closed unless a fallback is configured.
    """
    env = os.environ if environ is None else environ
    requested = ms.provider
    if requested == "none":
        return ProviderSelection(None, requested, unavailable_reason='provider is "none": keyword search only')
    fb = ms.fallback if ms.fallback not in ("none", requested) else None
    if requested == "auto":
        order = (["local"] if _local_model_file(ms) else []) + list(AUTO_ORDER) + ["local"]
        failures: list[tuple[str, ProviderUnavailableError]] = []
        for pid in dict.fromkeys(order):
            try:
                provider = create_provider(pid, ms, environ=env, **kw)
                log.info("auto-selected embedding provider", provider=pid, model=provider.model)
                return ProviderSelection(provider, requested, fallback_id=fb)
            except ProviderUnavailableError as exc:
                failures.append((pid, exc))
        return ProviderSelection(None, requested, unavailable_reason=_auto_reason(failures))
    try:
        return ProviderSelection(create_provider(requested, ms, environ=env, **kw), requested, fallback_id=fb)
    except ProviderError as primary_exc:
        if fb is None:
            raise
        try:
            provider = create_provider(fb, ms, primary=False, environ=env, **kw)
        except ProviderError as fb_exc:
            raise ProviderError(f"{requested}: {primary_exc}; fallback {fb}: {fb_exc}") from None
        log.warning("embedding provider unavailable; using the fallback", requested=requested, fallback=fb)
        return ProviderSelection(
            provider, requested, fallback_from=requested, fallback_reason=str(primary_exc), fallback_id=fb
        )
