"""memsift's own embedding providers, registered through the `memsift.providers` entry points as
a plugin's would be. `auto` tries a configured local model file first, then the hosted APIs whose
key is found (openai, gemini, voyage, mistral), then the bundled local model; ollama only when asked."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Mapping

from ..config.models import MemorySearchConfig
from ..logging import get_logger
from ..plugins import ProviderPlugin
from ..secrets import carries_credentials, register_header_secrets
from .base import EmbeddingProvider
from .keys import resolve_api_key

log = get_logger("memsift.embeddings")

_BATCH_APIS = {"openai": "OpenAIBatchApi", "gemini": "GeminiBatchApi"}


def _create_local(ms: MemorySearchConfig, *, primary: bool = True, environ: Mapping[str, str] | None = None,
                  **kw: Any) -> EmbeddingProvider:
    from .int8_graph import default_model_cache_dir  # noqa: PLC0415
    from .local import LocalMiniLMProvider  # noqa: PLC0415  (imports numpy/onnx lazily)

    cache_dir = ms.local.model_cache_dir or default_model_cache_dir(os.environ if environ is None else environ)
    provider = LocalMiniLMProvider(ms.local.model_path, cache_dir=cache_dir, notes_model_path=ms.local.notes_model_path)
    provider.check_setup()
    if ms.model and ms.model != provider.model:
        # The reference's local model names (hf:…gguf) cannot load here; the file decides.
        log.warning("memorySearch.model is ignored by the local provider; set local.modelPath", model=ms.model)
    return provider


def _local_model_file(ms: MemorySearchConfig) -> bool:
    p = ms.local.model_path
    return p is not None and bool(p) and not p.startswith(("hf:", "http:", "https:")) and Path(p).expanduser().exists()


def _remote(provider_id: str, module: str, name: str):  # noqa: ANN202
    def create(ms: MemorySearchConfig, *, primary: bool = True, environ: Mapping[str, str] | None = None,
               **kw: Any) -> EmbeddingProvider:
        remote = ms.remote
        configured_key = remote.api_key.get_secret_value() if (primary and remote.api_key) else None
        # The key first: `auto` with no keys moves on without importing the adapter (and httpx).
        # A key is needed unless the provider takes none (Ollama) or the URL or headers carry one.
        required = provider_id != "ollama" and not (primary and carries_credentials(remote.base_url, remote.headers))
        key = resolve_api_key(provider_id, configured_key, required=required, environ=environ)
        if primary:
            register_header_secrets(remote.headers)
        cls = getattr(importlib.import_module(f".{module}", __package__), name)
        args: dict[str, Any] = {
            "model": cls.normalise_model((ms.model if primary else "") or cls.default_model),
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

    return create


local = ProviderPlugin(
    "local",
    _create_local,
    "the bundled all-MiniLM-L6-v2 (ONNX, offline, no key), or local.modelPath",
    auto_rank=100,
    preferred=_local_model_file,
)
openai = ProviderPlugin(
    "openai", _remote("openai", "openai", "OpenAIProvider"), "OpenAI or any OpenAI-compatible endpoint", auto_rank=10
)
gemini = ProviderPlugin(
    "gemini", _remote("gemini", "gemini", "GeminiProvider"), "Google Gemini embeddings", auto_rank=20
)
voyage = ProviderPlugin("voyage", _remote("voyage", "voyage", "VoyageProvider"), "Voyage AI embeddings", auto_rank=30)
mistral = ProviderPlugin(
    "mistral", _remote("mistral", "mistral", "MistralProvider"), "Mistral embeddings", auto_rank=40
)
ollama = ProviderPlugin(
    "ollama", _remote("ollama", "ollama", "OllamaProvider"), "a local Ollama server (never auto-selected)"
)
