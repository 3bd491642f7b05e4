"""The `EmbeddingProvider` protocol: what the index needs from any embedding model."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["EmbeddingProvider", "l2_normalise"]


@runtime_checkable
class EmbeddingProvider(Protocol):
    """One embedding model behind one endpoint.

    `fingerprint` changes whenever vectors from this provider stop being comparable with vectors
    it made before (another model file, tokenizer, endpoint or dimension), which forces a reindex.
    """

    id: str  # adapter id: "local", "openai", ...
    model: str
    max_input_tokens: int

    @property
    def dimensions(self) -> int | None: ...

    @property
    def fingerprint(self) -> str: ...

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, shape (len(texts), dimensions)."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """One float32 vector."""
        ...

    async def aclose(self) -> None: ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation; non-finite values become 0 and zero rows stay zero."""
    m = np.nan_to_num(np.asarray(matrix, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
