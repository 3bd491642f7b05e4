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
    model_prefixes = ("voyage/",)
    max_batch_items = 1000

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.max_input_tokens = _LIMITS.get(self.model, 8192)

    def request_body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        return {"model": self.model, "input": texts, "input_type": "query" if query else "document"}
