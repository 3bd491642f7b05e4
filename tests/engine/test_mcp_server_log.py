"""What `memsift mcp` writes on stderr, which MCP hosts keep as the server's log: one line a record,
in memsift's format, at memsift's level, secrets masked, whatever library wrote the record (the MCP
SDK, uvicorn, httpx). The SDK's own set-up printed through rich, each record wrapped at 80 columns
over up to five lines, at INFO, and httpx's request lines carried a provider URL's password."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from helpers import free_port  # noqa: E402
from provider_server import ProviderServer  # noqa: E402

PASSWORD = "Pw-7hQx-log-secret"
ONE_RECORD = re.compile(r"^(\d\d:\d\d:\d\d \[(debug|info|warning|error|critical) *\] |memsift: )")
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
            "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "MEMSIFT_NO_RESIDENT": "1", "COLUMNS": "80"}


def _stdio_session(tmp_path: Path, ws: Path, verbosity: list[str], calls: list[dict], *config: str) -> str:
    """`memsift [-v…] mcp` over stdio: the handshake, `calls` answered one by one, stdin closed;
    its stderr (a file, as a host keeps it)."""
    err_path = tmp_path / f"stderr{len(list(tmp_path.glob('stderr*')))}.log"
    with err_path.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", *verbosity, *config, "-w", str(ws),
                                 "mcp", "--no-watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                env=_env(tmp_path))
        asked = ({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": c} for i, c in enumerate(calls))
        messages = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *asked]
        try:
            for message in messages:
                proc.stdin.write((json.dumps(message) + "\n").encode())
                proc.stdin.flush()
                if "id" in message:
                    answer = json.loads(proc.stdout.readline())
                    assert answer.get("id") == message["id"], answer
            proc.stdin.close()
            assert proc.wait(120) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    return err_path.read_text()


def _one_line_each(log: str) -> list[str]:
    lines = [line for line in log.splitlines() if line.strip()]
    assert all(ONE_RECORD.match(line) for line in lines), log
    return lines


def test_a_provider_urls_password_never_reaches_the_log_and_each_record_is_one_line(tmp_path, example_workspace):
    with ProviderServer("openai", key=None) as server:
        url = server.base_url.replace("http://", f"http://bob:{PASSWORD}@")
        config = tmp_path / "memsift.json"
        config.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "model": "text-embedding-3-small", "remote": {"baseUrl": url, "apiKey": "k"}}}}}))
        search = {"name": "memory_search", "arguments": {"query": "ledger", "mode": "vector"}}
        log = _stdio_session(tmp_path, example_workspace, ["-vv"], [search], "-c", str(config))
        assert server.embedding_requests()  # the provider was really called, through that URL
    lines = _one_line_each(log)
    requests = [line for line in lines if "logger=httpx" in line]
    assert requests and all("bob:***@127.0.0.1" in line for line in requests), log  # logged, masked
    assert PASSWORD not in log


def test_the_sdks_records_follow_memsifts_level(tmp_path, example_workspace):
    refused = {"name": "memory_search", "arguments": {"query": "ledger", "maxResults": 0}}
    quiet = _stdio_session(tmp_path, example_workspace, [], [refused], "--backend", "builtin")
    assert "memory_search" not in quiet and not [line for line in quiet.splitlines() if line.startswith(" ")], quiet
    told = _one_line_each(_stdio_session(tmp_path, example_workspace, ["-v"], [refused]))
    failed = [line for line in told if "Tool 'memory_search' failed" in line]
    assert len(failed) == 1 and "maxResults" in failed[0] and "logger=mcp." in failed[0], told



@pytest.mark.parametrize("verbosity", [[], ["-v"]])
def test_the_http_servers_log_is_memsifts_too(tmp_path, example_workspace, verbosity):
    import httpx

    port = free_port()
    err_path = tmp_path / "stderr.log"
    with err_path.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", *verbosity, "-w",
                                 str(example_workspace), "mcp", "--http", "--port", str(port), "--no-watch"],
                                stdout=subprocess.DEVNULL, stderr=err, env=_env(tmp_path))
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    answer = httpx.post(f"http://127.0.0.1:{port}/mcp", json=INIT, timeout=30,
                                        headers={"Accept": "application/json, text/event-stream"})
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and proc.poll() is None, err_path.read_text()
                    time.sleep(0.2)
            assert answer.status_code == 200
            proc.send_signal(signal.SIGINT)
            assert proc.wait(60) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
    lines = _one_line_each(err_path.read_text())
    assert lines[0].startswith(f"memsift: serving MCP at http://127.0.0.1:{port}/mcp")
    if not verbosity:
        assert lines == lines[:1]  # uvicorn's start, sessions and access lines are -v's
    else:
        assert any(re.search(r'\[info *\] 127\.0\.0\.1:\d+ - "POST /mcp HTTP/1\.1" 200 +logger=uvicorn\.access$', line)
                   for line in lines), lines
        assert any("Application startup complete." in line and "logger=uvicorn.error" in line for line in lines)
