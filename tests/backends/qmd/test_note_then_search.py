"""On QMD, a note written just before a search is found through every door that keeps memsift
running: the resident helper, `memsift watch`, MCP over stdio, and a manager kept open through the
Python API, with QMD's default `update.debounceMs` (15 s). Before, a search updated QMD's index only
once 15 s had passed since its last update, so a note written and asked about at once was missed,
and nothing said so (no `syncPending`). Now the exact change check builtin's searches use tells the
QMD backend too; each backend behind QMD's fallback has its own view of it, so the builtin
fallback still sees every change the QMD side already looked at."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pytest

from helpers import backend_memory, stop_helpers, wait_for_socket
from memsift.engine.testing.doors import cli_env, run_cli


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- The boat is called Quinta.\n")
    memory = backend_memory("qmd")  # the default debounce (15 s): what a user runs
    assert "debounceMs" not in json.dumps(memory)
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": memory, "agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    return ws, cfg


def _paths(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["backend"] == "qmd" and not answer.get("fallback"), answer
    return [h["path"] for h in answer["results"]]


def _note(ws: Path, day: str, word: str) -> str:
    path = ws / "memory" / f"{day}.md"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"- Bought a kayak named {word}.\n")
    return f"memory/{day}.md"


def test_the_resident_helper_and_watch_find_a_note_written_just_before(tmp_path: Path) -> None:
    ws, cfg = _workspace(tmp_path)
    runtime = Path(tempfile.mkdtemp(prefix="msqn"))  # short: a socket's path has at most 107 bytes
    resident = {"resident": True, "XDG_RUNTIME_DIR": str(runtime)}
    try:
        run_cli(tmp_path, cfg, "search", "boat", **resident)  # starts the helper
        wait_for_socket(runtime)
        assert _paths(run_cli(tmp_path, cfg, "search", "boat", "--json", **resident)) == ["MEMORY.md"]
        for i, word in enumerate(("Zephyrine", "Oriane")):
            path = _note(ws, f"2026-11-0{i + 1}", word)
            assert _paths(run_cli(tmp_path, cfg, "search", word, "--json", **resident)) == [path], word
    finally:
        stop_helpers(runtime)
    no_helper = {"MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false"}
    watch = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "watch"],
                             env=cli_env(tmp_path, **resident, **no_helper),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_socket(runtime, watch)
        time.sleep(0.5)  # past its start sync: the note below is QMD's next change, inside the debounce
        path = _note(ws, "2026-11-03", "Bellamira")
        assert _paths(run_cli(tmp_path, cfg, "search", "Bellamira", "--json", **resident, **no_helper)) == [path]
    finally:
        watch.terminate()
        watch.wait(timeout=30)
        shutil.rmtree(runtime, ignore_errors=True)


def test_mcp_and_a_manager_kept_open_find_a_note_written_just_before(tmp_path: Path) -> None:
    mcp = pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK")
    ws, cfg = _workspace(tmp_path)

    async def over_stdio() -> list[list[str]]:
        params = mcp.StdioServerParameters(command=sys.executable,
                                           args=["-m", "memsift.engine.cli.main", "-c", str(cfg), "mcp"],
                                           env=cli_env(tmp_path))
        found = []
        async with mcp.Client(params) as client:
            for word in ("boat", "Zephyrine", "Oriane"):
                if word != "boat":
                    _note(ws, "2026-11-04", word)
                answer = (await client.call_tool("memory_search", {"query": word})).structured_content
                assert answer["backend"] == "qmd" and not answer.get("fallback"), answer
                found.append([h["path"] for h in answer["results"]])
        return found

    assert anyio.run(over_stdio) == [["MEMORY.md"], ["memory/2026-11-04.md"], ["memory/2026-11-04.md"]]

    from memsift.engine import open_manager, resolve_config

    async def kept_open() -> list[list[str]]:
        found = []
        async with open_manager(resolve_config(str(cfg), environ=cli_env(tmp_path))) as manager:
            for word in ("boat", "Quillon", "Marisol", "Tavira"):
                if word != "boat":
                    _note(ws, "2026-11-05", word)
                answer = await manager.search(word)
                assert answer.backend == "qmd" and not answer.fallback, answer
                found.append([h.path for h in answer.results])
        return found

    assert anyio.run(kept_open) == [["MEMORY.md"]] + [["memory/2026-11-05.md"]] * 3
