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
and stderr while serving), so a child's stray output never lands on the wire. They are read and
written on the event loop, so SIGTERM ends the server at once (`_FdIO`), and the first `initialize`
is answered before the SDK is even imported (handshake.py).
"""

from __future__ import annotations

import json
import os
import re
import stat
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anyio
import anyio.lowlevel

from ..logging import get_logger
from .handshake import REPLAY_ID, EarlyHandshake, answer_initialize, take_early

__all__ = ["StdioWire", "ClientGone", "check_line", "MAX_LINE_BYTES", "PARSE_ERROR", "INVALID_REQUEST",
           "INVALID_PARAMS"]

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
    import mcp_types as types  # noqa: PLC0415  (loaded only by `memsift mcp`)

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


class _FdIO:
    """A file descriptor read and written on the event loop, never in a worker thread: a thread
    blocked in read() kept `memsift mcp` alive after SIGTERM until the client closed its stdin
    (the interpreter waits for such threads at exit). Pipes and sockets are switched to
    non-blocking mode while served (and back after); a terminal is waited on, then read; a
    regular file or the null device never blocks."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        mode = os.fstat(fd).st_mode
        self._nonblocking = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        self._pollable = self._nonblocking or stat.S_ISCHR(mode)
        self._was_blocking = os.get_blocking(fd)
        if self._nonblocking:
            os.set_blocking(fd, False)

    async def _wait(self, wait: Any) -> None:
        if not self._pollable:
            await anyio.lowlevel.checkpoint()
            return
        try:
            await wait(self.fd)
        except OSError:  # a device the poller refuses (/dev/null): its reads and writes never block
            self._pollable = False
            await anyio.lowlevel.checkpoint()

    async def read(self, size: int) -> bytes:
        while True:
            if not self._nonblocking:
                await self._wait(anyio.wait_readable)
            try:
                return os.read(self.fd, size)
            except BlockingIOError:
                await self._wait(anyio.wait_readable)

    async def write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                await self._wait(anyio.wait_writable)

    def close(self) -> None:
        if self._nonblocking:
            try:
                os.set_blocking(self.fd, self._was_blocking)
            except OSError:
                pass
        os.close(self.fd)


READ_CHUNK = 65536


class _Lines:
    """Lines of at most `limit` bytes from an `_FdIO` (as `file.readline(limit)` returns them)."""

    def __init__(self, io: _FdIO) -> None:
        self._io, self._buf, self._eof = io, bytearray(), False

    def prefill(self, data: bytes) -> None:
        """Bytes read from the descriptor before this reader existed, read first."""
        self._buf[:0] = data

    async def readline(self, limit: int) -> bytes:
        while True:
            newline = self._buf.find(b"\n", 0, limit)
            if newline >= 0 or len(self._buf) >= limit or self._eof:
                end = newline + 1 if newline >= 0 else min(limit, len(self._buf))
                line = bytes(self._buf[:end])
                del self._buf[:end]
                return line
            data = await self._io.read(READ_CHUNK)
            if data:
                self._buf += data
            else:
                self._eof = True


class ClientGone(Exception):
    """The client closed its end of stdout (it crashed, or left memsift behind with stdin open):
    the server ends as when stdin closes, not with an internal error."""


class _SerialOut:
    """stdout for the SDK's writer and ours: one whole line at a time. The SDK's answer to the
    replayed `initialize` (handshake.py) is dropped: the client has had memsift's."""

    def __init__(self, io: _FdIO) -> None:
        self._io, self._lock = io, anyio.Lock()

    async def write(self, text: str) -> None:
        if REPLAY_ID in text and _answers_replay(text):
            return
        async with self._lock:
            try:
                await self._io.write_all(text.encode("utf-8", "replace"))
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise ClientGone("the client closed its end of stdout") from exc

    async def flush(self) -> None:
        return None  # every write goes out whole under the lock


def _answers_replay(text: str) -> bool:
    try:
        return json.loads(text).get("id") == REPLAY_ID
    except (ValueError, AttributeError):
        return False


