"""The resident helper: a cold `memsift search` starts one; later searches are answered by it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers import process_alive, stop_helpers
from memsift.engine.cli.helper import helper_pids
from memsift.engine.cli.resident import try_resident


@pytest.fixture
def runtime_dir():
    d = tempfile.mkdtemp(prefix="msh")  # short: a socket path must fit 107 bytes
    yield Path(d)
    stopped = stop_helpers(d)  # every helper a test started is stopped, and seen to stop
    assert not [pid for pid in stopped if process_alive(pid)]
    shutil.rmtree(d, ignore_errors=True)


def _env(tmp_path: Path, runtime: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update(
        MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), XDG_RUNTIME_DIR=str(runtime)
    )
    env.update(extra)
    return env


def _search(ws: Path, env: dict[str, str], query: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "search", query, "--json"], cwd=ws,
                         env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _wait_for_helper(runtime: Path, count: int = 1, timeout: float = 120) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = helper_pids(runtime / "memsift")
        socks = list((runtime / "memsift").glob("*.sock"))
        if len(pids) >= count and len(socks) >= count:
            return pids
        time.sleep(0.2)
    raise AssertionError(f"no helper listening under {runtime}")


def _hits(answer: dict) -> list:
    return [(h["path"], h["startLine"], h["score"]) for h in answer["results"]]


def test_a_cold_search_starts_one_helper_that_answers_later_searches(
    tmp_path, runtime_dir, example_workspace, monkeypatch
):
    env = _env(tmp_path, runtime_dir)
    cold = _search(example_workspace, env, "ledger database")
    [pid] = _wait_for_helper(runtime_dir)
    assert process_alive(pid)
    again = _search(example_workspace, env, "ledger database")  # answered by the helper …
    assert _hits(again) == _hits(cold)
    _search(example_workspace, env, "flight to Lisbon")
    assert helper_pids(runtime_dir / "memsift") == [pid]  # … and no second helper for the same settings
    # The client side proves who answers: a resident answer returns an exit code, no answer None.
    monkeypatch.chdir(example_workspace)
    assert try_resident(["search", "ledger database", "--json"], env) == 0
    assert try_resident(["search", "ledger database", "--json"], {**env, "MEMSIFT_NO_RESIDENT": "1"}) is None


def test_other_settings_get_their_own_helper(tmp_path, runtime_dir, example_workspace):
    env = _env(tmp_path, runtime_dir)
    _search(example_workspace, env, "ledger database")
    _wait_for_helper(runtime_dir, 1)
    other = tmp_path / "other"
    (other / "memory").mkdir(parents=True)
    (other / "MEMORY.md").write_text("# Other\n\nPuffins nest on the cliffs in June.\n")
    assert _search(other, env, "puffins")["results"]
    assert len(set(_wait_for_helper(runtime_dir, 2))) == 2


def test_a_helper_exits_after_its_idle_timeout(tmp_path, runtime_dir, example_workspace):
    env = _env(tmp_path, runtime_dir, MEMSIFT__MEMORY__RESIDENTHELPER__IDLETIMEOUT="1s")
    _search(example_workspace, env, "ledger database")
    [pid] = _wait_for_helper(runtime_dir)
    deadline = time.monotonic() + 120
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not process_alive(pid)
    assert not list((runtime_dir / "memsift").glob("*.sock")) and helper_pids(runtime_dir / "memsift") == []


@pytest.mark.parametrize(
    "opt_out", [{"MEMSIFT_NO_RESIDENT": "1"}, {"MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false"}]
)
def test_opting_out_starts_no_helper(tmp_path, runtime_dir, example_workspace, opt_out):
    env = _env(tmp_path, runtime_dir, **opt_out)
    assert _search(example_workspace, env, "ledger database")["results"]
    folder = runtime_dir / "memsift"
    assert not folder.exists() or not list(folder.glob("helper-*.lock"))  # the helper is decided before exit


def _cli(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def test_one_helper_per_workspace_and_settings_that_status_shows_and_a_command_stops(
    tmp_path, runtime_dir, example_workspace
):
    """`-v`, a relative `-w` or another current folder used to start a second helper (87-167 MB
    each, invisible); now one per settings, listed by `status` and `helpers`, ended by `helpers stop`."""
    env = _env(tmp_path, runtime_dir)
    assert _cli(env, "-w", str(example_workspace), "search", "ledger").returncode == 0
    [pid] = _wait_for_helper(runtime_dir)
    assert _cli(env, "-v", "-w", str(example_workspace), "search", "ledger").returncode == 0
    assert _cli(env, "-w", example_workspace.name, "search", "ledger", cwd=example_workspace.parent).returncode == 0
    assert _cli(env, "search", "ledger", cwd=example_workspace / "memory").returncode == 0
    time.sleep(1.0)  # a second helper, had one been started, would hold its lock by now
    assert helper_pids(runtime_dir / "memsift") == [pid]
    status = json.loads(_cli(env, "-w", str(example_workspace), "status", "--json").stdout)["helper"]
    assert status["running"] and status["pid"] == pid and status["idleTimeout"] == "15m" and status["rssMB"] > 10
    human = _cli(env, "-w", str(example_workspace), "status").stdout
    assert "Helper" in human and f"pid {pid}" in human
    listed = json.loads(_cli(env, "helpers", "--json").stdout)["helpers"]
    assert [(h["pid"], h["workspace"]) for h in listed] == [(pid, str(example_workspace))]
    again = json.loads(_cli(env, "helpers", "list", "--json").stdout)["helpers"]  # as other CLIs spell it
    assert [(h["pid"], h["workspace"]) for h in again] == [(pid, str(example_workspace))]
    assert f"pid {pid}" in _cli(env, "helpers", "list").stdout
    other = tmp_path / "other"
    (other / "memory").mkdir(parents=True)
    (other / "MEMORY.md").write_text("- puffins nest in June\n")
    _cli(env, "-w", str(other), "search", "puffins")
    pids = _wait_for_helper(runtime_dir, 2)
    stopped = _cli(env, "-w", str(example_workspace), "helpers", "stop")
    assert stopped.returncode == 0 and f"stopped the helper pid {pid}" in stopped.stdout
    assert not process_alive(pid) and len(helper_pids(runtime_dir / "memsift")) == 1
    assert (
        "none running"
        in json.loads(_cli(env, "-w", str(example_workspace), "status", "--json").stdout)["helper"]["why"]
    )
    everything = _cli(env, "helpers", "stop", "--all")
    assert everything.returncode == 0 and helper_pids(runtime_dir / "memsift") == []
    assert not any(process_alive(p) for p in pids)


def test_a_helper_that_will_not_stop_is_reported_with_the_reason(tmp_path):
    # A process holding a helper's lock that ignores SIGTERM: `helpers stop` must say why it failed.
    from memsift.engine.cli.helper import _read_info, stop_helper

    lock = tmp_path / "helper-0000000000000000.lock"
    code = ("import fcntl, json, os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            f"fh = open({str(lock)!r}, 'a+'); fcntl.flock(fh, fcntl.LOCK_EX)\n"
            "fh.write(json.dumps({'pid': os.getpid()}) + '\\n'); fh.flush()\n"
            "print('ready', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        info = _read_info(lock)
        assert info is not None and info["pid"] == proc.pid
        why = stop_helper(info, wait_s=0.5)
        assert why is not None and "still running" in why and f"kill -9 {proc.pid}" in why
    finally:
        proc.kill()
        proc.wait()
    assert stop_helper(info, wait_s=0.5) is None  # gone: nothing to stop


def test_at_most_max_helpers_run_and_the_locks_of_ended_ones_are_removed(tmp_path, runtime_dir):
    """Thirteen workspaces once started thirteen helpers (about 800 MB); lock files of helpers that
    ended stayed for ever."""
    config = tmp_path / "xdg" / "memsift" / "config.json5"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"memory": {"residentHelper": {"maxHelpers": 2}},
                                  "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}))
    env = _env(tmp_path, runtime_dir)
    for i in range(3):
        ws = tmp_path / f"ws{i}"
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text(f"# Notes {i}\n\nThe heron count on pond {i} was {i + 7}.\n")
        assert _search(ws, env, "heron count")["results"]
        if i < 2:
            _wait_for_helper(runtime_dir, i + 1)
    time.sleep(3)  # a third helper, had one been started, would be listening by now
    assert len(helper_pids(runtime_dir / "memsift")) == 2
    # `status` of the third workspace says why no helper serves it (it said "the next search starts one").
    third = subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(tmp_path / "ws2"), "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    why = json.loads(third.stdout)["helper"]["why"]
    assert "maxHelpers (2)" in why and "next search starts one" not in why, why
    folder = runtime_dir / "memsift"
    stale, fresh = folder / "helper-0123456789abcdef.lock", folder / "helper-fedcba9876543210.lock"
    for lock in (stale, fresh):
        lock.write_text('{"pid": 999999}\n')
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    listed = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "helpers", "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["helpers"]) == 2, listed.stdout
    assert not stale.exists() and fresh.exists()  # ended an hour ago: removed; a helper may be starting on the new one
    assert len(list(folder.glob("helper-*.lock"))) == 3  # the two running helpers' locks, and the fresh one


def test_while_watch_runs_status_shows_it_and_no_helper_starts_beside_it(tmp_path, runtime_dir, example_workspace):
    env = _env(tmp_path, runtime_dir)
    watch = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "watch"], cwd=example_workspace, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for_helper(runtime_dir) == [watch.pid]  # watch holds the settings' helper lock and socket
        status = subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "status", "--json"],
            cwd=example_workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        helper = json.loads(status.stdout)["helper"]
        assert helper["running"] and helper["pid"] == watch.pid and helper["kind"] == "watch", helper
        human = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "status"], cwd=example_workspace,
                               env=env, capture_output=True, text=True, timeout=120).stdout
        assert f"`memsift watch` answers searches · pid {watch.pid}" in human, human
        loud = subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "-v", "search", "ledger database", "--json"],
            cwd=example_workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert loud.returncode == 0 and json.loads(loud.stdout)["results"]
        time.sleep(3)  # a helper started by that search would hold its lock by now
        assert helper_pids(runtime_dir / "memsift") == [watch.pid]
        stop = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "helpers", "stop", "--all"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert f"left `memsift watch` pid {watch.pid} running" in stop.stdout and watch.poll() is None
    finally:
        watch.terminate()
        watch.wait(timeout=60)
    assert helper_pids(runtime_dir / "memsift") == []


def test_a_client_whose_terminal_is_not_unicode_is_answered_by_the_cold_cli(tmp_path, runtime_dir):
    """The helper's answer is UTF-8 text: written to a latin-1 stdout it broke (a traceback, or JSON
    with `\\U…` escapes). Such a client searches itself, which escapes JSON to ASCII."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-12-03.md").write_text("## Review\nData pipeline review 数据管道 ✓ 🎉\n")
    env = _env(tmp_path, runtime_dir)
    utf8 = _search(ws, env, "data pipeline review")
    _wait_for_helper(runtime_dir)
    run = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "search", "data pipeline review", "--json"],
                         cwd=ws, env={**env, "PYTHONIOENCODING": "latin-1"}, capture_output=True, timeout=180)
    assert run.returncode == 0 and run.stdout.isascii(), run.stderr[-2000:]
    assert _hits(json.loads(run.stdout)) == _hits(utf8) and "🎉" in utf8["results"][0]["snippet"]


