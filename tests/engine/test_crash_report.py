"""A bug reaches the user as one line saying what failed and where its traceback was kept (a private
file in the state folder, secrets masked), not as a traceback; -v prints the traceback too."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from helpers import EXAMPLE_WORKSPACE

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
