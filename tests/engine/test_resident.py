"""Resident searches: `memsift search` answered by a running `memsift watch`, or by itself."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from figures import FIGURES
from helpers import EXAMPLE_WORKSPACE, HttpMcp, make_settings
from memsift.engine.mcp.stopping import STOP_GRACE_S
from memsift.engine.cli.resident import PROTOCOL, relevant_env, rendezvous_dir, state_tag


@pytest.fixture
def runtime_dir():
    d = tempfile.mkdtemp(prefix="msr")  # short: a socket path must fit 107 bytes
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def _env(tmp_path: Path, runtime: Path, **extra: str) -> dict[str, str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false",
    }
    env.update(
        MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), XDG_RUNTIME_DIR=str(runtime)
    )
    env.update(extra)
    return env


def _search(ws: Path, env: dict[str, str], query: str, *args: str, agent: str | None = None) -> dict:
    group = ["-a", agent] if agent else []
    r = subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", *group, "-w", str(ws), "search", query, "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class Watch:
    """`memsift watch --json` in the background, its events read line by line."""

    def __init__(self, ws: Path, env: dict[str, str]) -> None:
        # The fault handler on: a watch ended by its grace prints what held it.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "watch", "--json"],
            env={**env, "PYTHONFAULTHANDLER": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: queue.Queue[dict] = queue.Queue()
        threading.Thread(
            target=lambda: [self.events.put(json.loads(line)) for line in self.proc.stdout], daemon=True
        ).start()

    def wait_for(self, kind: str, timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event["event"] == kind:
                return event
        self.proc.kill()
        raise AssertionError(f"no {kind!r} event; stderr: {self.proc.stderr.read()[-2000:]}")

    def answered(self) -> int:
        n = 0
        while not self.events.empty():
            n += self.events.get()["event"] == "answered"
        return n

    def stop(self) -> None:
        """Ctrl-C: the watch ends its work and exits 0; or, when a worker thread holds it past the
        grace (seen once on a busy CI machine), it is gone at the grace and says so, the stacks of
        what held it given here as a warning."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=STOP_GRACE_S + 20)
        if code != 0:
            err = self.proc.stderr.read()
            assert code == 130 and "did not end within" in err, err[-3000:]
            FIGURES["watch: stops ended by the grace (stacks in the warnings)"] += 1
            warnings.warn(f"memsift watch was ended by its stop grace; what held it:\n{err[-6000:]}", stacklevel=2)


def _results(answer: dict) -> list:
    return [(h["path"], h["startLine"], h["endLine"], h["score"]) for h in answer["results"]]


