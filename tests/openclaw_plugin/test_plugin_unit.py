"""The OpenClaw plugin's own tests (contrib/openclaw-plugin/test, Node's test runner), run against
this memsift: its registrations, tools, runtime and failures without OpenClaw. Skipped without
Node 20 or newer."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import REPO

PLUGIN = REPO / "contrib" / "openclaw-plugin"


def _node() -> str | None:
    node = shutil.which("node")
    if not node:
        return None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    return node if re.match(r"v(\d+)", version) and int(re.match(r"v(\d+)", version).group(1)) >= 20 else None


@pytest.mark.skipif(
    _node() is None, reason="Node 20 or newer is not on PATH (the plugin's tests run on Node's own runner)"
)
def test_the_plugins_own_tests_pass(tmp_path):
    env = {**os.environ, "MEMSIFT_COMMAND": json.dumps([sys.executable, "-m", "memsift.engine.cli.main"]),
           "TMPDIR": str(tmp_path)}
    run = subprocess.run(
        [_node(), "--test", "--test-reporter=tap", "test/plugin.test.mjs"],
        cwd=PLUGIN,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    summary = dict(re.findall(r"^# (tests|pass|fail) (\d+)$", run.stdout, re.M))
    assert run.returncode == 0 and summary.get("fail") == "0", run.stdout[-4000:] + run.stderr[-2000:]
    assert int(summary["pass"]) >= 14
