"""OpenAI embeddings, and any OpenAI-compatible endpoint (`remote.baseUrl`): POST {base}/embeddings."""

from __future__ import annotations

from typing import Any

from .remote import RemoteProvider

__all__ = ["OpenAIProvider"]


class OpenAIProvider(RemoteProvider):
    id = "openai"
    default_model = "text-embedding-3-small"
    default_base_url = "https://api.openai.com/v1"
    model_prefixes = ("openai/",)
    max_input_tokens = 8192
    max_batch_items = 2048

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        if self.model == "text-embedding-ada-002":
            self.max_input_tokens = 8191

    def request_body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        return {"model": self.model, "input": texts}

    @staticmethod
    def parse_data(body: Any) -> list[Any]:
        """`{"data": [{"embedding": [...], "index": i}, ...]}`, ordered by index."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            return []  # a shape error: the count check names it
        try:
            ordered = sorted(data, key=lambda d: d.get("index", 0))
            return [d["embedding"] for d in ordered]
        except (AttributeError, KeyError, TypeError):
            return []

    async def embed_batch(self, texts: list[str], *, query: bool) -> list[Any]:
        body = await self.request(
            "POST",
            "embeddings",
            json_body=self.request_body(texts, query=query),
            timeout=self.query_timeout if query else self.batch_timeout,
        )
        return self.parse_data(body)
