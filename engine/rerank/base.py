"""The `Reranker` protocol and what every reranker shares: scores to a 0..1 relevance, the parse of
the rerank APIs' `{index, score}` lists."""

from __future__ import annotations

import math
from typing import Any, Protocol, Sequence, runtime_checkable

from ..errors import ProviderError

__all__ = ["Reranker", "RerankBudgetExceeded", "to_relevance", "parse_index_scores"]


class RerankBudgetExceeded(ProviderError):
    """The reranker stopped because the stage's budget ran out (between batches). `failure`: the
    error of the request that could not be retried in time (an HTTP 500…), when that is why."""

    def __init__(self, message: str, *, failure: str | None = None) -> None:
        super().__init__(message)
        self.failure = failure


@runtime_checkable
class Reranker(Protocol):
    id: str
    model: str
    # True: raw scores are logits (a sigmoid maps them to 0..1); None: decided per answer (see to_relevance).
    logits: bool | None

    @property
    def fingerprint(self) -> str: ...

    async def score(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        """One raw score per document, in order. `deadline` is a `time.monotonic()` instant."""
        ...

    def status(self) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def to_relevance(raw: Sequence[float], logits: bool | None) -> list[float]:
    """Raw scores → relevance in 0..1. Hosted rerankers (Voyage, Cohere, Jina) and TEI, vLLM and
    Infinity by default answer in 0..1 already; a cross-encoder's logit (the local model,
    llama.cpp's server) does not. With `logits` None the answer decides: any score outside 0..1
    means logits, and all of them go through the sigmoid (one rule per answer keeps the order)."""
    as_logits = logits if logits is not None else any(s < 0.0 or s > 1.0 for s in raw)
    return [_sigmoid(s) for s in raw] if as_logits else [float(s) for s in raw]


def parse_index_scores(provider: str, body: Any, expected: int) -> list[float]:
    """Scores in document order from any of the rerank response shapes:
    `[{index, score}]` (TEI), `{results: [{index, relevance_score}]}` (Cohere, Jina, vLLM,
    llama.cpp, Infinity), `{data: [{index, relevance_score}]}` (Voyage)."""
    items = body
    if isinstance(body, dict):
        items = body.get("results", body.get("data"))
    if not isinstance(items, list):
        raise ProviderError(f"{provider}: the rerank answer has no results list")
    scores: list[float | None] = [None] * expected
    for item in items:
        if not isinstance(item, dict):
            raise ProviderError(f"{provider}: a rerank result is not an object")
        index = item.get("index")
        value = item.get("relevance_score", item.get("score"))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < expected:
            raise ProviderError(f"{provider}: a rerank result has index {index!r}, expected 0..{expected - 1}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ProviderError(f"{provider}: a rerank result has score {str(value)[:40]!r}, not a finite number")
        scores[index] = float(value)
    missing = sum(s is None for s in scores)
    if missing:
        raise ProviderError(f"{provider}: the rerank answer scored {expected - missing} of {expected} documents")
    return [s for s in scores if s is not None]
