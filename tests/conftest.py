"""Shared fixtures: tmp workspaces, settings built from real config models, providers."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from helpers import EXAMPLE_WORKSPACE, stop_helpers

# Derived model files (the int8 graph) go to a cache of this test session, never the user's.
_CACHE_HOME = tempfile.mkdtemp(prefix="memsift-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME
atexit.register(shutil.rmtree, _CACHE_HOME, True)
# No test starts a resident helper unless it means to (those unset this and stop their helper);
# the sockets of this session live in a folder of its own, swept at the end (pytest_sessionfinish).
os.environ["MEMSIFT_NO_RESIDENT"] = "1"
_RUNTIME_DIR = tempfile.mkdtemp(prefix="msx")  # short: a socket path must fit 107 bytes
os.environ["XDG_RUNTIME_DIR"] = _RUNTIME_DIR


def pytest_sessionfinish(session, exitstatus):
    stop_helpers(_RUNTIME_DIR)
    shutil.rmtree(_RUNTIME_DIR, ignore_errors=True)


@pytest.fixture
def example_workspace(tmp_path: Path) -> Path:
    """A private copy of the shipped example workspace."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    return ws


@pytest.fixture(scope="session")
def local_provider():
    """The real local model, loaded once for the whole session."""
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    provider = LocalMiniLMProvider()
    provider.embed_sync(["warm up"])
    return provider


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip raised inside a shared helper or fixture (helpers.py's "the real qmd is not on PATH")
    is reported at the skipped test, so `-rs` says which test did not run, not where the helper is."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        path, _line, reason = report.longrepr
        test_file = str(item.path)
        if not test_file.endswith(str(path).lstrip("./")) and item.location[1] is not None:
            report.longrepr = (item.nodeid.split("::", 1)[0], item.location[1] + 1, reason)
