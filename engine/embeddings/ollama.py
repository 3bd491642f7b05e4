"""Ollama embeddings: POST {base}/api/embed with `{model, input: [...]}`. Never auto-selected."""

from __future__ import annotations

from typing import Any

from .remote import RemoteProvider, without_path_end

__all__ = ["OllamaProvider"]

# Popular Ollama embedding models trained on English text only (the rest: multilingual or unknown).
ENGLISH_ONLY = ("nomic-embed-text", "all-minilm", "mxbai-embed-large", "snowflake-arctic-embed")


class OllamaProvider(RemoteProvider):
    id = "ollama"
    default_model = "nomic-embed-text"
    default_base_url = "http://127.0.0.1:11434"
    model_prefixes = ("ollama/",)
    max_input_tokens = 8192
    max_batch_items = 256
    normalise = True

    def __init__(self, **kw: Any) -> None:
        # Ollama's OpenAI-compatible root (`http://host:11434/v1`, what its docs show) names the server
        # whose own API memsift speaks: the `/v1` goes, as OpenClaw drops it.
        super().__init__(**{**kw, "base_url": without_path_end(kw["base_url"], "/v1")})

    @property
    def scripts(self) -> frozenset[str] | None:  # type: ignore[override]  # read from the model's name
        name = self.model.split(":", 1)[0]
        return frozenset({"Latin"}) if name in ENGLISH_ONLY else None

    async def embed_batch(self, texts: list[str], *, query: bool) -> list[Any]:
        body = await self.request(
            "POST", "api/embed", json_body={"model": self.model, "input": texts},
            timeout=self.query_timeout if query else self.batch_timeout,
        )
        embeddings = body.get("embeddings") if isinstance(body, dict) else None
        return embeddings if isinstance(embeddings, list) else []
