"""Shared fixtures: tmp workspaces, settings built from real config models, providers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import EXAMPLE_WORKSPACE


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
