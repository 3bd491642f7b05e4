"""An OpenAI-compatible embeddings endpoint on loopback for the backend contract: deterministic
vectors (hashed words), and an outage switched on and off by the test (`down`), so a contract
test can show what a backend does when its provider fails mid-life and comes back."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackEmbedder"]

DIMS = 64


def word_vector(text: str) -> list[float]:
    """Each word adds 1 at a place its hash picks: texts sharing words point the same way."""
    v = [0.0] * DIMS
    for word in re.findall(r"\w+", text.lower()):
        v[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIMS] += 1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


class LoopbackEmbedder:
    """`with LoopbackEmbedder() as e:` then `remote.baseUrl: e.base_url`; `e.down = True` answers
    every request with an HTTP 400 (a failure memsift does not retry, so tests stay quick)."""

    def __init__(self) -> None:
        self.down = False
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> LoopbackEmbedder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        embedder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                embedder.requests += 1
                if embedder.down:
                    self._send(400, {"error": {"message": "the contract's embedder is down"}})
                    return
                texts = body.get("input") or []
                texts = [texts] if isinstance(texts, str) else texts
                data = [{"object": "embedding", "index": i, "embedding": word_vector(t)} for i, t in enumerate(texts)]
                self._send(200, {"object": "list", "data": data, "model": body.get("model", "")})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        return Handler
