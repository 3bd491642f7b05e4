"""A relative `memory.qmd.command` (`bin/qmd`, `./bin/qmd`) starts from the workspace, as in the
reference (which runs qmd with the workspace as its working folder), and is made absolute once when
the config is resolved: qmd itself runs from its own home, where a relative path finds nothing.
Real subprocesses: the CLI, and a launcher script in the workspace that runs the replaying fake."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import QMD_SAMPLES, make_settings

FAKEBIN = Path(__file__).with_name("fakebin")


@pytest.fixture
def setup(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    launcher = ws / "tools" / "qmd"
    launcher.parent.mkdir()
    launcher.write_text(f"#!/bin/sh\nexec {FAKEBIN / 'qmd'} \"$@\"\n")
    launcher.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"  # neither the workspace nor the config's folder
    elsewhere.mkdir()
    env = {  # no fake qmd on PATH: only the configured command can answer as qmd
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
        "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
        "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"),
        "MEMSIFT_NO_RESIDENT": "1",
    }
    return tmp_path, ws, elsewhere, env


def _run(tmp_path: Path, ws: Path, cwd: Path, env: dict, command: str, *args: str) -> subprocess.CompletedProcess:
    config = tmp_path / "conf" / "memsift.json5"
    config.parent.mkdir(exist_ok=True)
    config.write_text(
        json.dumps(
            {
                "memory": {
                    "backend": "qmd",
                    "qmd": {
                        "command": command,
                        "includeDefaultMemory": False,
                        "paths": [{"path": ".", "name": "notes"}],
                        "update": {"debounceMs": 60_000},
                    },
                },
                "agents": {"defaults": {"workspace": str(ws), "memorySearch": {"provider": "none"}}},
            }
        )
    )
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(config), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", ["tools/qmd", "./tools/qmd", "'./tools/qmd' --flag"])
@pytest.mark.parametrize("where", ["workspace", "elsewhere"])
def test_a_relative_command_runs_from_the_workspace(setup, command, where):
    tmp_path, ws, elsewhere, env = setup
    done = _run(
        tmp_path, ws, ws if where == "workspace" else elsewhere, env, command, "search", "aurora telemetry", "--json"
    )
    assert done.returncode == 0, done.stderr[-1500:]
    answer = json.loads(done.stdout)
    assert answer["backend"] == "qmd" and "fallback" not in answer, answer.get("fallback")
    assert answer["results"] and (tmp_path / "qmd-calls.jsonl").exists()  # the launcher in the workspace ran
    shown = json.loads(_run(tmp_path, ws, elsewhere, env, command, "config", "show").stdout)
    assert shlex.split(shown["memory"]["qmd"]["command"])[0] == str(ws / "tools" / "qmd")  # absolute, once


def test_a_missing_relative_command_says_where_it_looked(setup):
    tmp_path, ws, elsewhere, env = setup
    done = _run(tmp_path, ws, elsewhere, env, "bin/no-such-qmd", "search", "aurora telemetry", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-1500:]
    reason = json.loads(done.stdout)["fallback"]["reason"]
    # The path it looked at (the workspace's), the key to fix and where to read more.
    assert (
        reason
        == f"qmd is not installed at {ws / 'bin' / 'no-such-qmd'} (memory.qmd.command; see The QMD backend in "
           f"memsift's docs)"
    )
    (ws / "tools" / "qmd").chmod(0o644)  # there, but not executable
    done = _run(tmp_path, ws, elsewhere, env, "tools/qmd", "search", "aurora telemetry", "--json")
    reason = json.loads(done.stdout)["fallback"]["reason"]
    assert str(ws / "tools" / "qmd") in reason and "not executable" in reason, reason


def test_only_a_relative_path_is_rewritten(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()

    def command(raw: str) -> str:
        return make_settings(tmp_path, ws, memory={"qmd": {"command": raw}}).memory.qmd.command

    assert command("qmd") == "qmd"  # found on PATH, as before
    assert command("/opt/tools/qmd --index x") == "/opt/tools/qmd --index x"
    assert command("/usr/local/bin/qmd") == "/usr/local/bin/qmd"  # rewritten to plain `qmd` when run (reference)
    assert command("../tools/qmd") == str(tmp_path / "tools" / "qmd")
    assert command("'my tools/qmd' --flag") == f"'{ws}/my tools/qmd' --flag"
    assert command("~/bin/qmd") == str(Path.home() / "bin" / "qmd")
    assert command("'unbalanced") == "'unbalanced"  # left for the backend's own clear message
