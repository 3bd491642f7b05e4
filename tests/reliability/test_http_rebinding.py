"""DNS rebinding on every bind (hardening round 5, item 2): the Host/Origin check is judged by the
bound address, not its spelling. A server bound to another loopback address (127.0.0.2,
`::ffff:127.0.0.1`) or to a wildcard (0.0.0.0) used to turn the check off, and `Host: evil.com`
then read MEMORY.md through a whole MCP session. Real servers on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from memsift.engine.mcp.http import LOOPBACK_HOSTS, StrictAuthority, allowed_hosts_for, is_loopback

pytest.importorskip("mcp", reason="the MCP server needs the MCP SDK")

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("spelling", ["127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "[::1]", "::ffff:127.0.0.1",
                                      "localhost", "LOCALHOST."])
def test_every_spelling_of_a_loopback_address_is_loopback(spelling):
    assert is_loopback(spelling)


@pytest.mark.parametrize("spelling", ["0.0.0.0", "::", "192.168.1.5", "10.0.0.1", "evil.com", "localhost.evil.com",
                                      "::ffff:10.0.0.1", "128.0.0.1"])
def test_other_addresses_are_not(spelling):
    assert not is_loopback(spelling)


@pytest.mark.parametrize("bind", ["127.0.0.2", "::ffff:127.0.0.1", "0.0.0.0", "::", "192.168.1.5"])
def test_the_check_stays_on_for_every_bind(bind):
    guard = StrictAuthority(None, allowed_hosts=allowed_hosts_for(bind))
    assert guard.check({"host": "evil.com:8765"}, 8765) == (421, "Invalid Host header")
    assert guard.check({"host": "127.0.0.1:8765", "origin": "http://evil.com"}, 8765) == (403, "Invalid Origin header")
    assert guard.check({"host": "127.0.0.2:8765"}, 8765) is None  # a loopback literal is never a rebound name
    assert guard.check({"host": "localhost:8765", "origin": "http://localhost:8765"}, 8765) is None
    assert guard.check({"host": "localhost:8766"}, 8765) is not None  # another port is another server


def test_a_lan_bind_allows_its_own_address_and_the_operators_names_only():
    guard = StrictAuthority(None, allowed_hosts=allowed_hosts_for("192.168.1.5", ["memory.internal"]))
    assert guard.check({"host": "192.168.1.5:8765"}, 8765) is None
    assert guard.check({"host": "memory.internal"}, 8765) is None  # behind a proxy on another port
    assert guard.check({"host": "192.168.1.6:8765"}, 8765) is not None
    assert allowed_hosts_for("0.0.0.0") == LOOPBACK_HOSTS
    assert allowed_hosts_for("0.0.0.0", ["*"]) is None  # off only when asked for by name


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("bind, connect", [("127.0.0.2", "127.0.0.2"), ("0.0.0.0", "127.0.0.1")])
def test_a_real_server_on_another_bind_refuses_a_rebound_host(bind, connect, example_workspace, tmp_path):
    import httpx

    try:
        port = _free_port(connect)
    except OSError:
        pytest.skip(f"{connect} is not on this machine's loopback interface")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
           "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_RUNTIME_DIR": str(tmp_path), "MEMSIFT_NO_RESIDENT": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(example_workspace), "mcp",
                             "--http", "--host", bind, "--port", str(port), "--no-watch"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection((connect, port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.2)
        url = f"http://{connect}:{port}/mcp"
        for headers in ({"Host": "evil.com"}, {"Host": f"evil.com:{port}"}, {"Origin": "http://evil.com"},
                        {"Host": f"{connect}:{port}", "Origin": f"http://evil.com:{port}"}):
            refused = httpx.post(url, json=INIT, headers={**ACCEPT, **headers}, timeout=30)
            assert refused.status_code in (403, 421), (bind, headers, refused.status_code, refused.text[:200])
            assert "serverInfo" not in refused.text
        # The address it was reached at (or a loopback name) still works: an MCP session starts.
        for host in (f"{connect}:{port}", f"localhost:{port}"):
            ok = httpx.post(url, json=INIT, headers={**ACCEPT, "Host": host}, timeout=60)
            assert ok.status_code == 200 and "serverInfo" in ok.text, (bind, host, ok.status_code, ok.text[:200])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    if bind == "0.0.0.0":
        assert "requests must name a loopback host" in proc.stderr.read().decode()
