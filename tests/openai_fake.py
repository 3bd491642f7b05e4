"""A scripted OpenAI-compatible model on loopback (`/v1/chat/completions`, plain or streamed), for
a real agent turn without a language model: it looks memory_search up in OpenClaw's tool catalog
(or calls it when it is offered directly), calls it, then answers. Every request is kept, so a
test can read the system prompt and the tool results the model was given."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeModel"]


class FakeModel:
    def __init__(self, question: str) -> None:
        self.question = question
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802  (a models listing, if asked)
                self._json({"object": "list", "data": [{"id": "fake-1", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                model.requests.append(body)
                message = model.next_message(body)
                if body.get("stream"):
                    self._stream(message)
                else:
                    self._json({"id": "c1", "object": "chat.completion", "model": "fake-1",
                                "choices": [{"index": 0, "message": message,
                                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def _json(self, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, message: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                delta: dict[str, Any] = {"role": "assistant"}
                if message.get("tool_calls"):
                    delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
                else:
                    delta["content"] = message["content"]
                for chunk in ({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                              {"choices": [{"index": 0, "delta": {}, "finish_reason":
                                            "tool_calls" if message.get("tool_calls") else "stop"}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}):
                    self.wfile.write(
                        f"data: {json.dumps({'id': 'c1', 'object': 'chat.completion.chunk', **chunk})}\n\n".encode()
                    )
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def _call(name: str, arguments: dict[str, Any], n: int) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}

    def next_message(self, body: dict[str, Any]) -> dict[str, Any]:
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
        search = {"query": self.question, "maxResults": 2}
        if not results:
            if "memory_search" in offered:
                return self._call("memory_search", search, 1)
            if "tool_search" in offered:
                return self._call("tool_search", {"query": "memory search"}, 1)
        last = json.dumps(results[-1].get("content")) if results else ""
        found = re.search(r"openclaw:[\w-]+:memory_search", last)
        if found and len(results) == 1:
            return self._call("tool_call", {"id": found.group(0), "args": search}, 2)
        return {"role": "assistant", "content": "Checked memory: answered."}

    def tool_results(self) -> list[str]:
        """The text of every tool result the model was given, in order."""
        seen: list[str] = []
        for body in self.requests:
            for m in body.get("messages", []):
                if m.get("role") == "tool":
                    text = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                    if text not in seen:
                        seen.append(text)
        return seen

    def system_prompt(self) -> str:
        for body in self.requests:
            for m in body.get("messages", []):
                if m.get("role") in ("system", "developer"):
                    return m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        return ""
