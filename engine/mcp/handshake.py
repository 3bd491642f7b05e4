"""The MCP handshake answered before the MCP SDK is imported.

Importing the SDK takes 1.2–1.3 s on two cores (its protocol types are thousands of pydantic
models), and a client gives a server a few seconds to answer `initialize` (OpenClaw: 5 s, on a
machine that is starting a Gateway at the same time). So `memsift mcp` over stdio answers the
first `initialize` from here, with nothing heavier than `json` imported, and then loads the SDK,
the config and the index. The SDK is handed the same `initialize` (under a private id, asking for
the version answered here) so its session is set up as if it had answered; its own answer to
that is dropped (stdio.py).

What this answers must be what the SDK would: the versions it negotiates through the handshake,
its capabilities for the server memsift builds, the instructions. A test holds the two answers
side by side for every version here.
"""

from __future__ import annotations

import json
import os

__all__ = ["HANDSHAKE_VERSIONS", "CAPABILITIES", "INSTRUCTIONS", "REPLAY_ID", "EarlyHandshake", "answer_initialize",
           "answer_before_loading", "take_early", "EarlyRead"]

# The SDK's HANDSHAKE_PROTOCOL_VERSIONS (mcp_types.version), oldest first; the last is offered to
# a client asking for a version not listed (as the SDK does).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CAPABILITIES = {"prompts": {"listChanged": False}, "resources": {"listChanged": False, "subscribe": False},
                "tools": {"listChanged": False}}
INSTRUCTIONS = """## Memory Recall
This server searches the user's long-term memory: MEMORY.md and the daily logs memory/YYYY-MM-DD.md.
Before answering anything about prior work, decisions, dates, people, preferences or todos, call
memory_search first; then call memory_get for the lines you need. Include `Source: <path#line>`
when it helps the user check a claim."""
# The SDK's answer to the replayed request carries this id, and is dropped. Random per process: a
# client's own request can never carry it (one with id "memsift-early-initialize" went unanswered).
REPLAY_ID = f"memsift-early-initialize-{os.urandom(12).hex()}"
FIRST_LINE_LIMIT = 4 * 2**20  # stdio.MAX_LINE_BYTES (not imported: stdio.py loads anyio)


class EarlyHandshake:
    """The answer written to the client, and the request to replay to the SDK."""

    __slots__ = ("answer", "replay", "version")

    def __init__(self, answer: str, replay: str, version: str) -> None:
        self.answer, self.replay, self.version = answer, replay, version


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("memsift")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "0+unknown"


def answer_initialize(line: bytes | str) -> EarlyHandshake | None:
    """The early answer when `line` is a well-formed `initialize` request, else None (the SDK
    then sees the line as it is, and answers or refuses it itself)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(message, dict) and message.get("jsonrpc") == "2.0" and message.get("method") == "initialize"):
        return None
    id_, params = message.get("id"), message.get("params")
    if isinstance(id_, bool) or not isinstance(id_, (int, str)) or not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    if not isinstance(requested, str) or not isinstance(params.get("clientInfo"), dict) \
            or not isinstance(params.get("capabilities"), dict):
        return None  # the SDK's validation words the refusal
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result = {"capabilities": CAPABILITIES, "instructions": INSTRUCTIONS, "protocolVersion": version,
              "serverInfo": {"name": "memsift", "version": _version()}}
    answer = json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}, separators=(",", ":"))
    replay = json.dumps({**message, "id": REPLAY_ID, "params": {**params, "protocolVersion": version}})
    return EarlyHandshake(answer, replay, version)


class EarlyRead:
    """What `answer_before_loading` read from stdin: the first line (None when it is over the
    limit, or stdin ended), its answer if it was an `initialize`, and the bytes read after it."""

    __slots__ = ("line", "early", "rest")

    def __init__(self, line: bytes | None, early: EarlyHandshake | None, rest: bytes) -> None:
        self.line, self.early, self.rest = line, early, rest


_early_read: list[EarlyRead] = []


def answer_before_loading(fd_in: int = 0, fd_out: int = 1) -> None:
    """`memsift mcp` over stdio, first thing in the process: read the client's first line and
    answer an `initialize` at once, before the CLI, pydantic and the SDK are imported (0.2 s of a
    0.45 s answer idle, 1.3-3.9 s on a busy machine). The stdio wire takes over from what was read
    (`take_early`). A signal meanwhile ends the process as the signal's own default does."""
    buf = bytearray()
    try:
        while b"\n" not in buf and len(buf) <= FIRST_LINE_LIMIT:
            chunk = os.read(fd_in, 65536)
            if not chunk:
                break
            buf += chunk
    except KeyboardInterrupt:  # Ctrl-C before any client spoke: no traceback
        os._exit(130)
    except OSError:
        pass  # the wire says what is wrong when it reads
    end = buf.find(b"\n")
    if end < 0 or end > FIRST_LINE_LIMIT:  # no whole line (stdin ended, or one over the limit): the wire reads it
        _early_read.append(EarlyRead(None, None, bytes(buf)))
        return
    line, rest = bytes(buf[:end + 1]), bytes(buf[end + 1:])
    early = answer_initialize(line)
    if early is not None:
        data = (early.answer + "\n").encode()
        try:
            while data:
                data = data[os.write(fd_out, data):]
        except (BrokenPipeError, ConnectionResetError):  # the client closed its end of stdout: it is gone
            raise SystemExit(0) from None
    _early_read.append(EarlyRead(line, early, rest))


def take_early() -> EarlyRead | None:
    """What `answer_before_loading` read, once; None when it did not run."""
    return _early_read.pop() if _early_read else None
