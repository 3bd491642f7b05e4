"""The resident socket under abuse by a local client: configs that are fifos, devices or huge files,
floods of half-open connections, oversize and incomplete requests, a stopped (SIGSTOP) server.
The server (`memsift watch`, `memsift mcp --http`) never exits, and every `memsift search` in a
terminal is answered promptly, by the server or by the CLI itself."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from figures import FIGURES
from helpers import EXAMPLE_WORKSPACE, free_port
from memory_guard import assert_untouched, snapshot
from memsift.engine.cli.resident import PROTOCOL, relevant_env

HANG_BOUND_S = 15  # generous: a hang is what must be absent (it used to be 120 s or forever)


@pytest.fixture
def runtime_dir():
    d = tempfile.mkdtemp(prefix="msa")  # short: a socket path must fit 107 bytes
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)



class Server:
    def __init__(self, kind: str, ws: Path, cfg: Path, env: dict[str, str], runtime: Path, events: Path) -> None:
        args = ["watch", "--json"] if kind == "watch" else ["mcp", "--http", "--port", str(free_port())]

        def few_descriptors() -> None:  # so a flood exhausts them as it would at a lower default limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))

        self.out = open(events, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), *args],
            env=env,
            stdout=self.out,
            stderr=subprocess.PIPE,
            preexec_fn=few_descriptors,
        )
        deadline = time.monotonic() + 120
        while not list((runtime / "memsift").glob("*.sock")):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.proc.stderr.read().decode()[-3000:]
            time.sleep(0.1)
        self.socket = next((runtime / "memsift").glob("*.sock"))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.out.close()
        return code, self.proc.stderr.read().decode()


@pytest.mark.parametrize("kind", ["watch", "mcp-http"])
def test_abuse_never_stops_the_server_nor_stalls_a_terminal_search(tmp_path, runtime_dir, kind):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}
        )
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
        "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false",
        "XDG_RUNTIME_DIR": str(runtime_dir),
        "MEMSIFT_LOG_LEVEL": "info",
    }
    memory = snapshot(ws)
    server = Server(kind, ws, cfg, env, runtime_dir, tmp_path / "events.out")
    timings: list[float] = []

    def search(config: Path = cfg) -> subprocess.CompletedProcess:
        started = time.monotonic()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "memsift.engine.cli.main",
                "-c",
                str(config),
                "-w",
                str(ws),
                "search",
                "ledger database",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_BOUND_S * 4,
        )
        timings.append(time.monotonic() - started)
        assert timings[-1] < HANG_BOUND_S, (timings[-1], r.stderr[-2000:])
        return r

    def ok_search() -> None:
        r = search()
        assert r.returncode == 0 and json.loads(r.stdout)["results"], r.stderr[-2000:]
        assert server.alive()

    cases = 0
    try:
        ok_search()
        # Configs the client names that are not regular files, or far too large.
        fifo = tmp_path / "fifo.json5"
        os.mkfifo(fifo)
        huge = tmp_path / "huge.json5"
        with open(huge, "wb") as fh:
            fh.truncate(3 * 2**30)  # sparse: 3 GB of NULs, no disk used
        for bad in (fifo, Path("/dev/zero"), huge, tmp_path):
            r = search(bad)
            assert r.returncode == 3 and "config file" in r.stderr and "Traceback" not in r.stderr, (
                bad,
                r.stderr[-1500:],
            )
            ok_search()
            cases += 1
        # A flood of connections that never finish their request (more than the server has
        # descriptors), then oversize, garbage and incomplete requests.
        flood = []
        for _ in range(300):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect(str(server.socket))
                s.sendall(b'{"protocol": 2, "argv": ["search", ')
            except OSError:
                pass
            flood.append(s)
        ok_search()
        for s in flood:
            s.close()
        cases += 1
        for payload in (b"x" * (5 * 2**20), b"\xff\xfe garbage", b'{"protocol": 2, "argv": '):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(HANG_BOUND_S)
                s.connect(str(server.socket))
                try:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                    s.recv(1 << 16)
                except OSError:
                    pass  # the server stopped reading an oversized request: also fine
            ok_search()
            cases += 1
        # A stopped server: the terminal search answers by itself.
        server.proc.send_signal(signal.SIGSTOP)
        try:
            r = search()
            assert r.returncode == 0 and json.loads(r.stdout)["results"]
        finally:
            server.proc.send_signal(signal.SIGCONT)
        cases += 1
        ok_search()
    finally:
        alive = server.alive()
        code, stderr = server.stop()
    FIGURES["resident-socket abuse cases (fifo/device/huge/folder configs, half-open flood, oversize, garbage, "
            "incomplete, stopped server)"] += cases
    FIGURES["resident server exits during abuse"] += 0 if alive else 1
    FIGURES["CLI searches during resident abuse"] += len(timings)
    FIGURES["CLI searches during resident abuse over 3 s"] += sum(t > 3 for t in timings)
    FIGURES["slowest CLI search during resident abuse (s)"] = max(
        FIGURES.get("slowest CLI search during resident abuse (s)", 0), round(max(timings), 2)
    )
    # (uvicorn ends `mcp --http` by re-raising the SIGTERM it handled: memsift then exits 128 + 15,
    # after ending its children, as any command it terminates.)
    assert alive and code in (0, 128 + signal.SIGTERM) and "Traceback" not in stderr, stderr[-3000:]
    assert "answered a CLI search" in stderr  # the server did answer the ordinary searches
    assert_untouched(memory, ws)


def test_help_asked_of_a_search_never_reaches_the_servers_output(tmp_path, runtime_dir):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}
        )
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
        "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false",
        "XDG_RUNTIME_DIR": str(runtime_dir),
    }
    events = tmp_path / "events.jsonl"
    server = Server("watch", ws, cfg, env, runtime_dir, events)
    try:
        for args in (["search", "--help"], ["search", "x", "-h"], ["search", "--json", "--help", "x"]):
            r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), *args],
                               env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and "Usage:" in r.stdout
        # The same request sent straight to the socket is declined without printing anything.
        request = {"protocol": PROTOCOL, "argv": ["-c", str(cfg), "-w", str(ws), "search", "--help"], "cwd": str(ws),
                   "env": relevant_env(env)}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(server.socket))
            s.sendall(json.dumps(request).encode())
            s.shutdown(socket.SHUT_WR)
            s.settimeout(HANG_BOUND_S)
            reply = b""
            while chunk := s.recv(1 << 16):
                reply += chunk
            assert json.loads(reply.splitlines()[-1])["reason"] == "help was asked for"
        time.sleep(0.5)
    finally:
        code, _stderr = server.stop()
    lines = events.read_text().splitlines()
    assert lines and all(json.loads(line)["event"] for line in lines), lines[:5]  # JSON events only
    assert code == 0
