"""Embedding providers and their selection from config (`provider`, `fallback`, the auto order).

Providers come from the plugin registry (engine/plugins; memsift's own in `registered.py`), and
their adapters are imported when built, so a missing optional dependency is an install hint, not
an ImportError at start-up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from ..logging import get_logger
from ..config.models import MemorySearchConfig
from ..errors import ConfigError, ProviderError, ProviderUnavailableError
from .base import EmbeddingProvider, MultimodalInput, l2_normalise
from .keys import MissingKeyError

__all__ = [
    "EmbeddingProvider",
    "MultimodalInput",
    "ProviderSelection",
    "create_provider",
    "select_provider",
    "l2_normalise",
    "auto_order",
]

log = get_logger("memsift.embeddings")

def create_provider(
    provider_id: str,
    ms: MemorySearchConfig,
    *,
    primary: bool = True,
    environ: Mapping[str, str] | None = None,
    **kw: Any,
) -> EmbeddingProvider:
    """Build one provider through its plugin (memsift's own register in `registered.py`) and run
    its cheap setup checks (no model load, no network).

    `remote.*` and `model` apply to the configured (primary) provider only: a fallback adapter
    uses its own default model, endpoint and environment key, so one vendor's key is never sent
    to another.
    """
    from ..plugins import registry  # noqa: PLC0415

    from ..config.plugin_blocks import plugin_config  # noqa: PLC0415

    try:
        plugin = registry.load("provider", provider_id)
    except ConfigError as exc:
        raise ProviderUnavailableError(str(exc)) from None
    return plugin.create(ms, primary=primary, environ=environ, **plugin_config(plugin, ms, "memorySearch"), **kw)


def auto_order(ms: MemorySearchConfig) -> list[str]:
    """The providers `auto` tries, in order: a preferred one (a configured local model file),
    then by rank (memsift's own: openai, gemini, voyage, mistral, then the bundled local model)."""
    from ..plugins import registry  # noqa: PLC0415

    plugins = [
        f.plugin for f in registry.installed("provider") if f.plugin is not None and f.plugin.auto_rank is not None
    ]
    preferred = [p.name for p in plugins if p.preferred is not None and p.preferred(ms)]
    ranked = [p.name for p in sorted(plugins, key=lambda p: p.auto_rank)]
    return list(dict.fromkeys(preferred + ranked))


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


def select_provider(
    ms: MemorySearchConfig, *, environ: Mapping[str, str] | None = None, **kw: Any
) -> ProviderSelection:
    """Pick the provider as the reference does (as OpenClaw does; docs/parity.md), with the embedded model as the
    keyless default.

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
        failures: list[tuple[str, ProviderUnavailableError]] = []
        for pid in auto_order(ms):
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
