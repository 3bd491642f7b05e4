"""What `status` tells an operator when QMD fails: one story per setting, never "searches exit 7"
beside "searches fall back to the builtin index"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import EXAMPLE_WORKSPACE


@pytest.mark.parametrize("fallback", ["none", "builtin"])
def test_status_with_qmd_failing_tells_one_story(tmp_path, fallback):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {
                "stateDir": str(tmp_path / "state"),
                "memory": {"backend": "qmd", "qmd": {"command": str(tmp_path / "no-qmd"), "fallback": fallback}},
                "agents": {"defaults": {"workspace": str(ws), "memorySearch": {"provider": "none"}}},
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}
    env["MEMSIFT_NO_RESIDENT"] = "1"
    out = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "status"], env=env,
                         capture_output=True, text=True, timeout=120).stdout
    exits, falls = "searches exit 7" in out, "fall back to the builtin index" in out or "Fallback" in out
    assert (exits, falls) == ((True, False) if fallback == "none" else (False, True)), out
