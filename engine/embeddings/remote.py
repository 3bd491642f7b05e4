"""The shared machinery of remote embedding providers, over `httpx.AsyncClient` (no vendor SDKs).

- Texts are grouped into requests by an estimated-token budget (UTF-8 bytes, 8000 per request,
  as the reference estimates) and an item cap per provider; an oversize text goes alone.
- At most `concurrency` requests are in flight at once.
- Retries, timeouts, the host guard and redaction are `engine/http_client.py`'s (shared with the
  remote rerankers).
- Responses are validated: count, dimensions, finite numbers, JSON shape.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Awaitable, Callable, Sequence

import anyio
import httpx
import numpy as np

from ..errors import ProviderError
from ..http_client import RemoteClient, RequestStats, RetryableProviderError
from .base import input_bytes, l2_normalise

__all__ = [
    "RemoteProvider",
    "RetryableProviderError",
    "RequestStats",
    "plan_batches",
    "MAX_BATCH_BYTES",
    "QUERY_TIMEOUT_S",
    "BATCH_TIMEOUT_S",
]

MAX_BATCH_BYTES = 8000  # estimated tokens per request (UTF-8 bytes), as the reference batches
QUERY_TIMEOUT_S = 60.0
BATCH_TIMEOUT_S = 120.0


def plan_batches(texts: Sequence[Any], *, max_bytes: int = MAX_BATCH_BYTES, max_items: int = 2048) -> list[list[int]]:
    """Indices of `texts` grouped into requests under the byte budget and the item cap."""
    batches: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, t in enumerate(texts):
        n = input_bytes(t)
        if current and (size + n > max_bytes or len(current) >= max_items):
            batches.append(current)
            current, size = [], 0
        current.append(i)
        size += n
    if current:
        batches.append(current)
    return batches


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def without_path_end(base_url: str, end: str) -> str:
    """`base_url` less a trailing `end` of its path (any case), its query kept:
    `https://host/v1beta/openai?key=…` → `https://host/v1beta?key=…`."""
    base, sep, query = base_url.partition("?")
    base = base.rstrip("/")
    if base.lower().endswith(end.lower()):
        base = base[: len(base) - len(end)]
    return base + sep + query


class RemoteProvider(RemoteClient):
    """Base class: one model behind one endpoint. Subclasses build requests and parse responses."""

    id = "remote"
    default_model = ""
    default_base_url = ""
    max_input_tokens = 8192
    max_batch_items = 2048
    normalise = False
    model_prefixes: tuple[str, ...] = ()  # accepted in front of a model name and stripped
    scripts: frozenset[str] | None = None  # the hosted models are multilingual

    @classmethod
    def normalise_model(cls, model: str) -> str:
        for prefix in cls.model_prefixes:
            model = model.removeprefix(prefix)
        return model

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        headers: dict[str, str],
        api_key: str | None,
        concurrency: int = 4,
        dimensions: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(base_url=base_url, headers=headers, api_key=api_key, transport=transport, sleep=sleep)
        self.model = model
        self.concurrency = max(1, concurrency)
        self._dims = dimensions
        self.query_timeout = QUERY_TIMEOUT_S
        self.batch_timeout = BATCH_TIMEOUT_S

    # --- identity -----------------------------------------------------------------------------

    @property
    def dimensions(self) -> int | None:
        return self._dims

    def cache_key_data(self) -> dict[str, Any]:
        """What makes vectors comparable: never the key or the Authorization header."""
        headers = sorted(
            (k.lower(), v)
            for k, v in self._extra_headers.items()
            if k.lower() not in ("authorization", "x-goog-api-key")
        )
        return {"provider": self.id, "baseUrl": self.identity_url, "model": self.model, "headers": headers}

    @property
    def fingerprint(self) -> str:
        data = json.dumps(self.cache_key_data(), sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]

    @property
    def max_input_bytes(self) -> int:
        return min(self.max_input_tokens, MAX_BATCH_BYTES)

    # --- embedding ----------------------------------------------------------------------------

    async def embed_batch(self, texts: list[str], *, query: bool) -> list[list[float]]:
        """One request's worth of texts → raw vectors. Implemented per provider."""
        raise NotImplementedError

    def _check(self, vectors: list[Any], expected: int) -> np.ndarray:
        if not isinstance(vectors, list) or len(vectors) != expected:
            got = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
            raise ProviderError(f"{self.id}: expected {expected} embeddings, got {got}")
        try:
            matrix = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError):
            raise ProviderError(f"{self.id}: embeddings are not lists of numbers of one length") from None
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise ProviderError(f"{self.id}: embeddings are not lists of numbers of one length")
        if not np.all(np.isfinite(matrix)):
            raise ProviderError(f"{self.id}: embeddings contain non-finite numbers")
        dims = matrix.shape[1]
        if self._dims is not None and dims != self._dims:
            raise ProviderError(f"{self.id}: model {self.model} returned {dims} dimensions, expected {self._dims}")
        self._dims = dims
        return l2_normalise(matrix) if self.normalise else matrix

    batch_api: Any = None  # a BatchApi when remote.batch is enabled and the provider has one

    async def embed_documents(self, texts: Sequence[Any]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        if self.batch_api is not None and self.batch_api.usable() and all(isinstance(t, str) for t in texts):
            try:
                raw = await self.batch_api.embed(self, texts)
                matrix = self._check(raw, len(texts))
                self.stats.texts += len(texts)
                return matrix
            except ProviderError as exc:
                self.batch_api.record_failure(str(exc))  # then the plain path below answers
        batches = plan_batches(texts, max_items=self.max_batch_items)
        results: list[Any] = [None] * len(batches)  # each filled by its request below
        limiter = anyio.CapacityLimiter(self.concurrency)

        async def run(i: int, idx: list[int]) -> None:
            async with limiter:
                raw = await self.embed_batch([texts[j] for j in idx], query=False)
                results[i] = self._check(raw, len(idx))

        try:
            async with anyio.create_task_group() as tg:
                for i, idx in enumerate(batches):
                    tg.start_soon(run, i, idx)
        except BaseExceptionGroup as group:  # one failed request cancels the rest: report it
            raise _first_leaf(group) from None
        self.stats.texts += len(texts)
        out = np.zeros((len(texts), self._dims or 0), dtype=np.float32)
        for idx, matrix in zip(batches, results):
            out[idx] = matrix
        return out

    async def embed_query(self, text: str) -> np.ndarray:
        raw = await self.embed_batch([text], query=True)
        return self._check(raw, 1)[0]

