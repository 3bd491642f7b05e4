"""`async with open_manager(...) as manager:` answers inside the block and closes the backend on the
way out (also when the block raises); the Python API page's example runs as printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.compose.factory import open_manager

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def closes(monkeypatch):
    """How many times a builtin manager was closed."""
    calls: list[int] = []
    original = BuiltinSearchManager.aclose

    async def counted(self):
        calls.append(1)
        await original(self)

    monkeypatch.setattr(BuiltinSearchManager, "aclose", counted)
    return calls


def test_async_with_answers_and_closes(tmp_path, example_workspace, closes):
    settings = make_settings(tmp_path, example_workspace, {"provider": "none"})

    async def run():
        async with open_manager(settings) as manager:
            answer = await manager.search("sister allergic", min_score=0.0)
            assert not closes
        return answer

    answer = anyio.run(run)
    assert answer.results and any("MEMORY.md" in h.path for h in answer.results)
    assert closes == [1]


def test_async_with_closes_when_the_block_raises(tmp_path, example_workspace, closes):
    settings = make_settings(tmp_path, example_workspace, {"provider": "none"})

    async def run():
        async with open_manager(settings):
            raise KeyError("the caller's own error")

    with pytest.raises(KeyError, match="the caller's own error"):
        anyio.run(run)
    assert closes == [1]


def test_the_python_api_page_example_runs(tmp_path, example_workspace):
    page = (ROOT / "docs" / "gateways" / "python-api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    assert "async with open_manager(" in code
    code = code.replace('"contrib/example-workspace"', json.dumps(str(example_workspace)))
    config = tmp_path / "memsift.json5"
    config.write_text(json.dumps({"stateDir": str(tmp_path / "state"),
                                  "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}))
    env = {**os.environ, "MEMSIFT_CONFIG": str(config), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MEMORY.md#L" in done.stdout and "'backend': 'builtin'" in done.stdout, done.stdout[-2000:]
