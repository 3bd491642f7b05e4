"""Shared pieces of the reliability suites: figures counted while the tests run, printed at the end.

The figures (queries fuzzed, faults injected by kind, crashes and lost updates observed) are what
the closing note of the reliability work reports. Set MEMSIFT_RELIABILITY_FIGURES=<file> to also
write them as JSON.
"""

from __future__ import annotations

import json
import os

from figures import FIGURES


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    if not FIGURES:
        return
    terminalreporter.section("reliability figures")
    for key in sorted(FIGURES):
        terminalreporter.write_line(f"{key}: {FIGURES[key]}")
    out = os.environ.get("MEMSIFT_RELIABILITY_FIGURES")
    if out:
        with open(out, "w") as fh:
            json.dump(dict(FIGURES), fh, indent=2, sort_keys=True)
