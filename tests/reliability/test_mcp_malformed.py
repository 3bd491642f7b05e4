"""Malformed MCP messages over stdio: every request with an id gets a JSON-RPC answer (a result or
an error carrying that id; `id: null` when the id itself is unreadable), and the server goes on
serving. The SDK's reader used to drop 16 of 70 such messages silently: the client waited forever."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from figures import FIGURES
from helpers import EXAMPLE_WORKSPACE

pytest.importorskip("mcp", reason="the MCP server needs the MCP SDK (a default dependency)")

GOOD = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "memory_search", "arguments": {"query": "ledger"}},
}


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def cases() -> list[tuple[str, bytes, object]]:
    """(what, the line sent, the id the answer must carry)."""
    out: list[tuple[str, bytes, object]] = []
    n = iter(range(100, 10_000))

    def add(what: str, raw: bytes, expect: object = "same") -> None:
        out.append((what, raw, expect))

    def req(**fields: object) -> tuple[dict, int]:
        i = next(n)
        return {"jsonrpc": "2.0", "id": i, **fields}, i

    # Not JSON, or not only JSON: the id is read from the text.
    for cut in (10, 25, 40, 60, 80, 100, 120, 140):
        i = next(n)
        raw = _line({**GOOD, "id": i})
        whole_id = raw.index(b'"id": ') + len(b'"id": ') + len(str(i))
        add(f"cut at {cut}", raw[: max(cut, whole_id)], i)
    for what, wrap in [("trailing NUL", lambda r: r + b"\x00"), ("NUL inside", lambda r: r[:-1] + b"\x00}"),
                       ("trailing garbage", lambda r: r + b" }}"), ("BOM", lambda r: b"\xef\xbb\xbf" + r),
                       ("two messages on a line", lambda r: r + r), ("control char in a string",
                                                                      lambda r: r.replace(b"ledger", b"led\x01ger")),
                       ("single quotes", lambda r: r.replace(b'"method"', b"'method'")),
                       ("comment", lambda r: r.replace(b"{", b"{/*x*/", 1))]:
        m, i = req(**{k: v for k, v in GOOD.items() if k not in ("jsonrpc", "id")})
        add(what, wrap(_line(m)), i)
        sid = f"req-{i}"  # string ids too
        add(f"{what} (string id)", wrap(_line({**m, "id": sid})), sid)
    for depth in (600, 1000, 5000):
        m, i = req(method="tools/call")
        add(f"params {depth} deep", _line(m)[:-1] + b', "params": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}", i)
        m, i = req(method="tools/call")
        add(f"array {depth} deep", _line(m)[:-1] + b', "params": ' + b"[" * depth + b"]" * depth + b"}", i)
    # Lone surrogates (a query cut mid-emoji): answered, with U+FFFD in their place.
    for what, text in [("high surrogate", "\\ud83d"), ("low surrogate", "\\ude00"), ("reversed pair", "\\ude00\\ud83d"),
                       ("surrogate in a word", "led\\ud83dger")]:
        i = next(n)
        add(
            what,
            (
                '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"%s"}}}'
                % (i, text)
            ).encode(),
            i,
        )
    i = next(n)
    add(
        "surrogate in a key", ('{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"\\ud800":1}}' % i).encode(), i
    )
    # Valid JSON of the wrong shape.
    for params in (
        "x",
        5,
        True,
        None,
        [],
        [1, 2],
        {"name": 5},
        {"name": "memory_search", "arguments": "q"},
        {"name": "memory_search", "arguments": None},
        {"name": "memory_search", "arguments": []},
        {"name": "memory_search", "arguments": {"query": 5}},
        {"name": "memory_get", "arguments": {"path": None}},
        {"name": "memory_search", "arguments": {"query": "x", "maxResults": "lots"}},
        {"name": "nope", "arguments": {}},
    ):
        m, i = req(method="tools/call", params=params)
        add(f"params {json.dumps(params)[:30]}", _line(m), i)
    for jsonrpc in (None, "1.0", 2.0, "", "2.0 "):
        m, i = req(method="tools/list")
        if jsonrpc is None:
            m.pop("jsonrpc")
        else:
            m["jsonrpc"] = jsonrpc
        add(f"jsonrpc {jsonrpc!r}", _line(m), i)
    for method in (7, None, {"a": 1}, "", "tools/list\u0000", "nope", "initialize"):
        m, i = req(method=method)
        add(f"method {method!r}", _line(m), i)
    m, i = req()
    add("no method", _line(m), i)
    for bad_id in ({"a": 1}, [1], True, 1.5, None):
        add(f"id {bad_id!r}", _line({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"}), None)
    add("id NaN", b'{"jsonrpc":"2.0","id":NaN,"method":"tools/list"}', None)
    # Not a message at all.
    for what, raw in [("garbage", b"\xff\xfe garbage"), ("a number", b"42"), ("a string", b'"tools/list"'),
                      ("null", b"null"), ("empty array", b"[]"), ("empty object", b"{}")]:
        add(what, raw, None)
    m1, i1 = req(method="tools/list")
    add("batch", _line([m1]), i1)
    m, i = req(method="tools/call", params={"name": "memory_search", "arguments": {"query": "q" * 5_000_000}})
    add("a line over 4 MiB", _line(m), i)
    return out


class Client:
    def __init__(self) -> None:
        env = {**os.environ, "MEMSIFT_NO_RESIDENT": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(EXAMPLE_WORKSPACE), "mcp", "--no-watch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.buf = b""

    def send(self, raw: bytes) -> None:
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def reply(self, wait_s: float = 60.0) -> dict | None:
        """The next answer line, or None when none came (the server dropped the message)."""
        end = time.monotonic() + wait_s
        while b"\n" not in self.buf and time.monotonic() < end:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    return None
                self.buf += chunk
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def test_every_malformed_request_with_an_id_gets_an_answer():
    all_cases = cases()
    assert len(all_cases) >= 70
    client = Client()
    try:
        client.send(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        assert client.reply()["id"] == 0
        client.send(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        silent, wrong = [], []
        for what, raw, expect in all_cases:
            client.send(raw)
            answer = client.reply(wait_s=10 if len(raw) < 2**20 else 60)  # a hang fails here, not the clock
            if answer is None:
                silent.append(what)
                continue
            if answer.get("id") != expect or ("result" not in answer and "error" not in answer):
                wrong.append((what, answer.get("id"), expect))
        FIGURES["malformed MCP stdio messages sent"] += len(all_cases)
        FIGURES["malformed MCP stdio messages left unanswered"] += len(silent)
        assert not silent and not wrong, (silent, wrong)
        # Still serving, and a cut emoji was searched rather than refused.
        client.send(_line(GOOD))
        assert "result" in client.reply()
    finally:
        client.close()
