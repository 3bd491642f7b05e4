"""No orphans, also with a `memory.qmd.command` that is a wrapper script starting a long child: the
child dies with qmd's process group when memsift is terminated (SIGTERM, SIGINT), when a search's
budget runs out, and when a resident helper is stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers import EXAMPLE_WORKSPACE, process_alive, stop_helpers
from memsift.engine.cli.helper import helper_pids


@pytest.fixture
def setup(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    marker = tmp_path / "children"
    wrapper = tmp_path / "qmd-wrapper.sh"
    # A wrapper that starts a long child and waits: the child is what used to be left behind (PPID 1).
    # Each line: the child, and the memsift process that ran the wrapper (setpriv execs it).
    wrapper.write_text(f"#!/bin/sh\nsleep 600 &\necho $! $PPID >> {marker}\nwait\n")
    wrapper.chmod(0o755)
    runtime = Path(tempfile.mkdtemp(prefix="mso"))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {
                "stateDir": str(tmp_path / "state"),
                "memory": {"backend": "qmd", "qmd": {"command": str(wrapper), "limits": {"timeoutMs": 60_000}}},
                "agents": {"defaults": {"memorySearch": {"provider": "none"}}},
            }
        )
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
           "XDG_RUNTIME_DIR": str(runtime)}
    yield ws, cfg, env, marker, runtime
    stop_helpers(runtime)
    for pid in _children(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(runtime, ignore_errors=True)


def _children(marker: Path, of: int | None = None) -> list[int]:
    """The wrappers' children (those a process `of` ran the wrapper for, when given)."""
    rows = [line.split() for line in marker.read_text().splitlines() if line.strip()] if marker.exists() else []
    return [int(row[0]) for row in rows if of is None or (len(row) > 1 and int(row[1]) == of)]


def _wait_for_child(marker: Path, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while not _children(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children(marker), "the wrapper never started its child"
    return _children(marker)


def _gone(pids: list[int], timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(process_alive(p) for p in pids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_terminated_cli_leaves_no_wrapper_child(setup, sig):
    ws, cfg, env, marker, _runtime = setup
    # Ctrl-C's default action restored: a suite started in the background (`pytest &`) has SIGINT
    # ignored, and a child inherits that, as a shell's background jobs do.
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "search", "ledger"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    children = _wait_for_child(marker)
    proc.send_signal(sig)
    assert proc.wait(timeout=30) != 0
    assert _gone(children), [p for p in children if process_alive(p)]


def test_a_search_over_its_budget_leaves_no_wrapper_child(setup, tmp_path):
    ws, cfg, env, marker, _runtime = setup
    data = json.loads(cfg.read_text())
    data["memory"]["qmd"]["limits"]["timeoutMs"] = 1500
    cfg.write_text(json.dumps(data))
    done = subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "search", "ledger", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["fallback"]["from"] == "qmd"
    assert _gone(_wait_for_child(marker))


def test_a_stopped_helper_leaves_no_wrapper_child(setup):
    ws, cfg, env, marker, runtime = setup
    data = json.loads(cfg.read_text())
    # The cold search waits out the hanging wrapper before its fallback answers; the helper is then
    # stopped seconds into its own wait, well inside these 20 s.
    data["memory"]["qmd"]["limits"]["timeoutMs"] = 20_000
    cfg.write_text(json.dumps(data))
    env = {**env, "MEMSIFT_NO_RESIDENT": ""}
    env.pop("MEMSIFT_NO_RESIDENT")
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws)]
    subprocess.run([*base, "search", "ledger"], env=env, capture_output=True, timeout=180)
    # The cold search ran the wrapper itself and started the helper, whose boot update runs it again:
    # a child the helper's own wrapper started means the helper runs (under load it may have done so
    # before the cold search's process ended, so counting children after it would miss it).
    deadline = time.monotonic() + 60
    helper: list[int] = []
    while time.monotonic() < deadline:
        helper = helper_pids(runtime / "memsift") if (runtime / "memsift").is_dir() else []
        if helper and _children(marker, of=helper[0]):
            break
        time.sleep(0.1)
    assert helper and _children(marker, of=helper[0]), ("the helper's boot update never ran the wrapper",
                                                        helper, marker.read_text() if marker.exists() else "")
    children = _children(marker)
    stopped = subprocess.run([*base, "helpers", "stop"], env=env, capture_output=True, text=True, timeout=60)
    assert "stopped the helper" in stopped.stdout, stopped.stdout + stopped.stderr
    assert _gone(children + _children(marker)), [p for p in _children(marker) if process_alive(p)]


def test_a_cancellation_while_qmd_starts_leaves_no_wrapper_child(tmp_path, monkeypatch):
    """The window a Ctrl-C under load used to hit: the process exists (its wrapper has started its
    child) but starting it has not returned yet. Widened here so that the cancellation surely lands
    in it; the processes are real."""
    import anyio

    from memsift.backends.qmd import process

    marker = tmp_path / "children"
    wrapper = tmp_path / "qmd-wrapper.sh"
    wrapper.write_text(f"#!/bin/sh\nsleep 600 &\necho $! >> {marker}\nwait\n")
    wrapper.chmod(0o755)
    real_open = anyio.open_process

    async def slow_open(*args, **kwargs):
        proc = await real_open(*args, **kwargs)
        while not _children(marker):  # the wrapper's child exists before the start returns
            await anyio.sleep(0.01)
        await anyio.sleep(5)
        return proc

    monkeypatch.setattr(anyio, "open_process", slow_open)

    async def main():
        async with anyio.create_task_group() as tg:
            async def cancel_when_started():
                while not _children(marker):
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()

            tg.start_soon(cancel_when_started)
            await process.run_qmd(
                [str(wrapper)], env=dict(os.environ), cwd=str(tmp_path), timeout_s=60, doing="testing"
            )
        return "cancelled"

    assert anyio.run(main) == "cancelled"
    children = _children(marker)
    try:
        assert _gone(children), [p for p in children if process_alive(p)]
        assert not process._LIVE_GROUPS
    finally:
        for pid in children:
            with __import__("contextlib").suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
