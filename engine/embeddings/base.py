"""The `EmbeddingProvider` protocol: what the index needs from any embedding model."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from ..lazy import np  # numpy on first use: a keyword search never needs it

__all__ = ["EmbeddingProvider", "MultimodalInput", "l2_normalise", "input_bytes"]


@runtime_checkable
class EmbeddingProvider(Protocol):
    """One embedding model behind one endpoint.

    `fingerprint` changes whenever vectors from this provider stop being comparable with vectors
    it made before (another model file, tokenizer, endpoint or dimension), which forces a reindex.
    """

    id: str  # adapter id: "local", "openai", ...
    model: str
    max_input_tokens: int
    # Writing systems the model was trained on ("Latin", "Han", "Kana", ...; see engine/search/scripts.py),
    # or None: multilingual or unknown. A query mostly outside them is searched by keyword only.
    scripts: frozenset[str] | None

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


@dataclass(frozen=True)
class MultimodalInput:
    """An image or audio file to embed (Gemini embedding 2): a text label plus the bytes."""

    label: str  # "Image file: memory/diagram.png"
    mime_type: str
    data: bytes

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


def input_bytes(item: str | MultimodalInput) -> int:
    """Estimated tokens of one input, as the reference estimates them (UTF-8 or base64 bytes)."""
    if isinstance(item, MultimodalInput):
        return len(item.mime_type) + (len(item.data) + 2) // 3 * 4 + len(item.label.encode())
    return len(item.encode("utf-8", "replace"))


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation; non-finite values become 0 and zero rows stay zero."""
    m = np.nan_to_num(np.asarray(matrix, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
