"""`memsift mcp` spoken to by the TypeScript MCP SDK, the client Claude Desktop, Cursor, VS Code and
most MCP hosts are built on, over stdio (the console script, as a host's config starts it) and
streamable HTTP. That client checks every tool's structured answer against the output schema the
tool declared and throws where one does not fit, so each kind of answer is asked for: hits, an empty
query, a refused argument, a denied chat, hits below minScore, a time question, a missing or
refused file, a page of a file, the status, and a QMD sidecar that fails over to builtin."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from helpers import free_port  # noqa: E402

SDK = os.environ.get("MEMSIFT_TEST_MCP_SDK_JS", "")
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    not (NODE and SDK and (Path(SDK) / "dist" / "esm" / "client" / "index.js").is_file()),
    reason="the TypeScript MCP SDK is not at $MEMSIFT_TEST_MCP_SDK_JS, or node is not on PATH "
    "(.ci/run installs @modelcontextprotocol/sdk@1.30.0 and sets it)")

CLIENT = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_client" / "calls.mjs"
GROUP_KEY = "agent:main:discord:group:42"  # a group chat: denied by the default scope
CALLS = [
    ("memory_search", {"query": "which database did we pick for the ledger?"}),
    ("memory_search", {"query": ""}),
    ("memory_search", {"query": "ledger", "maxResults": 0}),
    ("memory_search", {"query": "ledger", "sessionKey": GROUP_KEY}),
    ("memory_search", {"query": "tradesman invoice amount", "minScore": 0.99}),
    ("memory_search", {"query": "what did we decide last week?", "mode": "keyword"}),
    ("memory_search", {"query": "ledger", "since": "2026-11-01", "until": "2026-11-30", "maxResults": 2}),
    ("memory_get", {"path": "MEMORY.md#L21-L23"}),
    ("memory_get", {"path": "memory/2099-01-01.md"}),
    ("memory_get", {"path": "../outside.md"}),
    ("memory_status", {}),
    ("memory_status", {"deep": True}),
]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
            "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "MEMSIFT_NO_RESIDENT": "1", "MEMSIFT_NOW": "2026-11-20T12:00:00+00:00"}


def _memsift() -> list[str]:
    """The console script beside this Python (as a host's `command: memsift` runs it), else the module."""
    script = Path(sys.executable).parent / "memsift"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "memsift.engine.cli.main"]


def _session(env: dict[str, str], calls: list, *transport: str) -> tuple[dict, list[dict]]:
    proc = subprocess.run([NODE, str(CLIENT), SDK, json.dumps(calls), *transport], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return lines[0], lines[1:]


def _check(hello: dict, answers: list[dict]) -> dict[int, dict]:
    assert hello["server"]["name"] == "memsift"
    assert hello["tools"] == ["memory_search", "memory_get", "memory_status"]
    assert len(answers) == len(CALLS)
    thrown = [(CALLS[i], a["error"]) for i, a in enumerate(answers) if not a["ok"]]
    assert not thrown, thrown  # the client's schema check refused none of them
    body = {}
    for i, answer in enumerate(answers):
        if answer["isError"]:
            continue
        assert json.loads(answer["text"]) == answer["structured"], CALLS[i]  # the text is the structured answer
        body[i] = answer["structured"]
    assert [i for i, a in enumerate(answers) if a["isError"]] == [2]
    assert "maxResults" in answers[2]["text"]
    assert body[0]["results"][0]["path"] == "MEMORY.md" and "PostgreSQL 16" in body[0]["results"][0]["snippet"]
    assert body[1]["results"] == [] and body[1]["warning"]
    assert body[3]["denied"]["chatType"] == "group" and not body[3].get("results")
    assert body[4]["belowMinScore"] and all(h["belowMinScore"] for h in body[4]["results"])
    assert body[5]["timeWindows"] and body[5]["results"]
    assert all("2026-11-01" <= h["path"][7:17] <= "2026-11-30" for h in body[6]["results"])
    assert body[7]["text"].startswith("## Decisions") and body[7]["from"] == 21
    assert body[8]["missing"] is True
    assert body[9]["disabled"] is True and "not allowed" in body[9]["error"]
    assert body[10]["status"]["backend"] == "builtin" and body[11]["status"]
    return body


def test_stdio_through_the_console_script(tmp_path, example_workspace):
    hello, answers = _session(_env(tmp_path), CALLS, "stdio", *_memsift(), "-w", str(example_workspace), "mcp",
                              "--no-watch")
    _check(hello, answers)



def test_streamable_http(tmp_path, example_workspace):
    port = free_port()
    env = _env(tmp_path)
    proc = subprocess.Popen([*_memsift(), "-w", str(example_workspace), "mcp", "--http", "--port", str(port),
                             "--no-watch"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read().decode()[-2000:]
                time.sleep(0.2)
        hello, answers = _session(env, CALLS, "http", f"http://127.0.0.1:{port}/mcp")
        _check(hello, answers)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


def test_a_failing_qmd_sidecar_answers_from_builtin_in_the_declared_shape(tmp_path, example_workspace):
    config = tmp_path / "memsift.json5"
    config.write_text(json.dumps({"memory": {"backend": "qmd", "qmd": {"command": str(tmp_path / "no-such-qmd")}}}))
    calls = [("memory_search", {"query": "which database did we pick for the ledger?"}), ("memory_status", {})]
    hello, answers = _session(_env(tmp_path), calls, "stdio", *_memsift(), "-c", str(config), "-w",
                              str(example_workspace), "mcp", "--no-watch")
    assert all(a["ok"] and not a["isError"] for a in answers), answers
    found = answers[0]["structured"]
    assert found["fallback"]["from"] == "qmd" and found["results"][0]["path"] == "MEMORY.md"
    assert answers[1]["structured"]["status"]
