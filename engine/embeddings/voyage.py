"""Voyage AI embeddings: POST {base}/embeddings with `input_type` query or document."""

from __future__ import annotations

from typing import Any

from .openai import OpenAIProvider

__all__ = ["VoyageProvider"]

_LIMITS = {"voyage-3": 32000, "voyage-3-lite": 16000, "voyage-code-3": 32000}


class VoyageProvider(OpenAIProvider):
    id = "voyage"
    default_model = "voyage-4-large"
    default_base_url = "https://api.voyageai.com/v1"
    max_batch_items = 1000

    @staticmethod
    def normalise_model(model: str) -> str:
        return model.removeprefix("voyage/")

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.max_input_tokens = _LIMITS.get(self.model, 8192)

    async def embed_batch(self, texts: list[str], *, query: bool) -> list[Any]:
        body = {"model": self.model, "input": texts, "input_type": "query" if query else "document"}
        resp = await self.request("POST", "embeddings", json_body=body, timeout=self.query_timeout if query else self.batch_timeout)
        return self.parse_data(resp)