def test_a_running_watch_answers_searches_with_the_answer_the_cli_would_give(tmp_path, runtime_dir):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    env = _env(tmp_path, runtime_dir)
    watch = Watch(ws, env)
    try:
        assert watch.wait_for("resident")["socket"]
        sockets = list((runtime_dir / "memsift").glob("*.sock"))
        assert len(sockets) == 1 and (sockets[0].stat().st_mode & 0o777) == 0o600
        assert oct((runtime_dir / "memsift").stat().st_mode & 0o777) == "0o700"
        for query in ("which database did we pick for the ledger?", "a828e60", "会议"):
            resident = _search(ws, env, query)
            assert watch.wait_for("answered")["command"] == "search"
            cold = _search(ws, {**env, "MEMSIFT_NO_RESIDENT": "1"}, query)
            assert _results(resident) == _results(cold) and resident["results"], query
        assert watch.answered() == 0  # the cold searches were not answered by the watch

        # A note written a moment ago is found: the watcher marks the index behind at once,
        # so the resident search syncs first instead of waiting for the debounce.
        (ws / "memory" / "2026-11-21.md").write_text("- 10:00 The zeppelin hangar lease was signed.\n")
        time.sleep(0.3)
        fresh = _search(ws, env, "zeppelin hangar lease")
        watch.wait_for("answered")
        assert fresh["results"] and fresh["results"][0]["path"] == "memory/2026-11-21.md"

        # Garbage, a huge request, a non-search, a query with an undecodable byte: declined or
        # answered, and the server goes on serving.
        # The oversized one is sent several times: the server reads it to the end after declining
        # (a lingering close), so the client gets the decline and a clean end, never a reset.
        for payload in (b"\xff\xfe not json", b"[1, 2]", *[b"x" * (5 * 2**20)] * 8,
                        json.dumps({"protocol": PROTOCOL, "argv": ["status"], "cwd": str(ws), "env": {}}).encode()):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(str(sockets[0]))
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                reply = b""
                while chunk := s.recv(1 << 16):
                    reply += chunk
            assert json.loads(reply.splitlines()[-1])["status"] == "decline"  # after "working", if any
        odd = subprocess.run(
            [
                sys.executable,
                "-m",
                "memsift.engine.cli.main",
                "-w",
                str(ws),
                "search",
                os.fsdecode(b"ledger \xff"),
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert odd.returncode == 0 and json.loads(odd.stdout)["results"]
        assert _search(ws, env, "ledger database")["results"]
    finally:
        watch.stop()
    assert not list((runtime_dir / "memsift").glob("*.sock"))  # removed on the way out


_HELD_ON_CLOSE = """
import sys, time
from memsift.backends.builtin import manager
async def held(self):  # a close stuck in a long call on the event loop's thread
    time.sleep(120)
manager.BuiltinSearchManager.aclose = held
from memsift.engine.cli.main import main
sys.argv[0] = "memsift"
main()
"""


def test_a_watch_held_after_ctrl_c_is_gone_at_its_grace_and_says_so(tmp_path, runtime_dir):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    proc = subprocess.Popen([sys.executable, "-c", _HELD_ON_CLOSE, "-w", str(ws), "watch", "--json"],
                            env=_env(tmp_path, runtime_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if json.loads(line)["event"] == "resident":
                break
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=STOP_GRACE_S + 20)  # not the 120 s its close would take
        err = proc.stderr.read()
        assert code == 130, err
        assert (
            err.strip().splitlines()[-1]
            == f"memsift: stopped by signal 2 (its work did not end within {STOP_GRACE_S:g} s)"
        )
        assert "Traceback" not in err  # no fault handler asked for: the one line
    finally:
        proc.kill()
        proc.wait()
    assert _search(ws, _env(tmp_path, runtime_dir), "ledger database")["results"]  # the index is whole


def test_other_settings_and_other_workspaces_are_declined(tmp_path, runtime_dir):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    other = tmp_path / "other"
    (other / "memory").mkdir(parents=True)
    (other / "MEMORY.md").write_text("# Memory\n\n- The other workspace keeps notes about puffins.\n")
    env = _env(tmp_path, runtime_dir)
    watch = Watch(ws, env)
    try:
        watch.wait_for("resident")
        # Another setting in the environment: the cold CLI honours it (one result), so the
        # watch (configured for six) must not have answered.
        one = _search(
            ws,
            {**env, "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__QUERY__MAXRESULTS": "1"},
            "ledger database",
            "--min-score",
            "0",
        )
        assert len(one["results"]) == 1 and one["maxResults"] == 1
        # Another agent's workspace (same state folder, so the watch is asked): its own notes.
        puffins = _search(other, env, "puffins", agent="other")
        assert [h["path"] for h in puffins["results"]] == ["MEMORY.md"]
        assert "puffins" in puffins["results"][0]["snippet"]
        # Logs asked for: the search runs here, where its logs go to this stderr.
        r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-v", "-w", str(ws), "search", "ledger"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "sync done" in r.stderr
        time.sleep(0.5)
        assert watch.answered() == 0
    finally:
        watch.stop()


def test_a_watch_in_another_time_zone_leaves_yesterday_to_the_cli(tmp_path, runtime_dir):
    """"Yesterday" is a day of the asker's time zone: a watch started in UTC must not answer a search
    asked eight hours west of it, where the same moment is still the day before (POSIX zone strings:
    no zone files needed)."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Prefers tea.\n")
    (ws / "memory" / "2026-12-04.md").write_text("- 10:00 Drafted the quarterly report.\n")
    (ws / "memory" / "2026-12-05.md").write_text("- 09:00 Met Anna about the ledger migration.\n")
    env = _env(tmp_path, runtime_dir, TZ="UTC0", MEMSIFT_NOW="2026-12-06T00:50:00+00:00")
    watch = Watch(ws, env)
    try:
        watch.wait_for("resident")
        here = _search(ws, env, "what did I do yesterday?")
        assert watch.wait_for("answered")["command"] == "search"
        assert here["results"][0]["path"] == "memory/2026-12-05.md"
        west = _search(ws, {**env, "TZ": "PST8"}, "what did I do yesterday?")  # 2026-12-05 16:50 there
        assert west["results"][0]["path"] == "memory/2026-12-04.md"
        time.sleep(0.5)
        assert watch.answered() == 0
    finally:
        watch.stop()
    # MCP served from the west: its own zone's yesterday.
    mcp = HttpMcp([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws)], {**env, "TZ": "PST8"})
    try:
        reply = mcp.call("tools/call", {"name": "memory_search", "arguments": {"query": "what did I do yesterday?"}})
        assert reply["result"]["structuredContent"]["results"][0]["path"] == "memory/2026-12-04.md", reply
    finally:
        mcp.close()


def test_a_stale_socket_left_by_a_killed_server_is_ignored_and_removed(tmp_path, runtime_dir, example_workspace):
    env = _env(tmp_path, runtime_dir)
    folder = rendezvous_dir(env, create=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = folder / f"{state_tag(env)}-{dead.pid}.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))  # bound, never listening: connecting is refused, as after a SIGKILL
    s.close()
    answer = _search(example_workspace, env, "ledger database")
    assert answer["results"]
    assert not stale.exists()


def test_the_rendezvous_folder_must_be_private_and_ours(tmp_path):
    runtime = tmp_path / "rt"
    runtime.mkdir()
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    folder = rendezvous_dir(env, create=True)
    assert folder == runtime / "memsift" and (folder.stat().st_mode & 0o777) == 0o700
    os.chmod(folder, 0o777)  # others could plant a socket here: never used
    assert rendezvous_dir(env) is None
    os.chmod(folder, 0o700)
    shutil.rmtree(folder)
    (runtime / "elsewhere").mkdir()
    os.symlink(runtime / "elsewhere", folder)  # a symlink is not a private folder either
    assert rendezvous_dir(env) is None


def test_secrets_travel_as_hashes_and_the_state_directory_picks_the_servers():
    env = {"OPENAI_API_KEY": "sk-live-123456789", "MEMSIFT_STATE_DIR": "/tmp/a", "PATH": "/bin", "HOME": "/root"}
    sent = relevant_env(env)
    assert "sk-live" not in json.dumps(sent) and sent["OPENAI_API_KEY"].startswith("sha256:")
    assert "PATH" not in sent and sent["MEMSIFT_STATE_DIR"] == "/tmp/a"
    assert state_tag(env) != state_tag({**env, "MEMSIFT_STATE_DIR": "/tmp/b"})


def test_the_server_declines_what_it_cannot_answer_exactly(tmp_path):
    from memsift.backends.builtin import BuiltinSearchManager
    from memsift.engine.cli.resident_server import ResidentServer
    from memsift.engine.embeddings.fake import FakeEmbeddingProvider

    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    settings = make_settings(tmp_path, ws)
    server = ResidentServer(BuiltinSearchManager(settings, provider=FakeEmbeddingProvider()), settings, backend=None)
    base = {"protocol": PROTOCOL, "cwd": str(ws), "env": server.env}

    async def ask(**request):
        return await server.answer({**base, **request})

    for request, reason in [
        ({"protocol": 99, "argv": ["search", "x"]}, "protocol"),
        ({"argv": ["status"]}, "not a search"),
        ({"argv": ["search"]}, "arguments"),  # no query: click's own error, printed by the cold CLI
        ({"argv": ["search", "x", "-n", "0"]}, "arguments"),
        ({"argv": ["-v", "search", "x"]}, "logs"),
        ({"argv": ["search", "x", "--help"]}, "help"),  # click would print it into the server's output
        ({"argv": ["search", "x"], "env": {**server.env, "OPENAI_API_KEY": "sha256:00"}}, "environment"),
        # another install of memsift (the release before, left running across an upgrade, or the next)
        ({"argv": ["search", "x"], "env": {**server.env, "memsift install": "1:2"}}, "environment"),
        (
            {"argv": ["search", "x"], "env": {k: v for k, v in server.env.items() if k != "memsift install"}},
            "environment",
        ),
        ({"argv": ["-w", str(tmp_path), "search", "x"]}, "other settings"),
        ({"argv": ["search", "x", "-b", "qmd"]}, "other settings"),
    ]:
        reply = anyio.run(lambda: ask(**request))
        assert reply["status"] == "decline" and reason in reply["reason"], (request, reply)
    assert server.answered == 0


@contextmanager
def _watching(tmp_path: Path, runtime_dir: Path) -> Iterator[tuple[Path, dict[str, str], Watch]]:
    """A copy of the example workspace with `memsift watch` answering searches on it."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    env = _env(tmp_path, runtime_dir)
    watch = Watch(ws, env)
    try:
        watch.wait_for("resident")
        yield ws, env, watch
    finally:
        watch.stop()


def _note(ws: Path, env: dict[str, str], text: str) -> None:
    r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "note", text],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_a_note_written_just_before_a_resident_search_is_always_found(tmp_path, runtime_dir):
    # Reproduces issue 17: with `memsift watch` running, `memsift note` then `memsift search` missed
    # the note whenever a search had synced inside the watcher's debounce window (the watcher
    # announced only the first change of a batch), or searched before the change was announced.
    with _watching(tmp_path, runtime_dir) as (ws, env, watch):
        misses = []
        for i in range(8):
            word = f"heron{i}"
            _note(ws, env, f"Order {word} supplies")
            if i % 2:
                time.sleep(0.3)  # inside the debounce window that follows the previous search's sync
            answer = _search(ws, env, word)
            watch.wait_for("answered")
            found = any(word in h["snippet"] for h in answer["results"])
            if not found and not answer.get("syncPending"):
                misses.append(word)
        # Fifteen notes back to back, then a search for each.
        words = [f"egret{i}" for i in range(15)]
        for word in words:
            _note(ws, env, f"Order {word} supplies")
        for word in words:
            answer = _search(ws, env, word)
            if not any(word in h["snippet"] for h in answer["results"]) and not answer.get("syncPending"):
                misses.append(word)
        assert misses == []


def test_a_note_in_a_swapped_workspace_is_found_by_the_watchs_next_search(tmp_path, runtime_dir):
    """After `mv ws.new ws` (a restore, a fresh clone) a note written there at once is found by the
    search `memsift watch` answers: its change check and its watches follow the path, not the old folder."""
    with _watching(tmp_path, runtime_dir) as (ws, env, watch):
        fresh = tmp_path / "ws.new"
        shutil.copytree(EXAMPLE_WORKSPACE, fresh)
        ws.rename(tmp_path / "ws.old")
        fresh.rename(ws)
        for i in range(3):
            word = f"ibis{i}"
            _note(ws, env, f"Order {word} supplies")
            answer = _search(ws, env, word)
            watch.wait_for("answered")
            assert any(word in h["snippet"] for h in answer["results"]) or answer.get("syncPending"), word


def test_the_client_imports_nothing_heavy_and_reads_framed_answers(tmp_path, runtime_dir):
    """A second CLI search is mostly interpreter start-up: the client must not pull in json,
    pathlib, socket, hashlib or typing. It reads a framed answer (multi-byte text and a lone
    surrogate intact) from a server, and a decline or a cut-short answer makes it search itself."""
    probe = (
        "import sys, os; before = set(sys.modules)\n"
        "from memsift.engine.cli import resident\n"
        "resident.try_resident(['search', 'x'])\n"
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
        "('json', 'pathlib', 'socket', 'hashlib', 'typing', 'memsift') and not m.startswith('memsift.engine.cli') "
        "and m not in ('memsift', 'memsift.engine', 'memsift.engine.private_dirs')))\n"
    )
    env = _env(tmp_path, runtime_dir)
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"

    from memsift.engine.cli import resident
    from memsift.engine.cli.resident_server import frame_reply

    folder = rendezvous_dir(env, create=True)
    sock_path = folder / f"{state_tag(env)}-{os.getpid()}.sock"
    text = "Ergebnis: Zürich 東京 \udcff\n"
    replies = [frame_reply({"status": "ok", "stdout": text, "stderr": "memsift: warning: w\n", "exit": 0}),
               frame_reply({"status": "decline", "reason": "other settings"}),
               frame_reply({"status": "ok", "stdout": text, "stderr": "", "exit": 0})[:-3]]  # cut short
    seen: list[dict] = []

    def serve(listener: socket.socket) -> None:
        for reply in replies:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while chunk := conn.recv(1 << 16):
                    data += chunk
                seen.append(json.loads(data))
                conn.sendall(b'{"status": "working"}\n' + reply)

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(sock_path))
        listener.listen(4)
        threading.Thread(target=serve, args=(listener,), daemon=True).start()
        import contextlib
        import io

        outs = []
        for _ in replies:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = resident.try_resident(["search", "ledger \udcff", "--json"], env)
            outs.append((code, out.getvalue(), err.getvalue()))
    sock_path.unlink()
    assert outs[0] == (0, text, "memsift: warning: w\n")
    assert outs[1] == (None, "", "") and outs[2] == (None, "", "")
    assert seen[0] == {
        "protocol": PROTOCOL,
        "argv": ["search", "ledger \udcff", "--json"],
        "cwd": os.getcwd(),
        "env": relevant_env(env),
    }


def test_a_relative_config_path_is_the_same_config_on_both_sides(tmp_path, runtime_dir):
    """`-c cfg.json5` (relative) used to make every resident request decline ("other settings"):
    the server kept the path as written, the client resolved it from its folder."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    (tmp_path / "cfg.json5").write_text('{agents: {defaults: {memorySearch: {provider: "none"}}}}')
    env = _env(tmp_path, runtime_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsift.engine.cli.main", "-c", "cfg.json5", "-w", "ws", "watch", "--json"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        events: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=lambda: [events.put(json.loads(line)) for line in proc.stdout], daemon=True).start()
        deadline = time.monotonic() + 90
        while (event := events.get(timeout=max(0.01, deadline - time.monotonic())))["event"] != "resident":
            pass
        assert event["socket"]
        for folder, cfg in (
            (tmp_path, "cfg.json5"),
            (ws, "../cfg.json5"),
            (ws / "memory", str(tmp_path / "cfg.json5")),
        ):
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "memsift.engine.cli.main",
                    "-c",
                    cfg,
                    "-w",
                    str(ws),
                    "search",
                    "ledger",
                    "--json",
                ],
                env=env,
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert r.returncode == 0 and json.loads(r.stdout)["results"], r.stderr
            deadline = time.monotonic() + 30
            while (event := events.get(timeout=max(0.01, deadline - time.monotonic())))["event"] != "answered":
                pass
            assert event["command"] == "search", (folder, cfg)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
