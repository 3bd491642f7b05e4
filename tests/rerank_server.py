"""A real HTTP server on loopback that speaks the rerank APIs' wire formats.

Flavours and what each checks and answers (from each one's documentation):

- voyage    POST /v1/rerank  {query, documents, model}            → {object, data: [{index, relevance_score}], model, usage}
- cohere    POST /v2/rerank  {model, query, documents}            → {id, results: [{index, relevance_score}], meta}
- jina      POST /v1/rerank  {model, query, documents}            → {model, usage, results: [{index, relevance_score}]}
- tei       POST /rerank     {query, texts}                       → [{index, score}]              (Hugging Face TEI)
- llamacpp  POST /v1/rerank  {query, documents}                   → {model, object, usage, results: [{index, relevance_score}]} (logits)
- vllm      POST /v1/rerank  {query, documents, model}            → {id, model, usage, results: [{index, document, relevance_score}]}
- infinity  POST /rerank     {query, documents}                   → {object: "rerank", results: [{relevance_score, index, document}], model, usage, id, created}

A missing required field is a 422 (as those servers answer); the hosted APIs check the bearer
key. Relevance is the share of the query's words found in the document (deterministic), sorted
best first as the APIs return it. Faults (status, delay) are consumed one per request.
"""  # noqa: E501

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RerankServer", "RerankFault", "overlap", "FLAVOURS"]

FLAVOURS = ("voyage", "cohere", "jina", "tei", "llamacpp", "vllm", "infinity")
_PATH = {"voyage": "/v1/rerank", "cohere": "/v2/rerank", "jina": "/v1/rerank", "tei": "/rerank",
         "llamacpp": "/v1/rerank", "vllm": "/v1/rerank", "infinity": "/rerank"}
_HOSTED = ("voyage", "cohere", "jina")


@dataclass
class RerankFault:
    status: int = 500
    body: Any = None
    delay: float = 0.0


@dataclass
class RerankRequest:
    path: str
    headers: dict[str, str]
    body: Any


def overlap(query: str, doc: str) -> float:
    q = set(re.findall(r"\w+", query.lower()))
    d = set(re.findall(r"\w+", doc.lower()))
    return len(q & d) / len(q) if q else 0.0


class RerankServer:
    def __init__(self, flavour: str, *, key: str | None = "rerank-key-0123456789") -> None:
        self.flavour = flavour
        self.key = key if flavour in _HOSTED else None
        self.requests: list[RerankRequest] = []
        self.faults: list[RerankFault] = []
        self.echo_key_in_error = False  # a 401 that echoes the key it got (the client must mask it)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> RerankServer:
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
        """What `query.rerank.remote.baseUrl` is set to for this server."""
        prefix = _PATH[self.flavour].removesuffix("/rerank")
        return self.root + prefix

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(RerankRequest(self.path, headers, body))
                    fault = server.faults.pop(0) if server.faults else None
                if fault is not None:
                    time.sleep(fault.delay)
                    if fault.status:
                        return self._send(fault.status, fault.body or {"message": "internal error"})
                status, answer = server._answer(self.path, headers, body)
                self._send(status, answer)

        return Handler

    def _answer(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        f = self.flavour
        if path != _PATH[f]:
            return 404, {"error": f"no route {path}"}
        if self.key is not None and headers.get("authorization") != f"Bearer {self.key}":
            got = headers.get("authorization", "")
            return 401, {"message": f"invalid api key {got}" if self.echo_key_in_error else "invalid api key"}
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return 422, {"error": "missing field `query`"}
        docs_field = "texts" if f == "tei" else "documents"
        docs = body.get(docs_field)
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            return 422, {"error": f"missing field `{docs_field}`"}
        if f in ("voyage", "cohere", "jina") and not body.get("model"):
            return 422, {"message": "model is required"}
        scores = [overlap(body["query"], d) for d in docs]
        if f == "llamacpp":
            scores = [s * 8.0 - 4.0 for s in scores]  # llama.cpp answers the model's logit
        order = sorted(range(len(docs)), key=lambda i: -scores[i])
        if f == "tei":
            return 200, [{"index": i, "score": scores[i]} for i in order]
        results = [{"index": i, "relevance_score": scores[i]} for i in order]
        usage = {"total_tokens": sum(len(d.split()) for d in docs)}
        if f == "voyage":
            return 200, {"object": "list", "data": results, "model": body["model"], "usage": usage}
        if f == "cohere":
            return 200, {"id": "r-1", "results": results, "meta": {"billed_units": {"search_units": 1}}}
        if f == "jina":
            return 200, {"model": body["model"], "usage": usage, "results": results}
        if f == "llamacpp":
            return 200, {"model": body.get("model", "reranker"), "object": "list", "usage": usage, "results": results}
        if f == "vllm":
            return 200, {"id": "rerank-1", "model": body.get("model", "m"), "usage": usage,
                         "results": [{**r, "document": {"text": docs[r["index"]]}} for r in results]}
        return 200, {"object": "rerank", "results": [{**r, "document": None} for r in results], "model": "m",
                     "usage": usage, "id": "i-1", "created": int(time.time())}


