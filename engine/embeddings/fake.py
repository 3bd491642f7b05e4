"""A deterministic, model-free embedding provider for tests (like httpx's MockTransport).

Texts become hashed bags of lowercase words, so texts sharing words are close. It is never
selected by config; tests construct it directly.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from ..text import word_tokens
from .base import l2_normalise

__all__ = ["FakeEmbeddingProvider"]


class FakeEmbeddingProvider:
    id = "fake"
    max_input_tokens = 8192

    def __init__(
        self,
        dims: int = 64,
        *,
        model: str = "fake-bow",
        fail_after: int | None = None,
        scripts: frozenset[str] | None = None,
        delay: float = 0.0,
    ) -> None:
        self.model = model
        self.scripts = scripts
        self._dims = dims
        self.calls: list[int] = []  # batch sizes received, for assertions
        self.fail_after = fail_after  # raise on the call after this many calls (fault injection)
        self.delay = delay  # seconds each call takes (a slow model or endpoint)

    @property
    def dimensions(self) -> int:
        return self._dims

    @property
    def fingerprint(self) -> str:
        return f"{self.model}-{self._dims}"

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self._dims, dtype=np.float32)
        for tok in word_tokens(text):
            h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
            v[h % self._dims] += 1.0
        return v

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        from ..errors import ProviderError  # noqa: PLC0415

        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise ProviderError("fake provider failure (injected)")
        if self.delay:
            import anyio  # noqa: PLC0415

            await anyio.sleep(self.delay)
        self.calls.append(len(texts))
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        return l2_normalise(np.stack([self._vector(t) for t in texts]))

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed_documents([text]))[0]

    async def aclose(self) -> None:
        return None
