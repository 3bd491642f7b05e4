"""Provider batch APIs (`remote.batch.enabled`): OpenAI `/batches` and Gemini `asyncBatchEmbedContent`.

Requests are written as JSONL (custom id = the text's index), uploaded, submitted, polled every
`pollIntervalMs` until done or `timeoutMinutes`, and the output file is parsed per id. With
`wait: false` an unfinished job is an error. Each failure counts; after 2 failures (at once when
the endpoint does not exist) batching is disabled and the plain request path is used.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..config.models import BatchConfig
from ..errors import ProviderError

if TYPE_CHECKING:
    from .remote import RemoteProvider

__all__ = ["BatchApi", "OpenAIBatchApi", "GeminiBatchApi", "FAILURE_LIMIT"]

FAILURE_LIMIT = 2
MAX_REQUESTS_PER_JOB = 50_000


@dataclass
class BatchApi:
    wait: bool = True
    poll_interval_s: float = 2.0
    timeout_s: float = 3600.0
    failures: int = 0
    disabled_reason: str | None = None
    last_error: str | None = None
    jobs: int = 0

    @classmethod
    def from_config(cls, cfg: BatchConfig) -> BatchApi:
        return cls(
            wait=cfg.wait,
            poll_interval_s=max(0.01, cfg.poll_interval_ms / 1000),
            timeout_s=max(1.0, cfg.timeout_minutes * 60),
        )

    def usable(self) -> bool:
        return self.disabled_reason is None and self.failures < FAILURE_LIMIT

    def record_failure(self, error: str, *, permanent: bool = False) -> None:
        if self.disabled_reason is not None:
            return  # already disabled (and counted) by the failure that caused this one
        self.failures = FAILURE_LIMIT if permanent else self.failures + 1
        self.last_error = error
        if not self.usable():
            self.disabled_reason = f"disabled after {self.failures} failure(s): {error}"

    def status(self) -> dict[str, Any]:
        return {
            "enabled": True,
            "usable": self.usable(),
            "failures": self.failures,
            "limit": FAILURE_LIMIT,
            "wait": self.wait,
            "pollIntervalMs": int(self.poll_interval_s * 1000),
            "timeoutMs": int(self.timeout_s * 1000),
            "jobs": self.jobs,
            "lastError": self.last_error,
        }

    async def embed(self, provider: RemoteProvider, texts: list[str]) -> list[Any]:
        out: list[Any] = []
        for start in range(0, len(texts), MAX_REQUESTS_PER_JOB):
            try:
                out += await self._run_job(provider, texts[start : start + MAX_REQUESTS_PER_JOB])
            except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a malformed job or output
                raise ProviderError(f"{provider.id}: malformed batch response: {type(exc).__name__}") from None
        return out

    async def _poll(self, provider: RemoteProvider, check) -> Any:
        deadline = time.monotonic() + self.timeout_s
        while True:
            done, result = await check()
            if done:
                return result
            if not self.wait:
                raise ProviderError(f"{provider.id}: batch job not finished and remote.batch.wait is false")
            if time.monotonic() > deadline:
                raise ProviderError(f"{provider.id}: batch job timed out after {self.timeout_s / 60:.0f} min")
            await anyio.sleep(self.poll_interval_s)

    async def _run_job(self, provider: RemoteProvider, texts: list[str]) -> list[Any]:
        raise NotImplementedError


def _vectors_by_id(count: int, rows: dict[str, Any], provider_id: str) -> list[Any]:
    missing = [i for i in range(count) if str(i) not in rows]
    if missing:
        raise ProviderError(f"{provider_id}: batch output lacks {len(missing)} of {count} embeddings")
    return [rows[str(i)] for i in range(count)]


class OpenAIBatchApi(BatchApi):
    async def _run_job(self, provider: RemoteProvider, texts: list[str]) -> list[Any]:
        lines = "\n".join(
            json.dumps(
                {
                    "custom_id": str(i),
                    "method": "POST",
                    "url": "/v1/embeddings",
                    "body": {"model": provider.model, "input": t},
                }
            )
            for i, t in enumerate(texts)
        )
        uploaded = await provider.request(
            "POST", "files", files={"file": ("memsift-batch.jsonl", lines.encode(), "application/jsonl")},
            data={"purpose": "batch"}, timeout=120,
        )
        job = await provider.request(
            "POST", "batches",
            json_body={"input_file_id": uploaded["id"], "endpoint": "/v1/embeddings", "completion_window": "24h"},
            timeout=60,
        )
        self.jobs += 1

        async def check() -> tuple[bool, Any]:
            state = await provider.request("GET", f"batches/{job['id']}", timeout=60)
            return state.get("status") in ("completed", "failed", "expired", "cancelled"), state

        state = await self._poll(provider, check)
        if state.get("status") != "completed" or not state.get("output_file_id"):
            raise ProviderError(f"{provider.id}: batch job ended with status {state.get('status')!r}")
        raw = await provider.request("GET", f"files/{state['output_file_id']}/content", timeout=120, expect_json=False)
        rows: dict[str, Any] = {}
        for line in raw.decode("utf-8", "replace").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            resp = item.get("response") or {}
            if item.get("error") or resp.get("status_code", 200) >= 400:
                raise ProviderError(f"{provider.id}: batch item {item.get('custom_id')} failed")
            data = (resp.get("body") or {}).get("data") or []
            if not data or not data[0].get("embedding"):
                raise ProviderError(f"{provider.id}: batch item {item.get('custom_id')} has no embedding")
            rows[str(item["custom_id"])] = data[0]["embedding"]
        return _vectors_by_id(len(texts), rows, provider.id)


class GeminiBatchApi(BatchApi):
    def _root(self, provider: RemoteProvider) -> str:
        # https://host/v1beta → https://host (uploads and downloads live beside the API version)
        base = provider.base_url
        return base.rsplit("/", 1)[0] if base.rsplit("/", 1)[-1].startswith("v1") else base

    async def _run_job(self, provider: Any, texts: list[str]) -> list[Any]:  # a Gemini provider (embed_request)
        lines = "\n".join(
            json.dumps({"key": str(i), "request": provider.embed_request(t, "RETRIEVAL_DOCUMENT")})
            for i, t in enumerate(texts)
        )
        boundary = uuid.uuid4().hex
        header = json.dumps({"file": {"displayName": "memsift-batch", "mimeType": "application/jsonl"}})
        body = (
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{header}\r\n"
            f"--{boundary}\r\nContent-Type: application/jsonl\r\n\r\n{lines}\r\n--{boundary}--\r\n"
        ).encode()
        root = self._root(provider)
        uploaded = await provider.request(
            "POST", f"{root}/upload/v1beta/files", content=body, params={"uploadType": "multipart"},
            headers={"Content-Type": f"multipart/related; boundary={boundary}"}, timeout=120,
        )
        file_name = (uploaded.get("file") or {}).get("name")
        if not file_name:
            raise ProviderError(f"{provider.id}: batch upload returned no file name")
        try:
            op = await provider.request(
                "POST", f"models/{provider.model}:asyncBatchEmbedContent",
                json_body={"batch": {"displayName": "memsift", "inputConfig": {"fileName": file_name}}}, timeout=60,
            )
        except ProviderError as exc:
            if "404" in str(exc) or "not available" in str(exc):
                self.record_failure(str(exc), permanent=True)
            raise
        self.jobs += 1

        async def check() -> tuple[bool, Any]:
            state = await provider.request("GET", op["name"], timeout=60)
            meta = state.get("metadata") or {}
            return bool(state.get("done")) or meta.get("state") in (
                "BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED",
            ), state

        state = await self._poll(provider, check)
        meta = state.get("metadata") or {}
        output = (state.get("response") or {}).get("responsesFile") or (meta.get("output") or {}).get("responsesFile")
        if meta.get("state") not in (None, "BATCH_STATE_SUCCEEDED") or not output:
            raise ProviderError(f"{provider.id}: batch job ended in state {meta.get('state')!r}")
        raw = await provider.request(
            "GET", f"{root}/download/v1beta/{output}:download", params={"alt": "media"}, timeout=120, expect_json=False
        )
        rows: dict[str, Any] = {}
        for line in raw.decode("utf-8", "replace").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            values = ((item.get("response") or {}).get("embedding") or {}).get("values")
            if item.get("error") or not values:
                raise ProviderError(f"{provider.id}: batch item {item.get('key')} failed")
            rows[str(item["key"])] = values
        return _vectors_by_id(len(texts), rows, provider.id)
