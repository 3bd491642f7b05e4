"""Gemini embeddings: `:embedContent` for queries, `:batchEmbedContents` for documents.

The key goes in the `x-goog-api-key` header. `gemini-embedding-2-preview` takes
`outputDimensionality` (768, 1536 or 3072; 3072 by default) and embeds images and audio as
inline data next to a text label (multimodal). Vectors are L2-normalised.
"""

from __future__ import annotations

from typing import Any

from ..errors import ProviderError
from .base import MultimodalInput
from .remote import RemoteProvider, without_path_end

__all__ = ["GeminiProvider", "EMBEDDING_2"]

EMBEDDING_2 = "gemini-embedding-2-preview"


class GeminiProvider(RemoteProvider):
    id = "gemini"
    default_model = "gemini-embedding-001"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    model_prefixes = ("models/", "gemini/", "google/")
    max_batch_items = 100
    normalise = True

    def __init__(self, *, output_dimensionality: int | None = None, **kw: Any) -> None:
        kw["base_url"] = without_path_end(kw["base_url"], "/openai")  # the OpenAI-compatible path's root
        super().__init__(**kw)
        self.max_input_tokens = 8192 if self.model == EMBEDDING_2 else 2048
        self.output_dimensionality = (output_dimensionality or 3072) if self.model == EMBEDDING_2 else None
        if self.output_dimensionality:
            self._dims = self.output_dimensionality

    @property
    def supports_multimodal(self) -> bool:
        return self.model == EMBEDDING_2

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key} if self._api_key else {}

    def cache_key_data(self) -> dict[str, Any]:
        return {**super().cache_key_data(), "outputDimensionality": self.output_dimensionality}

    def content(self, item: str | MultimodalInput) -> dict[str, Any]:
        if isinstance(item, MultimodalInput):
            if not self.supports_multimodal:
                raise ProviderError(f"gemini: model {self.model} cannot embed images or audio")
            return {
                "parts": [{"text": item.label}, {"inlineData": {"mimeType": item.mime_type, "data": item.base64()}}]
            }
        return {"parts": [{"text": item}]}

    def embed_request(self, item: str | MultimodalInput, task: str) -> dict[str, Any]:
        req: dict[str, Any] = {"model": f"models/{self.model}", "content": self.content(item), "taskType": task}
        if self.output_dimensionality:
            req["outputDimensionality"] = self.output_dimensionality
        return req

    async def embed_batch(self, texts: list[Any], *, query: bool) -> list[Any]:
        if query:
            req = self.embed_request(texts[0], "RETRIEVAL_QUERY")
            req.pop("model")
            body = await self.request(
                "POST", f"models/{self.model}:embedContent", json_body=req, timeout=self.query_timeout
            )
            try:
                return [body["embedding"]["values"]]
            except (KeyError, TypeError):
                return []
        requests = [self.embed_request(t, "RETRIEVAL_DOCUMENT") for t in texts]
        body = await self.request(
            "POST",
            f"models/{self.model}:batchEmbedContents",
            json_body={"requests": requests},
            timeout=self.batch_timeout,
        )
        try:
            return [e["values"] for e in body["embeddings"]]
        except (KeyError, TypeError):
            return []
