"""Test helpers importable from every test module (tests/ is on pythonpath)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from memsift.engine.config import MemsiftConfig, resolve_agent
from memsift.engine.config.load import ResolvedConfig

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_WORKSPACE = REPO / "contrib" / "example-workspace"
QMD_SAMPLES = REPO / "tests" / "qmd-samples"  # real QMD 2.8.3 captures, vendored (see its README)


def make_settings(tmp_path: Path, workspace: Path, memory_search: dict[str, Any] | None = None, **top: Any) -> ResolvedConfig:
    """Resolve a config the way the CLI does, with the index under tmp_path."""
    raw = {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": memory_search or {}}}, **top}
    return resolve_agent(MemsiftConfig.model_validate(raw), workspace=workspace, environ={})


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.split(")")[-1].split()[0] != "Z"


def stop_helpers(runtime_dir: str | Path) -> list[int]:
    """Stop every resident helper whose lock file is under `runtime_dir`; their process ids."""
    from memsift.engine.cli.helper import helper_pids

    folder = Path(runtime_dir) / "memsift"
    pids = helper_pids(folder) if folder.is_dir() else []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for pid in pids:
        for _ in range(100):
            if not process_alive(pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
    return pids
