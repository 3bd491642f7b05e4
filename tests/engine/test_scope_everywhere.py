"""Scope rules hold for every call that reads memory (search, get, status), on every backend,
in the Python API, over MCP and in the CLI: one policy above the backends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from helpers import QMD_SAMPLES, make_settings
from memsift.engine.compose.factory import open_manager

FAKEBIN = Path(__file__).parents[1] / "backends" / "qmd" / "fakebin"
GROUP = "agent:main:discord:group:42"
DIRECT = "agent:main:telegram:direct:7"
SECRET_LINE = "aurora"  # a word of the corpus's MEMORY.md


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", w)
    return w


@pytest.fixture
def fake_qmd(tmp_path, monkeypatch):
    env = {"PATH": f"{FAKEBIN}:{os.environ['PATH']}", "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
           "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"), "FAKE_QMD_PIDS": str(tmp_path / "pids")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def _config(tmp_path: Path, backend: str) -> dict:
    return {
        "stateDir": str(tmp_path / "state"),
        "agents": {"defaults": {"memorySearch": {"provider": "none"}}},
        "memory": {"backend": backend, "qmd": {"includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}],
                                               "update": {"onBoot": False}}},
    }


def _settings(tmp_path, ws, backend):
    cfg = _config(tmp_path, backend)
    return make_settings(tmp_path, ws, cfg["agents"]["defaults"]["memorySearch"], memory=cfg["memory"])


@pytest.mark.parametrize("backend", ["builtin", "qmd"])
def test_search_get_and_status_deny_alike_on_every_backend(tmp_path, ws, fake_qmd, backend):
    manager = open_manager(_settings(tmp_path, ws, backend))

    async def go():
        try:
            found = await manager.search("aurora telemetry", session_key=GROUP, min_score=0)
            assert found.results == [] and found.denied.chat_type == "group"
            got = await manager.read("MEMORY.md", session_key=GROUP)
            assert got.text == "" and got.denied is not None and got.denied.rule == "default deny"
            st = await manager.status(session_key=GROUP)
            assert st.denied is not None and st.files == 0 and st.workspace_dir == ""
            assert not (tmp_path / "qmd-calls.jsonl").exists()  # nothing ran for a denied chat
            # The same calls for a direct chat (and for a local caller without a key) are answered.
            assert SECRET_LINE in (await manager.read("MEMORY.md", session_key=DIRECT)).text.lower()
            assert SECRET_LINE in (await manager.read("MEMORY.md")).text.lower()
            assert (await manager.status(session_key=DIRECT)).denied is None
            assert (await manager.search("aurora telemetry", session_key=DIRECT, min_score=0)).denied is None
        finally:
            await manager.aclose()

    anyio.run(go)


mcp = pytest.importorskip("mcp")


@pytest.mark.parametrize("backend", ["builtin", "qmd"])
def test_mcp_tools_deny_per_call_and_server_keys(tmp_path, ws, fake_qmd, backend):
    from mcp import Client

    from memsift.engine.mcp.server import MemoryServer, build_server

    settings = _settings(tmp_path, ws, backend)

    async def go():
        # A gateway passing each chat's key per call.
        manager = open_manager(settings)
        try:
            async with Client(build_server(MemoryServer(manager, settings))) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert "sessionKey" in tools["memory_get"].input_schema["properties"]
                assert "sessionKey" in tools["memory_status"].input_schema["properties"]
                got = (
                    await client.call_tool("memory_get", {"path": "MEMORY.md", "sessionKey": GROUP})
                ).structured_content
                assert got["disabled"] and got["denied"]["chatType"] == "group" and got["text"] == ""
                st = (await client.call_tool("memory_status", {"sessionKey": GROUP})).structured_content
                assert "status" not in st and st["denied"]["rule"] == "default deny"
                ok = (
                    await client.call_tool("memory_get", {"path": "MEMORY.md", "sessionKey": DIRECT})
                ).structured_content
                assert SECRET_LINE in ok["text"].lower()
        finally:
            await manager.aclose()
        # A server fixed to a group chat: no call can read memory, whatever key it names.
        manager = open_manager(settings)
        try:
            async with Client(build_server(MemoryServer(manager, settings, session_key=GROUP))) as client:
                for tool, args in (("memory_search", {"query": "aurora"}), ("memory_get", {"path": "MEMORY.md"}),
                                   ("memory_get", {"path": "MEMORY.md", "sessionKey": DIRECT}), ("memory_status", {})):
                    body = (await client.call_tool(tool, args)).structured_content
                    assert body["denied"]["chatType"] == "group", (tool, body)
                    assert SECRET_LINE not in json.dumps(body).lower()
        finally:
            await manager.aclose()

    anyio.run(go)


@pytest.mark.parametrize("backend", ["builtin", "qmd"])
def test_mcp_checks_scope_before_anything_else_in_a_call(tmp_path, ws, fake_qmd, backend):
    """A denied chat gets the same denial whatever its arguments: an empty query is not answered
    "nothing to search", a malformed citation is not an error, before the scope rules are asked."""
    from mcp import Client

    from memsift.engine.mcp.server import MemoryServer, build_server

    settings = _settings(tmp_path, ws, backend)
    odd_paths = ("", "   ", "MEMORY.md#L" + "9" * 5000, "../../etc/passwd", "notes.txt")

    async def go():
        for server_key, per_call in ((None, {"sessionKey": GROUP}), (GROUP, {})):
            manager = open_manager(settings)
            try:
                async with Client(build_server(MemoryServer(manager, settings, session_key=server_key))) as client:
                    async def call(tool, args):
                        result = await client.call_tool(tool, {**args, **per_call})
                        assert not result.is_error, (tool, args, result.content)
                        return result.structured_content

                    denied = await call("memory_search", {"query": "aurora telemetry"})
                    assert denied["denied"]["rule"] == "default deny" and denied["disabled"]
                    for query in ("", "   ", "\n\t"):
                        assert await call("memory_search", {"query": query}) == denied, query
                    for path in odd_paths:
                        got = await call("memory_get", {"path": path})
                        assert got["denied"]["rule"] == "default deny" and got["text"] == "", (path, got)
                    assert (await call("memory_status", {"deep": True}))["denied"]["rule"] == "default deny"
            finally:
                await manager.aclose()
        assert not (tmp_path / "qmd-calls.jsonl").exists()  # nothing ran for the denied chat
        # A chat the rules allow still learns that its query was empty.
        manager = open_manager(settings)
        try:
            empty = await MemoryServer(manager, settings).search("  ", session_key=DIRECT)
            assert empty.denied is None and empty.results == [] and "empty" in empty.warning and empty.action
        finally:
            await manager.aclose()

    anyio.run(go)


@pytest.mark.parametrize("backend", ["builtin", "qmd"])
def test_cli_get_and_status_deny_like_search(tmp_path, ws, fake_qmd, backend):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(_config(tmp_path, backend)))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
        **fake_qmd,
        "MEMSIFT_NO_RESIDENT": "1",
    }
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws)]

    def cli(*args):
        return subprocess.run([*base, *args], capture_output=True, text=True, env=env, timeout=120)

    for args in (["search", "aurora"], ["get", "MEMORY.md"], ["status"]):
        human = cli(*args, "--session-key", GROUP)
        assert human.returncode == 0, human.stderr[-2000:]
        assert "Denied by scope (default deny)" in human.stdout and SECRET_LINE not in human.stdout.lower(), args
        data = json.loads(cli(*args, "--session-key", GROUP, "--json").stdout)
        assert data["denied"]["channel"] == "discord", (args, data)
    assert SECRET_LINE in cli("get", "MEMORY.md", "--session-key", DIRECT).stdout.lower()
    assert not (tmp_path / "qmd-calls.jsonl").exists()  # denied calls ran nothing (and a read needs no qmd)


def test_a_denied_cli_call_shows_nothing_of_an_empty_workspace(tmp_path):
    """On a folder with no memory files the CLI warns that searches find nothing, naming the folder;
    a denied chat must not even learn the path."""
    import json as _json
    import os as _os
    import subprocess as _sp
    import sys as _sys

    empty = tmp_path / "secret-project-folder"
    empty.mkdir()
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        _json.dumps(
            {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}
        )
    )
    env = {**{k: v for k, v in _os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1"}
    for command in (["search", "x"], ["status"], ["get", "MEMORY.md"], ["search", "x", "--json"]):
        r = _sp.run(
            [
                _sys.executable,
                "-m",
                "memsift.engine.cli.main",
                "-c",
                str(cfg),
                "-w",
                str(empty),
                *command,
                "--session-key",
                "agent:main:discord:group:42",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert r.returncode == 0 and "enied" in r.stdout, (command, r.stdout, r.stderr)
        assert "secret-project-folder" not in r.stdout + r.stderr, (command, r.stdout, r.stderr)
    allowed = _sp.run(
        [_sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(empty), "search", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "holds no memory files" in allowed.stderr  # the warning itself still reaches allowed callers
