"""Remote rerankers: Voyage (`/v1/rerank`), Cohere (`/v2/rerank`), Jina (`/v1/rerank`) and a generic
endpoint in the shape TEI, llama.cpp's server, vLLM and Infinity serve at `{baseUrl}/rerank`.

Requests, retries, timeouts, the host guard and redaction are `RemoteClient`'s (the embedding
providers' client); documents are grouped with the embedding providers' `plan_batches`. Each
request's timeout is what is left of the stage's budget, so retries never outlive it.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import time
from typing import Any, Sequence

import anyio
from tenacity import RetryCallState

from ..embeddings.remote import plan_batches
from ..http_client import RemoteClient
from .base import RerankBudgetExceeded, parse_index_scores

__all__ = ["RemoteReranker", "VoyageReranker", "CohereReranker", "JinaReranker", "EndpointReranker"]

BATCH_BYTES = 200_000  # rerank APIs take large requests; batches are cut by `batchSize` documents

# The running search's deadline, per task (concurrent searches share one reranker).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("rerank_deadline", default=None)
_LAST_ERROR: contextvars.ContextVar[str | None] = contextvars.ContextVar("rerank_last_error", default=None)


class RemoteReranker(RemoteClient):
    """One rerank model behind one endpoint; subclasses say how to ask."""

    default_model = ""
    default_base_url = ""
    path = "rerank"
    logits: bool | None = False  # hosted rerankers answer relevance in 0..1

    def __init__(self, *, model: str, base_url: str, headers: dict[str, str], api_key: str | None,
                 batch_size: int = 16, max_tokens: int = 256, **kw: Any) -> None:
        super().__init__(base_url=base_url, headers=headers, api_key=api_key, **kw)
        self.model = model
        self.batch_size = max(1, batch_size)
        self.max_tokens = max_tokens

    @property
    def fingerprint(self) -> str:
        data = json.dumps({"provider": self.id, "baseUrl": self.identity_url, "model": self.model}, sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]

    def request_body(self, query: str, documents: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    # A retry that would wait past the budget is not waited for: the stage fails at once with the
    # server's own error (an HTTP 500 says so) instead of a bare "budget exceeded".
    def _count_retry(self, state: RetryCallState) -> None:
        super()._count_retry(state)
        exc = state.outcome.exception() if state.outcome else None
        _LAST_ERROR.set(str(exc) if exc else None)

    async def _record_sleep(self, seconds: float) -> None:
        deadline = _DEADLINE.get()
        if deadline is not None and time.monotonic() + seconds >= deadline:
            raise RerankBudgetExceeded(
                f"{_LAST_ERROR.get()}; no time left in the budget for a retry in {seconds:.1f} s",
                failure=_LAST_ERROR.get(),
            )
        await super()._record_sleep(seconds)

    async def score(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        documents = list(documents)
        if not documents:
            return []
        _DEADLINE.set(deadline)
        batches = plan_batches(documents, max_bytes=BATCH_BYTES, max_items=self.batch_size)
        scores: list[float] = [0.0] * len(documents)

        async def run(idx: list[int]) -> None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RerankBudgetExceeded(f"{self.id}: the rerank budget ran out before a request was sent")
            body = await self.request(
                "POST", self.path, json_body=self.request_body(query, [documents[i] for i in idx]), timeout=left
            )
            for i, s in zip(idx, parse_index_scores(self.id, body, len(idx))):
                scores[i] = s

        try:
            async with anyio.create_task_group() as tg:
                for idx in batches:
                    tg.start_soon(run, idx)
        except BaseExceptionGroup as group:  # one failed request cancels the rest: report it
            exc: BaseException = group
            while isinstance(exc, BaseExceptionGroup):
                exc = exc.exceptions[0]
            raise exc from None
        self.stats.texts += len(documents)
        return scores

    def status(self) -> dict[str, Any]:
        return {"baseUrl": self.identity_url, "requests": self.stats.as_dict()}


class VoyageReranker(RemoteReranker):
    """POST /v1/rerank {query, documents, model, truncation} → {data: [{index, relevance_score}]}."""

    id = "voyage"
    default_model = "rerank-2.5"
    default_base_url = "https://api.voyageai.com/v1"

    def request_body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {"query": query, "documents": documents, "model": self.model, "truncation": True}


class CohereReranker(RemoteReranker):
    """POST /v2/rerank {model, query, documents, max_tokens_per_doc} → {results: [{index, relevance_score}]}."""

    id = "cohere"
    default_model = "rerank-v3.5"
    default_base_url = "https://api.cohere.com/v2"

    def request_body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {"model": self.model, "query": query, "documents": documents, "max_tokens_per_doc": self.max_tokens}


class JinaReranker(RemoteReranker):
    """POST /v1/rerank {model, query, documents, return_documents} → {results: [{index, relevance_score}]}."""

    id = "jina"
    default_model = "jina-reranker-v2-base-multilingual"
    default_base_url = "https://api.jina.ai/v1"

    def request_body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {"model": self.model, "query": query, "documents": documents, "return_documents": False}


class EndpointReranker(RemoteReranker):
    """A self-hosted server at `{baseUrl}/rerank`. The servers differ in field names: TEI reads
    `texts` and answers `[{index, score}]`; llama.cpp, vLLM and Infinity read `documents` and answer
    `{results: [{index, relevance_score}]}`. The request carries both names (each server ignores the
    one it does not know) and every answer shape is read. llama.cpp answers logits, the others
    0..1 by default: the answer decides (`to_relevance`)."""

    id = "endpoint"
    logits = None

    def request_body(self, query: str, documents: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "documents": documents, "texts": documents, "truncate": True,
                                "raw_scores": False, "return_documents": False}
        if self.model:
            body["model"] = self.model
        return body
