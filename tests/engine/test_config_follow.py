"""A long-running memsift follows its config: `memsift mcp` over stdio and HTTP (what the OpenClaw
plugin runs as its child, reading the Gateway's file) and `memsift watch` serve the settings the
config gives after an edit, within seconds, without a restart; an edit that breaks the config is
said, and the settings they had go on serving. Before, they served the settings they started with
until restarted: an extra path added with `openclaw config set` was never searched by the Gateway."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from helpers import HttpMcp, Watch
from memsift.engine.testing.doors import cli_env, run_cli

FOLLOW_WITHIN_S = 60.0  # the follower looks every 2 s; a loaded machine answers later


def _workspace(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """(memsift's config, the OpenClaw file, the command before a subcommand)."""
    ws, extra = tmp_path / "ws", tmp_path / "extra"
    (ws / "memory").mkdir(parents=True)
    extra.mkdir()
    (ws / "memory" / "2026-11-05.md").write_text("- The walrus budget was approved.\n")
    (extra / "pager.md").write_text("- The zqpager runbook: page the on-call twice.\n")
    cfg, gateway = tmp_path / "memsift.json5", tmp_path / "openclaw.json"
    cfg.write_text("{}\n")
    _gateway_config(gateway, ws)
    return cfg, gateway, [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg),
                          "--openclaw-config", str(gateway)]


def _gateway_config(path: Path, ws: Path, extra: list[str] | None = None) -> None:
    search: dict[str, Any] = {"extraPaths": extra} if extra else {}
    path.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws), "memorySearch": search}}}))


def _paths(answer: dict) -> list[str]:
    return [h["path"] for h in answer.get("results") or []]


def _until(what: Callable[[], Any], ok: Callable[[Any], bool]) -> Any:
    deadline = time.monotonic() + FOLLOW_WITHIN_S
    while True:
        got = what()
        if ok(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_mcp_over_http_follows_the_gateway_config(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK")
    cfg, gateway, command = _workspace(tmp_path)
    http = HttpMcp(command, cli_env(tmp_path))
    try:
        def search() -> list[str]:
            return _paths(http.call("tools/call", {"name": "memory_search", "arguments": {
                "query": "zqpager", "mode": "keyword"}})["result"]["structuredContent"])

        assert search() == []  # the extra folder is no memory yet
        _gateway_config(gateway, tmp_path / "ws", [str(tmp_path / "extra")])  # `openclaw config set …`
        assert _until(search, lambda got: got == ["../extra/pager.md"]) == ["../extra/pager.md"]
        gateway.write_text('{"agents": {"defaults": ')  # saved half-way: the settings it had serve on
        time.sleep(5)
        assert search() == ["../extra/pager.md"]
        _gateway_config(gateway, tmp_path / "ws")
        assert _until(search, lambda got: got == []) == []
    finally:
        http.close()


def test_mcp_over_stdio_follows_the_config(tmp_path: Path) -> None:
    mcp = pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK")
    import anyio

    cfg, gateway, command = _workspace(tmp_path)

    async def session() -> list[list[str]]:
        params = mcp.StdioServerParameters(command=command[0], args=[*command[1:], "mcp"], env=cli_env(tmp_path))
        async with mcp.Client(params) as client:
            async def search() -> list[str]:
                return _paths((await client.call_tool("memory_search", {"query": "zqpager", "mode": "keyword"}))
                              .structured_content)

            seen = [await search()]
            cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {
                "extraPaths": [str(tmp_path / "extra")]}}}}))  # memsift's own file this time
            deadline = time.monotonic() + FOLLOW_WITHIN_S
            while (got := await search()) != ["../extra/pager.md"] and time.monotonic() < deadline:
                await anyio.sleep(0.5)
            seen.append(got)
            return seen

    assert anyio.run(session) == [[], ["../extra/pager.md"]]


def test_watch_follows_the_config_and_says_when_an_edit_breaks_it(tmp_path: Path) -> None:
    cfg, gateway, command = _workspace(tmp_path)
    watch = Watch(command, cli_env(tmp_path, resident=True), FOLLOW_WITHIN_S)
    try:
        watch.wait_for(lambda e: e["event"] == "ready")
        _gateway_config(gateway, tmp_path / "ws", [str(tmp_path / "extra")])
        assert watch.wait_for(lambda e: e["event"] == "config")["workspace"] == str(tmp_path / "ws")
        synced = watch.wait_for(lambda e: e["event"] == "synced")
        assert synced["report"]["filesIndexed"] >= 1, synced  # the extra folder's note, indexed by the watch
        watch.wait_for(lambda e: e["event"] == "ready")
        # The CLI's search is answered from the watch, with the new settings.
        done = run_cli(tmp_path, cfg, "--openclaw-config", str(gateway), "search", "zqpager", "--mode", "keyword",
                       "--json", resident=True)
        assert _paths(json.loads(done.stdout)) == ["../extra/pager.md"], done.stderr[-2000:]
        (tmp_path / "extra" / "pager.md").write_text("- The zqpager runbook: page the on-call three times.\n")
        watch.wait_for(lambda e: e["event"] == "synced" and e["report"]["filesIndexed"] == 1)  # the new folder, watched
        gateway.write_text('{"agents": ')
        broken = watch.wait_for(lambda e: e["event"] == "config" and "error" in e)
        assert "cannot be read" in broken["error"] and "still serve" in broken["error"], broken
    finally:
        assert watch.stop() == 0
        run_cli(tmp_path, cfg, "helpers", "stop", "--all")
