"""Resident searches: `memsift search` asks a running `memsift watch` (or `memsift mcp`) first.

A cold `memsift search` starts Python, imports numpy and onnxruntime, loads the model and opens
the index: about 0.3–0.6 s before the first result. A long-running memsift already has all of it
loaded and keeps the index fresh, so while one runs it answers the CLI's searches over a Unix
socket in a few milliseconds.

This module is the client and the rendezvous. It runs before the rest of the CLI is imported, and
a second search from a terminal is mostly interpreter start-up, so it imports only what is built
into the interpreter: `os`, `_socket`, `_json` (the C encoder), a built-in SHA-256, and
`private_dirs` (which does the same). No json decoder, pathlib, socket, hashlib or typing: they
cost 15–20 ms a call together. The server side is `resident_server.py`.

Rendezvous: `$XDG_RUNTIME_DIR/memsift/`, else `/tmp/memsift-<uid>/` (short paths: a socket path
must fit 107 bytes), created 0700 and used only when owned by this user. A server listens on
`<tag>-<pid>.sock` (0600), where the tag hashes the state directory the environment selects, so
servers of other state directories are never asked.

Safety: the server answers only when the request resolves to exactly its own settings (workspace,
agent, config, backend, environment); otherwise it declines and the CLI runs the search itself.
Secret-looking environment values are sent as hashes, never in clear. Any failure (no server, a
stale socket, a timeout, a decline) falls back to the ordinary cold search.

Protocol 3: the client sends one JSON request and closes its side. The server answers
`{"status": "working"}` and a newline at once (it is alive and will answer), then either the
answer, framed as a line `ok EXIT STDOUT_BYTES STDERR_BYTES` followed by those bytes (UTF-8, so
the client needs no JSON decoder), or a JSON decline line. A server that does not connect and
acknowledge within about a second (a stopped or overloaded one) is skipped, so a terminal search
is never held up by it.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from ..private_dirs import current_path, default_state_path, private_runtime_path
from .streams import writes_unicode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Mapping

try:  # built-in SHA-256: hashlib would load OpenSSL first (4 ms)
    from _sha2 import sha256  # Python ≥ 3.12
except ImportError:  # pragma: no cover - depends on the interpreter
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        from hashlib import sha256

try:
    from _json import encode_basestring_ascii as _json_string
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    from json.encoder import py_encode_basestring_ascii as _json_string

__all__ = [
    "rendezvous_dir",
    "state_tag",
    "relevant_env",
    "command_index",
    "asks_for_help",
    "try_resident",
    "forget_if_dead",
    "PROTOCOL",
    "CONNECT_TIMEOUT_S",
    "ACK_TIMEOUT_S",
    "ANSWER_TIMEOUT_S",
]

PROTOCOL = 3
CONNECT_TIMEOUT_S = 1.0
ACK_TIMEOUT_S = 1.0  # the server says "working" as soon as it has read the request
ASK_BUDGET_S = 1.5  # connecting and acknowledging, over every server tried, before searching here
ANSWER_TIMEOUT_S = 30.0  # after the acknowledgement: the search (a sync first, within its budget)
_HELP = ("-h", "--help")
# Options of the `memsift` group that take a value (to find the subcommand in argv).
_GROUP_VALUE_OPTIONS = {"-w", "--workspace", "-a", "--agent", "-c", "--config", "--openclaw-config", "-b", "--backend"}
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
_NOT_RELEVANT = {"MEMSIFT_LOG_LEVEL", "MEMSIFT_NO_RESIDENT"}  # change no answer


def state_tag(env: Mapping[str, str]) -> str:
    """Names the state directory the environment selects (the config file's stateDir is not read
    here; the server checks the full settings anyway)."""
    return sha256(os.path.abspath(default_state_path(env)).encode()).hexdigest()[:12]


def rendezvous_dir(env: Mapping[str, str], *, create: bool = False) -> Path | None:
    """The private folder for sockets, or None when it is missing or not safely ours."""
    from pathlib import Path  # noqa: PLC0415  (the servers' and the helper's side)

    folder = private_runtime_path(env, create=create)
    return Path(folder) if folder else None


def _is_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def _this_install() -> str:
    """Which install of memsift runs: upgrading (pip writes every file anew) changes it, so a helper
    left running by the release before never answers the new one's searches, nor the reverse (a
    helper of 0.1 declines a request carrying a key it lacks)."""
    st = os.stat(__file__)
    return f"{st.st_ino}:{st.st_mtime_ns}"


_INSTALL = _this_install()


def _local_zone() -> str:
    """The time zone this process reads local days in ("yesterday", a $MEMSIFT_NOW without an offset), as
    the clock read it at start: a helper started in another zone, or before the system's zone file was
    changed, would name another day "yesterday" than the cold CLI asking it."""
    return f"{time.tzname}|{time.timezone}|{time.altzone}|{os.path.realpath('/etc/localtime')}"


_ZONE = _local_zone()


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """What of the environment can change how a search is configured or answered: memsift's own
    variables, where configs and state live, the time zone, and API keys (hashed: only equality
    matters); and which install of memsift asks and the zone it reads days in (names no variable can have)."""
    out = {"memsift install": _INSTALL, "local time zone": _ZONE}
    for name, value in env.items():
        if name in _NOT_RELEVANT:
            continue
        if name.startswith("MEMSIFT") or name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "TZ"):
            out[name] = value
        elif _is_secret(name):
            out[name] = "sha256:" + sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
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


def _servers(folder: str, tag: str) -> list[str]:
    names = sorted(n for n in os.listdir(folder) if n.startswith(f"{tag}-") and n.endswith(".sock"))
    return [os.path.join(folder, n) for n in names]


def forget_if_dead(sock: str) -> None:
    """Remove a socket left by a server that no longer runs (killed before it could)."""
    try:
        os.kill(int(sock[: -len(".sock")].rsplit("-", 1)[1]), 0)
    except ProcessLookupError:
        try:
            os.unlink(sock)
        except OSError:
            pass
    except (ValueError, IndexError, PermissionError):
        pass


def _encode_request(argv: list[str], cwd: str, env: dict[str, str]) -> bytes:
    """The request as ASCII JSON (any string round-trips, an undecodable argv byte included, as
    a lone surrogate), written with the C string encoder instead of importing json."""
    items = ", ".join(f"{_json_string(k)}: {_json_string(v)}" for k, v in env.items())
    args = ", ".join(_json_string(a) for a in argv)
    return f'{{"protocol": {PROTOCOL}, "argv": [{args}], "cwd": {_json_string(cwd)}, "env": {{{items}}}}}'.encode(
        "ascii"
    )


WORKING = b'{"status": "working"}'  # the server acknowledges a request with this line (resident_server.py)


def _recv_line(s: Any, buf: bytes) -> tuple[bytes, bytes]:
    while b"\n" not in buf:
        data = s.recv(1 << 16)
        if not data:
            break
        buf += data
    line, _, rest = buf.partition(b"\n")
    return line, rest


def _ask(sock: str, request: bytes, deadline: float) -> tuple[int, bytes, bytes] | None:
    """The server's answer (exit code, stdout, stderr), or None. Connecting and its
    acknowledgement must fit `deadline`."""
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(max(0.05, min(CONNECT_TIMEOUT_S, deadline - time.monotonic())))
        try:
            s.connect(sock)
        except (ConnectionRefusedError, FileNotFoundError):
            forget_if_dead(sock)
            return None
        s.sendall(request)
        s.shutdown(_socket.SHUT_WR)
        s.settimeout(max(0.05, min(ACK_TIMEOUT_S, deadline - time.monotonic())))
        first, rest = _recv_line(s, b"")  # "working", or a decline
        if first != WORKING:
            return None
        s.settimeout(ANSWER_TIMEOUT_S)
        header, body = _recv_line(s, rest)
        parts = header.split(b" ")
        if len(parts) != 4 or parts[0] != b"ok":
            return None  # a decline
        code, n_out, n_err = (int(p) for p in parts[1:])
        while len(body) < n_out + n_err:
            data = s.recv(1 << 16)
            if not data:
                return None  # cut short: search here instead
            body += data
        return code, body[:n_out], body[n_out : n_out + n_err]
    finally:
        s.close()


def try_resident(argv: list[str], env: Mapping[str, str] | None = None) -> int | None:
    """Have a running memsift answer `memsift search …`: prints its output and returns the exit
    code, or returns None (nothing printed) when the CLI should run the command itself."""
    env = os.environ if env is None else env
    cut = command_index(argv)
    if cut is None or argv[cut] != "search" or env.get("MEMSIFT_NO_RESIDENT") or asks_for_help(argv, cut):
        return None
    if not writes_unicode():  # the server's answer is UTF-8 text; the CLI here escapes what stdout cannot write
        return None
    folder = private_runtime_path(env)
    if folder is None:
        return None
    here = current_path()
    if here is None:  # a shell left in a deleted folder: the CLI says what to do
        return None
    request = _encode_request(argv, here, relevant_env(env))
    deadline = time.monotonic() + ASK_BUDGET_S
    for sock in _servers(folder, state_tag(env)):
        if time.monotonic() >= deadline:
            break
        try:
            answer = _ask(sock, request, deadline)
        except (OSError, ValueError):  # a timeout, a reset, garbage: run the search ourselves
            continue
        if answer is None:
            continue
        code, out, err = answer
        try:
            sys.stdout.write(out.decode("utf-8", "surrogatepass"))
            sys.stderr.write(err.decode("utf-8", "surrogatepass"))
            sys.stdout.flush()
        except BrokenPipeError:  # `memsift search … | head`: what reads it has what it wanted
            return code
        except OSError as exc:  # `> /dev/full`, a full disk, a terminal gone: the machine's, not a bug
            from .crash import write_refused  # noqa: PLC0415

            return write_refused(exc, output=True)
        return code
    return None