async def _refused_oversize(line: bytes, lines: _Lines, out: _SerialOut) -> bool:
    """A line over MAX_LINE_BYTES: the rest of it is read and dropped (never kept), and one error
    answers it. False for a line within the limit."""
    if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):  # (readline's limit is MAX_LINE_BYTES + 1)
        return False
    head = line[:4096]
    while line and not line.endswith(b"\n"):
        line = await lines.readline(2**20)
    log.warning("an MCP message over the size limit was refused", limit=MAX_LINE_BYTES)
    await out.write(
        _error(_id_from_text(head), INVALID_REQUEST, f"Invalid Request: the message is over {MAX_LINE_BYTES} bytes")
        + "\n"
    )
    return True


class _GuardedIn:
    """stdin as the SDK reads it (an async iterator of lines), with malformed lines answered here;
    the `initialize` already answered early (if any) comes first, as the SDK must see it."""

    def __init__(self, lines: _Lines, out: _SerialOut, first: list[bytes]) -> None:
        self._lines, self._out, self._first = lines, out, first

    async def _lines_in(self) -> AsyncIterator[bytes]:
        while self._first:
            yield self._first.pop(0)
        while True:
            line = await self._lines.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            if await _refused_oversize(line, self._lines, self._out):
                continue
            yield line

    async def __aiter__(self) -> AsyncIterator[str]:
        async for raw in self._lines_in():
            try:
                line, errors = check_line(raw)
            except Exception as exc:  # noqa: BLE001  (a bug here must not end the server)
                log.warning("an MCP message could not be checked", error=f"{type(exc).__name__}: {exc}")
                line, errors = (
                    None,
                    [_error(_id_from_text(raw[:4096]), INVALID_REQUEST, "Invalid Request: unreadable message")],
                )
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


class StdioWire:
    """The process's stdin and stdout as the MCP wire, claimed as the SDK claims them (fd 0 and 1
    point at the null device and stderr while serving, so a child's stray output never lands on
    the wire), and restored by `release()`."""

    def __init__(self) -> None:
        null = os.open(os.devnull, os.O_RDONLY)
        in_fd, self._saved_in = _claim(0, null)
        out_fd, self._saved_out = _claim(1, 2)
        os.close(null)
        self._in, self._out_io = _FdIO(in_fd), _FdIO(out_fd)
        self._lines = _Lines(self._in)
        self._out = _SerialOut(self._out_io)
        self._first: list[bytes] = []
        self.early: EarlyHandshake | None = None

    async def handshake(self) -> EarlyHandshake | None:
        """Wait for the client's first message; an `initialize` is answered at once (handshake.py),
        before anything heavy is loaded (when the CLI's entry point did not already: `take_early`).
        Whatever it was, the SDK sees it first; a first line over the limit gets one error, as any."""
        read = take_early()
        if read is not None:
            self._lines.prefill(read.rest)
            if read.line is not None:
                self.early = read.early
                self._first.append(read.early.replay.encode() + b"\n" if read.early else read.line)
                return self.early
        line = await self._lines.readline(MAX_LINE_BYTES + 1)
        if not line:
            return None
        if await _refused_oversize(line, self._lines, self._out):
            return None
        self.early = answer_initialize(line)
        if self.early is not None:
            await self._out.write(self.early.answer + "\n")
            self._first.append(self.early.replay.encode() + b"\n")
        else:
            self._first.append(line)
        return self.early

    @asynccontextmanager
    async def sdk_streams(self) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK's stdio transport over the guarded wire: (read, write) streams."""
        from mcp.server.stdio import stdio_server  # noqa: PLC0415  (loaded only by `memsift mcp`)

        async with stdio_server(stdin=_GuardedIn(self._lines, self._out, self._first), stdout=self._out) as streams:  # type: ignore[arg-type]
            yield streams

    def release(self) -> None:
        for io in (self._in, self._out_io):
            try:
                io.close()
            except OSError:
                pass
        os.dup2(self._saved_in, 0)
        os.dup2(self._saved_out, 1)
        os.close(self._saved_in)
        os.close(self._saved_out)
