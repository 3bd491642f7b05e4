"""Mistral embeddings: OpenAI-compatible POST {base}/embeddings."""

from __future__ import annotations

from .openai import OpenAIProvider

__all__ = ["MistralProvider"]


class MistralProvider(OpenAIProvider):
    id = "mistral"
    default_model = "mistral-embed"
    default_base_url = "https://api.mistral.ai/v1"
    model_prefixes = ("mistral/",)
    max_input_tokens = 8192
    max_batch_items = 512
