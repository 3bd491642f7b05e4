"""A real HTTP server on loopback that speaks the embedding providers' wire formats.

One `ProviderServer` per flavour (openai, mistral, voyage, gemini, ollama). It checks auth the way
the vendor does, answers with deterministic bag-of-words vectors (texts sharing words are close),
records every request, and injects faults on demand: status codes with Retry-After, delays,
malformed JSON, wrong dimensions, wrong counts. It also runs the OpenAI and Gemini batch-job APIs.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np


@dataclass
class Fault:
    status: int = 500
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None  # send these bytes as the body (malformed JSON)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    raw: bytes


def bow_vector(text: str, dims: int) -> list[float]:
    v = np.zeros(dims, dtype=np.float64)
    for tok in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
        v[h % dims] += 1.0 + (h >> 32) % 7 / 10
    if not v.any():
        v[0] = 1.0
    return (v * 3.0).tolist()  # deliberately not unit length, like some real APIs


class ProviderServer:
    def __init__(self, flavour: str, *, key: str | None = "test-key-123456789", dims: int = 48) -> None:
        self.flavour = flavour
        self.key = key
        self.dims = dims
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []  # consumed one per embedding request, before normal answers
        self.rate_limit_rate = 0.0  # each embedding request gets a 429 (Retry-After: 0) with this probability
        self._rng = __import__("random").Random(1234)
        self.delay = 0.0
        self.batch_delay = 0.0  # gemini: only document batches (batchEmbedContents) are slow, not queries
        self.wrong_dims = False
        self.wrong_count = False
        self.reject_inline_over: int | None = None  # gemini: 413 for inline data over N bytes
        self.batch_polls_before_done = 1
        self.batch_fail = False  # batch jobs end in a failed state
        self.batch_endpoint_missing = False
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._files: dict[str, bytes] = {}
        self._jobs: dict[str, dict[str, Any]] = {}
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        return {"gemini": f"{self.root}/v1beta", "ollama": self.root}.get(self.flavour, f"{self.root}/v1")

    def embedding_requests(self) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if r.path.endswith(("/embeddings", "/api/embed", ":embedContent", ":batchEmbedContents"))
        ]

    # --- the handler ----------------------------------------------------------------------------

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(
                self, status: int, body: Any = None, headers: dict[str, str] | None = None, raw: bytes | None = None
            ) -> None:
                data = raw if raw is not None else json.dumps(body).encode()
                try:
                    self.send_response(status)
                except (BrokenPipeError, ConnectionResetError):
                    return
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def _handle(self, method: str) -> None:
                parts = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw and "json" in (self.headers.get("Content-Type") or "") else None
                except ValueError:
                    body = None
                rec = Recorded(
                    method,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    raw,
                )
                with server._lock:
                    server.requests.append(rec)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    server._route(self, rec)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def do_POST(self) -> None:
                self._handle("POST")

            def do_GET(self) -> None:
                self._handle("GET")

        return Handler

    def _auth_ok(self, rec: Recorded) -> bool:
        if self.key is None:
            return True
        if self.flavour == "gemini":  # Google's APIs take the key in a header or as `?key=`
            return rec.headers.get("x-goog-api-key") == self.key or rec.query.get("key") == [self.key]
        return rec.headers.get("authorization") == f"Bearer {self.key}"

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        out = [bow_vector(t, self.dims) for t in texts]
        if self.wrong_dims and out:
            out[-1] = out[-1][:-1]
        if self.wrong_count and out:
            out = out[:-1]
        return out

    def _route(self, h, rec: Recorded) -> None:
        if not self._auth_ok(rec):
            if self.flavour == "gemini":
                return h._send(
                    400,
                    {
                        "error": {
                            "code": 400,
                            "message": "API key not valid. Please pass a valid API key.",
                            "status": "INVALID_ARGUMENT",
                        }
                    },
                )
            shown = (rec.headers.get("authorization") or "")[7:15]
            return h._send(
                401,
                {"error": {"message": f"Incorrect API key provided: {shown}****.", "type": "invalid_request_error"}},
            )
        is_embed = rec.path.endswith(("/embeddings", "/api/embed", ":embedContent", ":batchEmbedContents"))
        if is_embed:
            with self._lock:
                fault = self.faults.pop(0) if self.faults else None
                if fault is None and self.rate_limit_rate and self._rng.random() < self.rate_limit_rate:
                    fault = Fault(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "0"})
            if fault is not None:
                time.sleep(fault.delay)
                return h._send(
                    fault.status,
                    fault.body if fault.body is not None else {"error": {"message": "injected"}},
                    fault.headers,
                    fault.raw,
                )
            if self.delay:
                time.sleep(self.delay)
            if self.batch_delay and rec.path.endswith(":batchEmbedContents"):
                time.sleep(self.batch_delay)
        path = rec.path
        if self.flavour in ("openai", "mistral", "voyage") and path.endswith("/embeddings"):
            texts = rec.body["input"]
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(self._vectors(texts))]
            data.reverse()  # the index field, not the order, decides (as the API allows)
            return h._send(
                200, {"object": "list", "data": data, "model": rec.body["model"], "usage": {"prompt_tokens": 1}}
            )
        if self.flavour == "ollama" and path == "/api/embed":
            vecs = self._vectors(rec.body["input"])
            return h._send(200, {"model": rec.body["model"], "embeddings": vecs})
        if self.flavour == "gemini":
            return self._gemini(h, rec)
        if self.flavour == "openai":
            return self._openai_batch(h, rec)
        return h._send(404, {"error": {"message": f"no route {path}"}})

    # --- gemini ---------------------------------------------------------------------------------

    def _gemini_values(self, req: dict[str, Any]) -> list[float] | None:
        parts = req["content"]["parts"]
        text = " ".join(p.get("text", "") for p in parts)
        for p in parts:
            inline = p.get("inlineData")
            if inline and self.reject_inline_over is not None and len(inline["data"]) > self.reject_inline_over:
                return None
            if inline:
                text += f" {inline['mimeType']} inline"
        dims = req.get("outputDimensionality") or self.dims
        return bow_vector(text, dims)

    def _gemini(self, h, rec: Recorded) -> None:
        path = rec.path
        if path.endswith(":embedContent"):
            return h._send(200, {"embedding": {"values": self._gemini_values(rec.body)}})
        if path.endswith(":batchEmbedContents"):
            values = [self._gemini_values(r) for r in rec.body["requests"]]
            if any(v is None for v in values):
                return h._send(
                    413,
                    {
                        "error": {
                            "code": 413,
                            "message": "Request payload size exceeds the limit",
                            "status": "FAILED_PRECONDITION",
                        }
                    },
                )
            if self.wrong_dims and values:
                values[-1] = values[-1][:-1]
            return h._send(200, {"embeddings": [{"values": v} for v in values]})
        if path == "/upload/v1beta/files":
            content = rec.raw.split(b"\r\n\r\n", 2)[2].rsplit(b"\r\n--", 1)[0]
            name = f"files/in{len(self._files)}"
            self._files[name] = content
            return h._send(200, {"file": {"name": name}})
        if path.endswith(":asyncBatchEmbedContent"):
            if self.batch_endpoint_missing:
                return h._send(404, {"error": {"message": "asyncBatchEmbedContent not available"}})
            job = f"batches/{len(self._jobs)}"
            self._jobs[job] = {"input": rec.body["batch"]["inputConfig"]["fileName"], "polls": 0}
            return h._send(200, {"name": job, "metadata": {"state": "BATCH_STATE_PENDING"}})
        m = re.match(r"^/v1beta/(batches/\d+)$", path)
        if m:
            job = self._jobs[m.group(1)]
            job["polls"] += 1
            if job["polls"] <= self.batch_polls_before_done:
                return h._send(200, {"name": m.group(1), "metadata": {"state": "BATCH_STATE_RUNNING"}})
            if self.batch_fail:
                return h._send(200, {"name": m.group(1), "done": True, "metadata": {"state": "BATCH_STATE_FAILED"}})
            out = f"files/out{m.group(1)[-1]}"
            lines = []
            for line in self._files[job["input"]].decode().splitlines():
                item = json.loads(line)
                lines.append(
                    json.dumps(
                        {
                            "key": item["key"],
                            "response": {"embedding": {"values": self._gemini_values(item["request"])}},
                        }
                    )
                )
            self._files[out] = "\n".join(lines).encode()
            return h._send(
                200,
                {
                    "name": m.group(1),
                    "done": True,
                    "metadata": {"state": "BATCH_STATE_SUCCEEDED", "output": {"responsesFile": out}},
                },
            )
        m = re.match(r"^/download/v1beta/(files/[^:]+):download$", path)
        if m:
            return h._send(200, raw=self._files[m.group(1)])
        return h._send(404, {"error": {"message": f"no route {path}"}})

    # --- openai batch ---------------------------------------------------------------------------

    def _openai_batch(self, h, rec: Recorded) -> None:
        path = rec.path
        if path == "/v1/files" and rec.method == "POST":
            content = rec.raw.split(b"\r\n\r\n")
            jsonl = next(p for p in content if p.lstrip().startswith(b'{"custom_id"')).rsplit(b"\r\n--", 1)[0]
            fid = f"file-in{len(self._files)}"
            self._files[fid] = jsonl
            return h._send(200, {"id": fid, "object": "file", "purpose": "batch"})
        if path == "/v1/batches" and rec.method == "POST":
            bid = f"batch_{len(self._jobs)}"
            self._jobs[bid] = {"input": rec.body["input_file_id"], "polls": 0}
            return h._send(200, {"id": bid, "status": "validating"})
        m = re.match(r"^/v1/batches/(batch_\d+)$", path)
        if m:
            job = self._jobs[m.group(1)]
            job["polls"] += 1
            if job["polls"] <= self.batch_polls_before_done:
                return h._send(200, {"id": m.group(1), "status": "in_progress"})
            if self.batch_fail:
                return h._send(200, {"id": m.group(1), "status": "failed"})
            out = f"file-out-{m.group(1)}"
            lines = []
            for line in self._files[job["input"]].decode().splitlines():
                item = json.loads(line)
                vec = bow_vector(item["body"]["input"], self.dims)
                lines.append(
                    json.dumps(
                        {
                            "custom_id": item["custom_id"],
                            "response": {"status_code": 200, "body": {"data": [{"embedding": vec}]}},
                            "error": None,
                        }
                    )
                )
            self._files[out] = "\n".join(lines).encode()
            return h._send(200, {"id": m.group(1), "status": "completed", "output_file_id": out})
        m = re.match(r"^/v1/files/([^/]+)/content$", path)
        if m:
            return h._send(200, raw=self._files[m.group(1)])
        return h._send(404, {"error": {"message": f"no route {path}"}})
