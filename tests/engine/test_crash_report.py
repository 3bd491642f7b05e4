"""A bug reaches the user as one line saying what failed and where its traceback was kept (a private
file in the state folder, secrets masked), not as a traceback; -v prints the traceback too."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import EXAMPLE_WORKSPACE, stop_helpers, wait_for_socket

# A bug planted deep in a search (the time filter every search builds), in a fresh process.
PLANTED = """
import sys
import memsift.engine.search.request as request
def broken(*args, **kwargs):
    raise ZeroDivisionError("planted bug; header Authorization: Bearer sk-planted-secret-123456")
request.time_filter_for = broken
from memsift.engine.cli.main import main
sys.argv = ["memsift", *sys.argv[1:]]
main()
"""


def _run(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update(MEMSIFT_NO_RESIDENT="1", MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "x"))
    return subprocess.run([sys.executable, "-c", PLANTED, "-w", str(EXAMPLE_WORKSPACE), *args, "search", "ledger"],
                          capture_output=True, text=True, env=env, timeout=300)


def test_a_bug_is_one_line_and_its_traceback_is_kept_in_a_private_file(tmp_path):
    r = _run(tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("memsift: internal error (ZeroDivisionError: planted bug; header Authorization: Bearer ***)")
    assert "sk-planted-secret" not in r.stderr and "This is a bug in memsift" in line
    [kept] = (tmp_path / "state" / "crashes").iterdir()
    assert str(kept) in line and stat.S_IMODE(kept.stat().st_mode) == 0o600
    report = kept.read_text()
    assert "Traceback" in report and "ZeroDivisionError" in report and "command: -w" in report
    assert "sk-planted-secret" not in report


def test_with_v_the_traceback_is_printed_too_and_old_reports_are_pruned(tmp_path):
    crashes = tmp_path / "state" / "crashes"
    crashes.mkdir(parents=True)
    for i in range(25):
        (crashes / f"20000101-0000{i:02d}-1.txt").write_text("old")
    r = _run(tmp_path, "-v")
    assert r.returncode == 1 and "Traceback (most recent call last)" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("memsift: internal error (ZeroDivisionError")
    kept = sorted(p.name for p in crashes.iterdir())
    assert len(kept) == 20 and not kept[-1].startswith("20000101")  # the newest 20, this one among them


def test_output_the_machine_cannot_take_is_one_line_not_a_bug(tmp_path):
    """`memsift search … > /dev/full` (a full disk): "internal error … This is a bug in memsift"
    and a crash report, or a traceback when the resident helper answered. The machine refused the
    write; it is said as that, exit 1, nothing reported."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    runtime = tempfile.mkdtemp(prefix="msf")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update(MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "x"), XDG_RUNTIME_DIR=runtime)
    cold = {**env, "MEMSIFT_NO_RESIDENT": "1"}
    cli = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(EXAMPLE_WORKSPACE)]
    console_script = [sys.executable, "-c", "import sys; from memsift.engine.cli import main; sys.argv[0] = 'memsift'; "
                      "main()", "-w", str(EXAMPLE_WORKSPACE)]
    try:
        runs = [(cli + args, cold) for args in (["search", "ledger"], ["status", "--json"],
                                                ["get", "MEMORY.md"])]
        subprocess.run([*console_script, "search", "warm up"], env=env, capture_output=True, timeout=300)
        wait_for_socket(Path(runtime))
        runs.append(([*console_script, "search", "ledger"], env))  # answered by the resident helper
        for cmd, run_env in runs:
            with open("/dev/full", "w") as full:
                r = subprocess.run(cmd, env=run_env, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
            assert r.returncode == 1, (cmd, r.stderr)
            assert r.stderr.strip().splitlines()[-1] == (
                "memsift: cannot write the output: No space left on device (the disk or a quota is full: free some "
                "space, or write the output elsewhere)"), (cmd, r.stderr)
            assert "Traceback" not in r.stderr and "internal error" not in r.stderr
        assert not (tmp_path / "state" / "crashes").exists()
    finally:
        stop_helpers(runtime)
        shutil.rmtree(runtime, ignore_errors=True)


def test_watch_whose_output_the_machine_refuses_stops_saying_so(tmp_path):
    """`memsift watch --json > /dev/full`: its first line's failure was logged as "sync failed",
    then the watch ended in an internal error blaming "a file"."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update(MEMSIFT_NO_RESIDENT="1", MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "x"))
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(EXAMPLE_WORKSPACE), "watch",
                            "--json"], env=env, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 1 and "sync failed" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("memsift: cannot write the output: No space left on device")
    assert not (tmp_path / "state" / "crashes").exists()


def test_a_shell_left_in_a_deleted_folder_gets_answers_or_one_line(tmp_path):
    """A terminal whose folder was deleted (a worktree removed, `rm -rf` of the folder one is in):
    every command was an internal error, or a traceback through the resident client, even with
    `-w /absolute/path`. It now answers with an absolute workspace, and says what to do without."""
    runtime = tempfile.mkdtemp(prefix="msg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update(MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "x"), XDG_RUNTIME_DIR=runtime)
    gone = tmp_path / "gone"
    entry = "import sys; from memsift.engine.cli import main; sys.argv[0] = 'memsift'; main()"

    def from_a_deleted_folder(*args: str, **extra: str) -> subprocess.CompletedProcess:
        gone.mkdir()
        script = f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))} && exec \"$@\""
        # -P: the console script's sys.path holds no current folder ('' from -c would; on CPython 3.13.0
        # an extension module then fails to import from a deleted folder: "SystemError: attempted to
        # fetch exception but none was set", in pydantic_core's import, not memsift's).
        return subprocess.run(["sh", "-c", script, "sh", sys.executable, "-P", "-c", entry, *args],
                              env={**env, **extra}, capture_output=True, text=True, timeout=300)

    try:
        for extra in ({"MEMSIFT_NO_RESIDENT": "1"}, {}, {}):  # cold; then starting a helper; then asking it
            r = from_a_deleted_folder("-w", str(EXAMPLE_WORKSPACE), "search", "ledger", "--json", **extra)
            assert r.returncode == 0 and '"results"' in r.stdout, r.stderr
            if not extra:
                wait_for_socket(Path(runtime))
        for args in (["search", "ledger"], ["status"]):
            r = from_a_deleted_folder(*args, MEMSIFT_NO_RESIDENT="1")
            assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
            assert r.stderr.strip().splitlines()[-1] == (
                "memsift: the current folder no longer exists (it was deleted or moved): cd to a folder that exists, "
                "or name the workspace with -w /path/to/workspace")
        assert not (tmp_path / "state" / "crashes").exists()
    finally:
        stop_helpers(runtime)
        shutil.rmtree(runtime, ignore_errors=True)


# A user the password database does not know, with HOME unset: a container run as an arbitrary uid.
NO_HOME = """
import os, pwd, sys
def unknown(uid):
    raise KeyError(f"getpwuid(): uid not found: {uid}")
pwd.getpwuid = unknown
os.environ.pop("HOME", None)
from memsift.engine.cli.main import main
sys.argv = ["memsift", *sys.argv[1:]]
main()
"""


def test_a_user_with_no_home_folder_is_told_what_to_set(tmp_path):
    """A container run as an arbitrary uid with HOME unset: every command was an internal error
    ("Could not determine home directory"), and its crash report went to a folder named "~" made in
    the current one. It now says what to set; with MEMSIFT_STATE_DIR it searches."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMSIFT", "XDG_")) and not k.endswith("_API_KEY") and k != "HOME"}
    env.update(MEMSIFT_NO_RESIDENT="1")
    here = tmp_path / "here"
    here.mkdir()
    for args in (["search", "ledger"], ["status"], ["config", "show"]):
        r = subprocess.run([sys.executable, "-c", NO_HOME, "-w", str(EXAMPLE_WORKSPACE), *args], cwd=here, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 3 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith(
            "memsift: no home folder is known for this user (uid "), r.stderr
        assert "set HOME, or MEMSIFT_STATE_DIR" in r.stderr
    assert list(here.iterdir()) == []  # no folder named "~"
    r = subprocess.run([sys.executable, "-c", NO_HOME, "-w", str(EXAMPLE_WORKSPACE), "search", "ledger", "--json"],
                       cwd=here, env={**env, "MEMSIFT_STATE_DIR": str(tmp_path / "state")}, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and '"results"' in r.stdout, r.stderr
