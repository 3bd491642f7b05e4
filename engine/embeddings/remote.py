"""The shared machinery of remote embedding providers, over `httpx.AsyncClient` (no vendor SDKs).

- Texts are grouped into requests by an estimated-token budget (UTF-8 bytes, 8000 per request,
  as the reference estimates) and an item cap per provider; an oversize text goes alone.
- At most `concurrency` requests are in flight at once.
- Retries (tenacity): only on 429, 5xx and timeouts; up to 3 retries, 0.5 s doubling with 0–20 %
  jitter capped at 8 s, or the server's `Retry-After` (capped at 60 s).
- Responses are validated: count, dimensions, finite numbers, JSON shape.
- Keys go in headers, never in URLs; every error text is redacted before it leaves.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence
from urllib.parse import urlsplit

import anyio
import httpx
import numpy as np
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from ..errors import ProviderError
from ..secrets import masked_cut, redact
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
MAX_RETRIES = 3
RETRY_AFTER_CAP_S = 60.0


class RetryableProviderError(ProviderError):
    """A 429, a 5xx or a timeout: worth another try."""

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


@dataclass
class RequestStats:
    """What the provider did on the wire, for status and the closing figures."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    texts: int = 0
    last_error: str | None = None
    sleeps: list[float] = field(default_factory=list)  # waits before retries, in seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "retries": self.retries,
            "failures": self.failures,
            "texts": self.texts,
            "lastError": self.last_error,
        }


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


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


ERROR_DETAIL_CHARS = 300


def _error_detail(response: httpx.Response) -> str:
    """The provider's own error message, from any of the usual error body shapes: masked, then
    cut (a key echoed at character 290 must not leave as its first 10 characters)."""
    try:
        body = response.json()
    except ValueError:
        return masked_cut(response.text[:65536], ERROR_DETAIL_CHARS)
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message", body)))
        if isinstance(err, dict):
            err = err.get("message") or err.get("status") or json.dumps(err)
        return masked_cut(str(err)[:65536], ERROR_DETAIL_CHARS)
    return masked_cut(str(body)[:65536], ERROR_DETAIL_CHARS)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


class RemoteProvider:
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
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._host = urlsplit(self.base_url).netloc
        self._api_key = api_key
        self._extra_headers = dict(headers)
        self.concurrency = max(1, concurrency)
        self._dims = dimensions
        self._transport = transport
        self._sleep = sleep or anyio.sleep
        self.query_timeout = QUERY_TIMEOUT_S
        self.batch_timeout = BATCH_TIMEOUT_S
        self._client: httpx.AsyncClient | None = None
        self._client_loop: Any = None
        self.stats = RequestStats()

    # --- identity -----------------------------------------------------------------------------

    @property
    def dimensions(self) -> int | None:
        return self._dims

    def cache_key_data(self) -> dict[str, Any]:
        """What makes vectors comparable: never the key or the Authorization header."""
        headers = sorted(
            (k.lower(), v) for k, v in self._extra_headers.items() if k.lower() not in ("authorization", "x-goog-api-key")
        )
        return {"provider": self.id, "baseUrl": self.base_url, "model": self.model, "headers": headers}

    @property
    def fingerprint(self) -> str:
        data = json.dumps(self.cache_key_data(), sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]

    @property
    def max_input_bytes(self) -> int:
        return min(self.max_input_tokens, MAX_BATCH_BYTES)

    # --- HTTP ---------------------------------------------------------------------------------

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", **self.auth_headers(), **self._extra_headers}

    def _http(self) -> httpx.AsyncClient:
        # An AsyncClient's pool belongs to one event loop; the CLI and tests may run several.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(transport=self._transport, follow_redirects=False)
            self._client_loop = loop
        return self._client

    def url(self, path: str) -> str:
        """Requests only ever go to the configured host (SSRF guard for URLs from responses)."""
        full = path if path.startswith(("http://", "https://")) else f"{self.base_url}/{path.lstrip('/')}"
        if urlsplit(full).netloc != self._host:
            raise ProviderError(f"{self.id}: refusing a request to another host than {self._host}")
        return full

    async def request(
        self, method: str, path: str, *, json_body: Any = None, timeout: float, content: bytes | None = None,
        headers: dict[str, str] | None = None, expect_json: bool = True, files: Any = None, data: Any = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        """One HTTP call with retries. Returns parsed JSON (or bytes when expect_json is False)."""

        async def once() -> Any:
            self.stats.requests += 1
            try:
                base_headers = self._headers()
                if files is not None or content is not None:
                    base_headers.pop("Content-Type", None)  # httpx or the caller sets it
                response = await self._http().request(
                    method,
                    self.url(path),
                    json=json_body if content is None and files is None else None,
                    content=content,
                    files=files,
                    data=data,
                    params=params,
                    headers={**base_headers, **(headers or {})},
                    timeout=timeout,
                )
            except httpx.TimeoutException:
                raise RetryableProviderError(f"{self.id}: request timed out after {timeout:.0f} s") from None
            except httpx.HTTPError as exc:
                raise ProviderError(redact(f"{self.id}: cannot reach {self._host}: {type(exc).__name__}: {exc}")) from None
            status = response.status_code
            if status == 429 or status >= 500:
                raise RetryableProviderError(
                    redact(f"{self.id}: HTTP {status}: {_error_detail(response)}"),
                    retry_after=_parse_retry_after(response.headers.get("retry-after")),
                    status=status,
                )
            if status >= 400:
                raise ProviderError(redact(f"{self.id}: HTTP {status}: {_error_detail(response)}"))
            if not expect_json:
                return response.content
            try:
                return response.json()
            except ValueError:
                raise ProviderError(f"{self.id}: HTTP {status} with malformed JSON ({len(response.content)} bytes)") from None

        retrying = AsyncRetrying(
            stop=stop_after_attempt(MAX_RETRIES + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, RetryableProviderError)),
            sleep=self._record_sleep,
            before_sleep=self._count_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await once()
        except ProviderError as exc:
            self.stats.failures += 1
            self.stats.last_error = str(exc)
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_CAP_S)
        base = 0.5 * 2 ** (state.attempt_number - 1)
        return min(8.0, base * (1 + random.uniform(0, 0.2)))

    async def _record_sleep(self, seconds: float) -> None:
        self.stats.sleeps.append(seconds)
        await self._sleep(seconds)

    def _count_retry(self, _state: RetryCallState) -> None:
        self.stats.retries += 1

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
        results: list[np.ndarray | None] = [None] * len(batches)
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

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except RuntimeError:  # its event loop is gone: nothing left to release
                pass

