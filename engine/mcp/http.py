"""MCP over streamable HTTP, with a strict DNS-rebinding check in front of the SDK's app.

The SDK allows `localhost:*` by testing that the Host header *starts with* `localhost:`, so
`Host: localhost:8765@evil.com` and `Origin: http://localhost:8765@evil.com` passed. Here the
authority is parsed strictly, before any request reaches the SDK: a host name or address, then
at most a port of digits; on a loopback bind the host must be a loopback name and the port the
one the server listens on (read from the connection, so `--port 0` works). An Origin must be
exactly `http(s)://<such an authority>`: no user info, no path.

The check is judged by the address, not its spelling: a bind to any loopback address (127.0.0.2,
`::ffff:127.0.0.1`) keeps it, and so does a wildcard or LAN bind (0.0.0.0, ::, 192.168.1.5), where
the names a client may use are loopback ones, the bound address itself and those the operator
allows (`--allow-host`; `*` turns the check off, for a proxy that does its own). A Host that is a
loopback address literal is always fine: a page rebound from another name sends that name.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
import sys
from typing import Any, Iterable

from ..errors import MemsiftError
from ..logging import get_logger

__all__ = ["StrictAuthority", "serve_http", "LOOPBACK_HOSTS", "is_loopback", "allowed_hosts_for"]

log = get_logger("memsift.mcp")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
_AUTHORITY = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>[0-9]{1,5}))?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#@\s]+)")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """`localhost`, or an address on the loopback network however it is spelt (127.0.0.2, ::1,
    `::ffff:127.0.0.1`, `[::1]`)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    addr = _address(host)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr is not None and addr.is_loopback


def allowed_hosts_for(bind: str, extra: Iterable[str] = ()) -> frozenset[str] | None:
    """The host names a request may name when the server binds `bind`: loopback names, a specific
    bound address itself, and the operator's `extra` names; None only when `extra` holds `*`."""
    names = {h.strip().lower() for h in extra if h.strip()}
    if "*" in names:
        return None
    addr = _address(bind)
    if addr is not None and not addr.is_unspecified and not is_loopback(bind):  # a LAN address: its own literal
        names.add(f"[{addr.compressed}]" if addr.version == 6 else addr.compressed)
    return frozenset(LOOPBACK_HOSTS | names)


def _authority(text: str) -> tuple[str, int | None] | None:
    m = _AUTHORITY.fullmatch(text.strip())
    if not m:
        return None
    return m.group("host").lower(), int(m.group("port")) if m.group("port") else None


class StrictAuthority:
    """ASGI middleware: refuse (421/403) requests whose Host or Origin names another server."""

    def __init__(self, app: Any, *, allowed_hosts: frozenset[str] | None) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts  # None: not bound to loopback (the operator's proxy decides)

    def _host_ok(self, value: str | None, port: int | None, default_port: int | None) -> bool:
        parsed = _authority(value or "")
        if parsed is None:
            return False
        host, given = parsed
        if self.allowed_hosts is None:  # `--allow-host '*'`: the operator's proxy decides
            return True
        if host not in self.allowed_hosts and not is_loopback(host):
            return False
        if host not in LOOPBACK_HOSTS and not is_loopback(host):  # a name the operator allows: any port (a proxy's)
            return True
        return port is None or (given if given is not None else default_port) == port

    def check(self, headers: dict[str, str], server_port: int | None) -> tuple[int, str] | None:
        """(status, reason) when the request must be refused, else None."""
        if not self._host_ok(headers.get("host"), server_port, 80):
            return 421, "Invalid Host header"
        origin = headers.get("origin")
        if origin:
            m = _ORIGIN.fullmatch(origin.strip())
            default = 443 if m and m.group("scheme") == "https" else 80
            if m is None or not self._host_ok(m.group("authority"), server_port, default):
                return 403, "Invalid Origin header"
        return None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers: dict[str, str] = {}
            for key, value in scope.get("headers") or []:
                name = key.decode("latin-1").lower()
                if name in ("host", "origin"):
                    if name in headers:  # two Host headers: which one a proxy used is unknowable
                        headers[name] = "\x00"
                    else:
                        headers[name] = value.decode("latin-1")
            server = scope.get("server") or (None, None)
            refused = self.check(headers, server[1] if isinstance(server[1], int) else None)
            if refused is not None:
                log.warning("HTTP request refused (DNS-rebinding protection)", reason=refused[1],
                            host=headers.get("host", "")[:100], origin=headers.get("origin", "")[:100])
                body = refused[1].encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": refused[0],
                        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def serve_http(server: Any, listener: socket.socket, *, host: str, allow_hosts: Iterable[str] = ()) -> None:
    """The SDK's streamable HTTP app (JSON answers) behind `StrictAuthority`, served by uvicorn on
    `listener` (`listening_socket`)."""
    import uvicorn  # noqa: PLC0415  (the MCP SDK brings it)

    from mcp.server.transport_security import TransportSecuritySettings  # noqa: PLC0415

    # StrictAuthority makes the check, by address; the SDK's own (by spelling, prefix-matched) is off.
    app = server.streamable_http_app(json_response=True, host=host, transport_security=TransportSecuritySettings(
        enable_dns_rebinding_protection=False))
    allowed = allowed_hosts_for(host, allow_hosts)
    if allowed is None:
        log.warning("HTTP Host/Origin check off (--allow-host '*'): put a proxy that checks them in front")
    guarded = StrictAuthority(app, allowed_hosts=allowed)
    port = listener.getsockname()[1]
    # uvicorn's records go through memsift's one-line handler at memsift's level (logging.py:
    # `route_library_logs`), not through uvicorn's own coloured formatters.
    config = uvicorn.Config(guarded, host=host, port=port, log_config=None, log_level=None)
    # uvicorn says where it listens only when it binds the socket itself (`--port 0` included).
    where = f"[{host}]" if ":" in host else host
    print(f"memsift: serving MCP at http://{where}:{port}/mcp (Ctrl-C stops)", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[listener])


_WHAT_TO_DO = {
    errno.EADDRINUSE: "another server has this port: choose another with --port, or stop that one",
    errno.EACCES: "ports below 1024 need privileges: choose --port 1024 or above",
    errno.EADDRNOTAVAIL: "this machine has no such address: use 127.0.0.1, or one of its own addresses",
}


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound as uvicorn binds it; a port in use or refused is one line saying
    what to do (uvicorn logged the error, then exited with status 3, memsift's code for a bad config)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # connections made from now on wait for the server (uvicorn's backlog)
    except (OSError, OverflowError) as exc:
        sock.close()
        why = getattr(exc, "strerror", None) or str(exc)
        hint = _WHAT_TO_DO.get(getattr(exc, "errno", None) or 0, "check --host and --port")
        raise MemsiftError(f"cannot listen on {host}:{port}: {why.lower()} ({hint})") from None
    return sock
