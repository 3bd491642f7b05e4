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


def test_qmd_status_claims_no_skipped_note_while_its_index_is_another_workspaces(tmp_path: Path):
    """One agent's QMD home serves whichever workspace it last indexed. Before `memsift index` in
    another one, status said its notes named as the first's were "QMD did not index it (QMD skips
    some characters in names …): rename it": status now says to run `memsift index`, and claims none."""
    configs = []
    for name in ("first", "second"):
        ws = tmp_path / name
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text(f"# Memory\n- the {name} workspace\n")
        (ws / "memory" / "2026-11-05.md").write_text(f"- a note of the {name} workspace\n")
        cfg = tmp_path / f"{name}.json"
        cfg.write_text(json.dumps({"memory": backend_memory("qmd"), "agents": {"defaults": {"workspace": str(ws)}}}))
        configs.append(cfg)
    assert run_cli(tmp_path, configs[0], "index").returncode == 0
    status = _status(tmp_path, configs[1])
    assert status["skipped"] == [], status["skipped"]
    assert "registered for another folder" in run_cli(tmp_path, configs[1], "status").stdout
    assert run_cli(tmp_path, configs[1], "index").returncode == 0
    assert _status(tmp_path, configs[1])["skipped"] == []
