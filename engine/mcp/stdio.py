"""MCP over stdio where every request gets an answer, even a malformed one.

The MCP SDK's stdio reader drops what it cannot validate: a line that is not JSON (a trailing
NUL, a cut message), JSON nested too deeply to parse, a request whose `params` has the wrong
shape, a lone surrogate left by a query cut mid-emoji. The client, which sent an `id`, then waits
forever. Here each line is checked before the SDK sees it:

- valid messages pass through unchanged;
- a message whose only fault is a lone surrogate has it replaced by U+FFFD and passes (the
  search runs on what the user typed);
- anything else gets a JSON-RPC error with the request's `id` (found in the JSON, or in the text
  of a line that does not parse), or `id: null` when it has none that can be read (JSON-RPC 2.0,
  section 5.1); a notification (no `id`) that is malformed is only logged;
- a line over `MAX_LINE_BYTES` is refused without holding it in memory.

The standard descriptors are claimed as the SDK claims them (fd 0 and 1 point at the null device
and stderr while serving), so a child's stray output never lands on the wire.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any, AsyncIterator

import anyio

from ..logging import get_logger

__all__ = ["guarded_stdio", "check_line", "MAX_LINE_BYTES", "PARSE_ERROR", "INVALID_REQUEST", "INVALID_PARAMS"]

log = get_logger("memsift.mcp")

MAX_LINE_BYTES = 4 * 2**20  # a request is a few KB; a query is cut at 4,096 characters anyway
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
_ID_IN_TEXT = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,200}")')
_SURROGATE = re.compile("[\ud800-\udfff]")


def _error(id_: Any, code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message[:300]}})


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _id_from_text(raw: bytes) -> Any:
    """The `id` of a line that does not parse, when its text shows one; else None."""
    m = _ID_IN_TEXT.search(raw)
    if not m:
        return None
    try:
        value = json.loads(m.group(1))
    except ValueError:
        return None
    return value if _valid_id(value) else None


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _first_problem(exc: Exception) -> str:
    try:
        err = exc.errors()[0]  # type: ignore[attr-defined]
        where = ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith("JSONRPC"))
        return f"{where}: {err.get('msg')}" if where else str(err.get("msg"))
    except (AttributeError, IndexError, TypeError):
        return str(exc)


def check_line(raw: bytes) -> tuple[str | None, list[str]]:
    """(the line to hand the SDK, or None; error responses to write). Never raises."""
    import mcp_types as types  # noqa: PLC0415  (optional extra)

    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return None, []
    try:
        data = json.loads(text)
    except RecursionError:
        return None, [_error(_id_from_text(raw), PARSE_ERROR, "Parse error: the message is nested too deeply")]
    except ValueError as exc:
        return None, [_error(_id_from_text(raw), PARSE_ERROR, f"Parse error: {exc}")]
    if isinstance(data, list):
        ids = [m["id"] for m in data if isinstance(m, dict) and _valid_id(m.get("id"))]
        message = "Invalid Request: batches are not supported; send one message per line"
        return None, [_error(i, INVALID_REQUEST, message) for i in ids] or [_error(None, INVALID_REQUEST, message)]
    if not isinstance(data, dict):
        return None, [_error(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")]
    if "id" in data and not _valid_id(data["id"]):
        # The SDK would read it as a notification (an unknown key) and never answer.
        return None, [_error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")]
    try:
        cleaned = _without_surrogates(data) if _SURROGATE.search(text) or "\\u" in text.lower() else data
        types.jsonrpc_message_adapter.validate_python(cleaned, by_name=False)
        line = text if cleaned is data else json.dumps(cleaned)  # a cut emoji: U+FFFD in its place
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # what the SDK will do with it
        return line, []
    except RecursionError:
        problem = "the message is nested too deeply"
    except Exception as exc:  # noqa: BLE001  (told in words below)
        problem = _first_problem(exc)
    if "id" not in data and isinstance(data.get("method"), str):
        log.warning("a malformed MCP notification was dropped", problem=problem[:200])
        return None, []
    if "id" not in data:
        return None, [_error(None, INVALID_REQUEST, f"Invalid Request: {problem}")]
    params_wrong = isinstance(data.get("method"), str) and data.get("jsonrpc") == "2.0"
    code, kind = (INVALID_PARAMS, "Invalid params") if params_wrong else (INVALID_REQUEST, "Invalid Request")
    return None, [_error(data["id"], code, f"{kind}: {problem}")]


class _SerialOut:
    """stdout for the SDK's writer and ours: one whole line at a time."""

    def __init__(self, file: Any) -> None:
        self._file, self._lock = file, anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._file.write(text)
            await self._file.flush()

    async def flush(self) -> None:
        return None  # every write is flushed under the lock


class _GuardedIn:
    """stdin as the SDK reads it (an async iterator of lines), with malformed lines answered here."""

    def __init__(self, file: Any, out: _SerialOut) -> None:
        self._file, self._out = file, out  # a binary file; read in a worker thread, a bounded line at a time

    async def _readline(self, limit: int) -> bytes:
        return await anyio.to_thread.run_sync(self._file.readline, limit, abandon_on_cancel=True)

    async def _lines(self) -> AsyncIterator[bytes]:
        while True:
            line = await self._readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                head = line[:4096]
                while line and not line.endswith(b"\n"):  # the rest of the line, never kept
                    line = await self._readline(2**20)
                log.warning("an MCP message over the size limit was refused", limit=MAX_LINE_BYTES)
                await self._out.write(_error(_id_from_text(head), INVALID_REQUEST,
                                             f"Invalid Request: the message is over {MAX_LINE_BYTES} bytes") + "\n")
                continue
            yield line

    async def __aiter__(self) -> AsyncIterator[str]:
        async for raw in self._lines():
            try:
                line, errors = check_line(raw)
            except Exception as exc:  # noqa: BLE001  (a bug here must not end the server)
                log.warning("an MCP message could not be checked", error=f"{type(exc).__name__}: {exc}")
                line, errors = None, [_error(_id_from_text(raw[:4096]), INVALID_REQUEST, "Invalid Request: unreadable message")]
            for response in errors:
                await self._out.write(response + "\n")
            if line is not None:
                yield line + "\n"


def _claim(fd: int, divert_to: int) -> tuple[int, int]:
    """A private duplicate of `fd` (the wire), and `fd` pointed at `divert_to`. Returns (private, saved)."""
    private = os.dup(fd)
    saved = os.dup(fd)
    os.dup2(divert_to, fd)
    return private, saved


@asynccontextmanager
async def guarded_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport over guarded stdin and serialised stdout: (read, write) streams."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415  (optional extra)

    null = os.open(os.devnull, os.O_RDONLY)
    in_fd, saved_in = _claim(0, null)
    out_fd, saved_out = _claim(1, 2)
    os.close(null)
    stdin = os.fdopen(in_fd, "rb")
    stdout = anyio.wrap_file(TextIOWrapper(os.fdopen(out_fd, "wb"), encoding="utf-8", write_through=True))
    out = _SerialOut(stdout)
    try:
        async with stdio_server(stdin=_GuardedIn(stdin, out), stdout=out) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
