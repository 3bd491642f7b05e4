"""Ollama embeddings: POST {base}/api/embed with `{model, input: [...]}`. Never auto-selected."""

from __future__ import annotations

from typing import Any

from .remote import RemoteProvider

__all__ = ["OllamaProvider"]


class OllamaProvider(RemoteProvider):
    id = "ollama"
    default_model = "nomic-embed-text"
    default_base_url = "http://127.0.0.1:11434"
    model_prefixes = ("ollama/",)
    max_input_tokens = 8192
    max_batch_items = 256
    normalise = True

    async def embed_batch(self, texts: list[str], *, query: bool) -> list[Any]:
        body = await self.request(
            "POST", "api/embed", json_body={"model": self.model, "input": texts},
            timeout=self.query_timeout if query else self.batch_timeout,
        )
        embeddings = body.get("embeddings") if isinstance(body, dict) else None
        return embeddings if isinstance(embeddings, list) else []
