"""memsift's own rerankers, registered through the `memsift.rerankers` entry points as a
plugin's would be: a local ONNX cross-encoder and the rerank APIs of Voyage, Cohere, Jina and any
endpoint speaking that API. Adapters are imported when built (httpx or onnxruntime only then)."""

from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

from ..config.models import RerankConfig
from ..embeddings.keys import resolve_api_key
from ..errors import ProviderUnavailableError
from ..plugins import RerankerPlugin
from ..secrets import carries_credentials, register_header_secrets
from .base import Reranker

KEY_PATH = "memorySearch.query.rerank.remote.apiKey"


def _create_local(config: RerankConfig, *, environ: Mapping[str, str] | None = None, **kw: Any) -> Reranker:
    from .local import LocalCrossEncoder  # noqa: PLC0415

    reranker = LocalCrossEncoder(
        config.model_path or "", max_tokens=config.max_tokens, batch_size=config.batch_size, **kw
    )
    reranker.check_setup()
    return reranker


def _remote(provider_id: str, name: str):  # noqa: ANN202
    def create(config: RerankConfig, *, environ: Mapping[str, str] | None = None, **kw: Any) -> Reranker:
        cls = getattr(importlib.import_module(".remote", __package__), name)
        remote = config.remote
        configured = remote.api_key.get_secret_value() if remote.api_key else None
        # A self-hosted endpoint usually has no key; the hosted APIs need one.
        required = provider_id != "endpoint" and not carries_credentials(remote.base_url, remote.headers)
        key = resolve_api_key(provider_id, configured, required=required,
                              environ=os.environ if environ is None else environ, key_path=KEY_PATH)
        register_header_secrets(remote.headers)
        base_url = remote.base_url or cls.default_base_url
        if not base_url:
            raise ProviderUnavailableError("the endpoint reranker needs memorySearch.query.rerank.remote.baseUrl")
        return cls(
            model=config.model or cls.default_model,
            base_url=base_url,
            headers=dict(remote.headers),
            api_key=key,
            batch_size=config.batch_size,
            max_tokens=config.max_tokens,
            **kw,
        )

    return create


local = RerankerPlugin("local", _create_local, "an ONNX cross-encoder on disk (memorySearch.query.rerank.modelPath)")
voyage = RerankerPlugin("voyage", _remote("voyage", "VoyageReranker"), "Voyage AI rerank API")
cohere = RerankerPlugin("cohere", _remote("cohere", "CohereReranker"), "Cohere rerank API")
jina = RerankerPlugin("jina", _remote("jina", "JinaReranker"), "Jina rerank API")
endpoint = RerankerPlugin("endpoint", _remote("endpoint", "EndpointReranker"), "any server speaking the rerank API")
