"""Resident searches: `memsift search` asks a running `memsift watch` (or `memsift mcp`) first.

A cold `memsift search` starts Python, imports numpy and onnxruntime, loads the model and opens
the index: about 0.3–0.6 s before the first result. A long-running memsift already has all of it
loaded and keeps the index fresh, so while one runs it answers the CLI's searches over a Unix
socket in a few milliseconds.

This module is the client and the rendezvous, and imports nothing but the standard library (and
`private_dirs`, which does the same): it runs before the rest of the CLI is imported. The server
side is `resident_server.py`.

Rendezvous: `$XDG_RUNTIME_DIR/memsift/`, else `/tmp/memsift-<uid>/` (short paths: a socket path
must fit 107 bytes), created 0700 and used only when owned by this user. A server listens on
`<tag>-<pid>.sock` (0600), where the tag hashes the state directory the environment selects, so
servers of other state directories are never asked.

Safety: the server answers only when the request resolves to exactly its own settings (workspace,
agent, config, backend, environment); otherwise it declines and the CLI runs the search itself.
Secret-looking environment values are sent as hashes, never in clear. Any failure (no server, a
stale socket, a timeout, a decline) falls back to the ordinary cold search.

Protocol 2: the client sends one JSON request and closes its side; the server answers with
newline-ended JSON lines: `{"status": "working"}` at once (it is alive and will answer), then the
answer (or a decline). A server that does not connect and acknowledge within about a second (a
stopped or overloaded one) is skipped, so a terminal search is never held up by it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from ..private_dirs import default_state_dir

__all__ = [
    "rendezvous_dir",
    "state_tag",
    "relevant_env",
    "command_index",
    "asks_for_help",
    "try_resident",
    "PROTOCOL",
    "CONNECT_TIMEOUT_S",
    "ACK_TIMEOUT_S",
    "ANSWER_TIMEOUT_S",
]

PROTOCOL = 2
CONNECT_TIMEOUT_S = 1.0
ACK_TIMEOUT_S = 1.0  # the server says "working" as soon as it has read the request
ASK_BUDGET_S = 1.5  # connecting and acknowledging, over every server tried, before searching here
ANSWER_TIMEOUT_S = 30.0  # after the acknowledgement: the search (a sync first, within its budget)
_HELP = ("-h", "--help")
# Options of the `memsift` group that take a value (to find the subcommand in argv).
_GROUP_VALUE_OPTIONS = {"-w", "--workspace", "-a", "--agent", "-c", "--config", "-b", "--backend"}
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
_NOT_RELEVANT = {"MEMSIFT_LOG_LEVEL", "MEMSIFT_NO_RESIDENT"}  # change no answer


def state_tag(env: Mapping[str, str]) -> str:
    """Names the state directory the environment selects (the config file's stateDir is not read
    here; the server checks the full settings anyway)."""
    return hashlib.sha256(os.path.abspath(default_state_dir(env)).encode()).hexdigest()[:12]


def rendezvous_dir(env: Mapping[str, str], *, create: bool = False) -> Path | None:
    """The private folder for sockets, or None when it is missing or not safely ours."""
    runtime = env.get("XDG_RUNTIME_DIR")
    folder = Path(runtime) / "memsift" if runtime and os.path.isdir(runtime) else Path(f"/tmp/memsift-{os.getuid()}")
    if create:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    # Another user's folder, a symlink, or one others can write to is never used.
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder


def _is_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """What of the environment can change how a search is configured or answered: memsift's own
    variables, where configs and state live, and API keys (hashed: only equality matters)."""
    out = {}
    for name, value in env.items():
        if name in _NOT_RELEVANT:
            continue
        if name.startswith("MEMSIFT") or name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            out[name] = value
        elif _is_secret(name):
            out[name] = "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
    return out


def command_index(argv: list[str]) -> int | None:
    """Where the subcommand is in `memsift [group options] CMD …`, or None (none, or help)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in _GROUP_VALUE_OPTIONS:
            i += 2
        elif arg in ("-h", "--help", "--version"):
            return None
        elif arg.startswith("-"):
            i += 1
        else:
            return i
    return None


def asks_for_help(argv: list[str], cut: int) -> bool:
    """`memsift search … --help`: click prints help, which only the CLI itself may do (a server
    printing it would write into its own output)."""
    return any(a in _HELP for a in argv[cut + 1 :])


def _servers(folder: Path, tag: str) -> list[Path]:
    return sorted(folder.glob(f"{tag}-*.sock"))


def _forget_if_dead(sock: Path) -> None:
    """Remove a socket left by a server that no longer runs (killed before it could)."""
    try:
        os.kill(int(sock.stem.rsplit("-", 1)[1]), 0)
    except ProcessLookupError:
        try:
            sock.unlink()
        except OSError:
            pass
    except (ValueError, IndexError, PermissionError):
        pass


def _ask(sock: Path, request: bytes, deadline: float) -> dict[str, Any] | None:
    """The server's answer, or None. Connecting and its acknowledgement must fit `deadline`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(max(0.05, min(CONNECT_TIMEOUT_S, deadline - time.monotonic())))
        try:
            s.connect(str(sock))
        except (ConnectionRefusedError, FileNotFoundError):
            _forget_if_dead(sock)
            return None
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        buf = b""
        s.settimeout(max(0.05, min(ACK_TIMEOUT_S, deadline - time.monotonic())))
        while b"\n" not in buf:  # the first line: "working", or a decline
            data = s.recv(1 << 16)
            if not data:
                break
            buf += data
        first, _, rest = buf.partition(b"\n")
        reply = json.loads(first.decode("ascii"))
        if reply.get("status") != "working":
            return reply
        s.settimeout(ANSWER_TIMEOUT_S)
        chunks = [rest]
        while True:
            data = s.recv(1 << 16)
            if not data:
                break
            chunks.append(data)
    return json.loads(b"".join(chunks).decode("ascii"))


def try_resident(argv: list[str], env: Mapping[str, str] | None = None) -> int | None:
    """Have a running memsift answer `memsift search …`: prints its output and returns the exit
    code, or returns None (nothing printed) when the CLI should run the command itself."""
    env = os.environ if env is None else env
    cut = command_index(argv)
    if cut is None or argv[cut] != "search" or env.get("MEMSIFT_NO_RESIDENT") or asks_for_help(argv, cut):
        return None
    folder = rendezvous_dir(env)
    if folder is None:
        return None
    # ASCII JSON: any string (an undecodable argv byte arrives as a lone surrogate) round-trips.
    request = json.dumps({"protocol": PROTOCOL, "argv": argv, "cwd": os.getcwd(), "env": relevant_env(env)}).encode("ascii")
    deadline = time.monotonic() + ASK_BUDGET_S
    for sock in _servers(folder, state_tag(env)):
        if time.monotonic() >= deadline:
            break
        try:
            answer = _ask(sock, request, deadline)
        except (OSError, ValueError):  # a timeout, a reset, garbage: run the search ourselves
            continue
        if not answer or answer.get("status") != "ok":
            continue
        sys.stdout.write(answer.get("stdout", ""))
        sys.stderr.write(answer.get("stderr", ""))
        sys.stdout.flush()
        return int(answer.get("exit", 0))
    return None
