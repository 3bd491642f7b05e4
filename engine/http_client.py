"""An HTTP client for remote model APIs (embeddings, rerankers), over `httpx.AsyncClient`.

- Retries (tenacity): only on 429, 5xx and timeouts; up to 3 retries, 0.5 s doubling with 0–20 %
  jitter capped at 8 s, or the server's `Retry-After` (capped at 60 s).
- Keys go in headers, never in URLs; requests only go to the configured host; every error text is
  redacted before it leaves.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from .errors import ProviderError
from .secrets import masked_cut, redact, url_without_query_secrets
from .limits import waiting_on

__all__ = ["RemoteClient", "RetryableProviderError", "RequestStats", "MAX_RETRIES", "RETRY_AFTER_CAP_S"]

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



class RemoteClient:
    """One API behind one base URL: authenticated requests with retries. `id` names it in errors."""

    id = "remote"

    def __init__(
        self,
        *,
        base_url: str,
        headers: dict[str, str],
        api_key: str | None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        # A base URL may carry a query (`https://proxy/v1?key=…&api-version=…`): paths go before it, and
        # it goes with every request to the host. `base_url` is the part before it; `identity_url` is
        # the whole, credentials masked, for caches and status (a rotated key changes neither).
        parts = urlsplit(base_url.strip())
        self.base_url = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
        self._base_query = parts.query
        self.identity_url = url_without_query_secrets(base_url.strip().rstrip("/"))
        self._host = parts.netloc
        self._api_key = api_key
        self._extra_headers = dict(headers)
        self._transport = transport
        self._sleep = sleep or anyio.sleep
        self._client: httpx.AsyncClient | None = None
        self._client_loop: Any = None
        self.stats = RequestStats()

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
        if self._base_query and self._base_query not in full:
            full += ("&" if "?" in full else "?") + self._base_query
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
                raise ProviderError(
                    redact(f"{self.id}: cannot reach {self._host}: {type(exc).__name__}: {exc}")
                ) from None
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
                raise ProviderError(
                    f"{self.id}: HTTP {status} with malformed JSON ({len(response.content)} bytes)"
                ) from None

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
                with attempt, waiting_on(f"{self.id} at {self._host}" + (
                        f" (attempt {attempt.retry_state.attempt_number} of {MAX_RETRIES + 1})"
                        if attempt.retry_state.attempt_number > 1 else "")):
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

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except RuntimeError:  # its event loop is gone: nothing left to release
                pass

