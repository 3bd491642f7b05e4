"""Embedding providers and their selection from config (`provider`, `fallback`, auto order)."""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from ..config.models import MemorySearchConfig
from ..errors import ProviderError, ProviderUnavailableError
from .base import EmbeddingProvider, l2_normalise

__all__ = ["EmbeddingProvider", "ProviderSelection", "create_provider", "select_provider", "l2_normalise"]

# Providers this build can construct. Remote adapters (openai, gemini, voyage, mistral, ollama)
# keep their config keys but are not in this build yet; asking for one is a clear error.
_AUTO_ORDER = ("local",)
log = structlog.get_logger("memsift.embeddings")


def create_provider(provider_id: str, ms: MemorySearchConfig) -> EmbeddingProvider:
    """Build one adapter and run its cheap setup checks (no model load, no network)."""
    if provider_id == "local":
        from .local import LocalMiniLMProvider  # noqa: PLC0415  (imports numpy/onnx lazily)

        provider = LocalMiniLMProvider(ms.local.model_path)
        provider.check_setup()
        if ms.model and ms.model != provider.model:
            # The reference's local model names (hf:…gguf) cannot load here; the file decides.
            log.warning("memorySearch.model is ignored by the local provider; set local.modelPath", model=ms.model)
        return provider
    raise ProviderUnavailableError(
        f"embedding provider {provider_id!r} is not available in this memsift version; "
        "set memorySearch.provider to 'local' or 'auto'"
    )


@dataclass(frozen=True)
class ProviderSelection:
    provider: EmbeddingProvider | None
    requested: str
    unavailable_reason: str | None = None  # why there is no provider (FTS-only mode)
    fallback_from: str | None = None  # the primary that failed when a fallback was taken
    fallback_reason: str | None = None


def select_provider(ms: MemorySearchConfig) -> ProviderSelection:
    """Pick the provider as the reference does (spec 3.12).

    `auto` tries each adapter in order and degrades to FTS-only with the joined reasons. An
    explicit provider fails closed unless a fallback is configured.
    """
    requested = ms.provider
    if requested == "auto":
        reasons = []
        for pid in _AUTO_ORDER:
            try:
                return ProviderSelection(create_provider(pid, ms), requested)
            except ProviderUnavailableError as exc:
                reasons.append(f"{pid}: {exc}")
        return ProviderSelection(None, requested, unavailable_reason="; ".join(reasons))
    try:
        return ProviderSelection(create_provider(requested, ms), requested)
    except ProviderError as primary_exc:
        fb = ms.fallback
        if fb == "none" or fb == requested:
            raise
        try:
            provider = create_provider(fb, ms)
        except ProviderError as fb_exc:
            raise ProviderError(f"{requested}: {primary_exc}; fallback {fb}: {fb_exc}") from None
        return ProviderSelection(provider, requested, fallback_from=requested, fallback_reason=str(primary_exc))
