"""`memsift status` on QMD counts the memory files edited, added or removed since QMD's last update,
as every other backend does: `dirty`, `pendingChanges` and the "Changes" row, cold, through the
resident helper and over MCP. Before, QMD's status said `dirty: false` and showed no changes
however many notes were edited (an operator could not tell whether `memsift index` was due)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import backend_memory, tools_over_mcp
from memsift.engine.testing.doors import run_cli


def _status(tmp_path: Path, cfg: Path, **how) -> dict:
    done = run_cli(tmp_path, cfg, "status", "--json", **how)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_qmd_status_counts_the_notes_changed_since_its_last_update(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- the user drinks dark roast coffee\n")
    (ws / "memory" / "2026-11-05.md").write_text("- the walrus budget was approved\n")
    (ws / "memory" / "2026-11-06.md").write_text("- the gannet survey moves to Thursday\n")
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory("qmd"), "agents": {"defaults": {"workspace": str(ws)}}}))
    assert "Changes" not in run_cli(tmp_path, cfg, "status").stdout  # no update recorded yet: not claimed as none
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    status = _status(tmp_path, cfg)
    assert not status["dirty"] and status["index"]["pendingChanges"] == 0, status["index"]
    assert "Changes       none" in run_cli(tmp_path, cfg, "status").stdout

    (ws / "MEMORY.md").write_text("# Memory\n- the user drinks green tea now\n")  # edited
    (ws / "memory" / "2026-11-07.md").write_text("- a new note\n")  # added
    (ws / "memory" / "2026-11-06.md").unlink()  # removed
    for resident in (False, True, True):  # cold, then the resident helper's answer
        status = _status(tmp_path, cfg, resident=resident)
        assert status["dirty"] and status["index"]["pendingChanges"] == 3, status["index"]
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    assert "3 file(s) changed since the last sync" in run_cli(tmp_path, cfg, "status").stdout
    for (answer,) in tools_over_mcp(tmp_path, cfg, [("memory_status", {})]):
        status = answer["status"]  # the server's start-up sync may have run first: then nothing is pending
        pending = status["index"]["pendingChanges"]
        assert pending in (0, 3) and status["dirty"] == bool(pending), status["index"]

    assert run_cli(tmp_path, cfg, "index").returncode == 0
    status = _status(tmp_path, cfg)
    assert not status["dirty"] and status["index"]["pendingChanges"] == 0, status["index"]