def test_a_helper_of_another_time_zone_is_named_when_none_of_these_settings_runs(tmp_path, runtime_dir,
                                                                                 example_workspace):
    """A helper started in one time zone does not answer (nor is stopped by) a CLI of another: `helpers
    stop` there said only that none runs, though one did for this workspace."""
    env = _env(tmp_path, runtime_dir, TZ="UTC0")
    assert _cli(env, "-w", str(example_workspace), "search", "ledger").returncode == 0
    [pid] = _wait_for_helper(runtime_dir)
    west = _cli({**env, "TZ": "PST8"}, "-w", str(example_workspace), "helpers", "stop")
    assert west.returncode == 0 and "1 for this workspace with other settings" in west.stdout and process_alive(pid)
    assert f"stopped the helper pid {pid}" in _cli(env, "-w", str(example_workspace), "helpers", "stop").stdout


def test_a_runtime_folder_too_deep_for_a_socket_falls_back_to_tmp(tmp_path, example_workspace, monkeypatch):
    """A sandbox's deep $XDG_RUNTIME_DIR: the socket's path did not fit the 107 bytes a Unix socket's
    name holds, so the helper started, listened nowhere and sat idle for its 15 minutes while every
    search ran cold. The folder is now `/tmp/memsift-<uid>` then, and the helper answers."""
    from memsift.engine.cli.helper import helpers
    from memsift.engine.private_dirs import private_runtime_path

    deep = tmp_path / ("r" * 90)
    deep.mkdir(mode=0o700)
    fallback = private_runtime_path({}, create=True)
    assert fallback == f"/tmp/memsift-{os.getuid()}"
    assert private_runtime_path({"XDG_RUNTIME_DIR": str(deep)}, create=True) == fallback
    short = Path(tempfile.mkdtemp(prefix="msh"))
    assert private_runtime_path({"XDG_RUNTIME_DIR": str(short)}, create=True) == str(short / "memsift")
    shutil.rmtree(short)

    # /tmp/memsift-<uid> is shared with the user's own helpers: however many of those run (the
    # default cap is 4), this test's helper must be allowed to start
    env = _env(tmp_path, deep, MEMSIFT__MEMORY__RESIDENTHELPER__MAXHELPERS="64")
    ws = tmp_path / "mine"  # a workspace of this test's own: the helpers in /tmp/memsift-<uid> are told apart by it
    shutil.copytree(example_workspace, ws)
    try:
        _search(ws, env, "ledger database")
        deadline = time.monotonic() + 120
        while not (ours := [h for h in helpers(Path(fallback)) if h.get("workspace") == str(ws)]):
            assert time.monotonic() < deadline, "no helper in the fallback folder"
            time.sleep(0.2)
        [helper] = ours
        deadline = time.monotonic() + 120
        while not list(Path(fallback).glob(f"*-{helper['pid']}.sock")):  # it listens there
            assert time.monotonic() < deadline and process_alive(helper["pid"]), "the helper has no socket"
            time.sleep(0.2)
        monkeypatch.chdir(ws)
        assert try_resident(["search", "ledger database", "--json"], env) == 0  # answered by it
    finally:
        for h in helpers(Path(fallback)):
            if h.get("workspace") == str(ws):
                os.kill(h["pid"], 15)


def test_status_and_helpers_remove_the_sockets_of_killed_servers(tmp_path, runtime_dir):
    """A watch or helper killed (SIGKILL, the OOM killer) leaves its socket; a client removed it only
    for its own settings, so the sockets of settings no longer used piled up in the folder."""
    import socket as sockets

    from memsift.engine.cli.helper import helpers

    folder = runtime_dir / "memsift"
    folder.mkdir(mode=0o700)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(ended.stdout)
    paths = {"dead": folder / f"0123456789ab-{dead_pid}.sock", "alive": folder / f"0123456789ab-{os.getpid()}.sock"}
    listeners = []
    for path in paths.values():
        s = sockets.socket(sockets.AF_UNIX)
        s.bind(str(path))
        listeners.append(s)
    (folder / "notes.txt").write_text("not ours to remove\n")
    try:
        if process_alive(dead_pid):
            pytest.skip("the ended process's id was reused at once")
        assert helpers(folder) == []
        assert not paths["dead"].exists() and paths["alive"].exists() and (folder / "notes.txt").exists()
    finally:
        for s in listeners:
            s.close()
