"""The `memsift` command as a user runs it: real processes, real index, real local model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _memsift(tmp_path: Path, *args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    # No provider keys from the developer's shell: `auto` must pick the embedded local model.
    e = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    e.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", *args],
        capture_output=True,
        text=True,
        env=e,
        cwd=cwd or tmp_path,
        timeout=300,
    )


def test_index_search_get_status_end_to_end(tmp_path, example_workspace):
    ws = str(example_workspace)
    r = _memsift(tmp_path, "-w", ws, "index", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["fullReindex"] and report["filesIndexed"] == 6 and report["chunksEmbedded"] >= 6

    r = _memsift(tmp_path, "-w", ws, "search", "what is my sister allergic to?", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["backend"] == "builtin" and answer["mode"] == "hybrid" and answer["provider"] == "local"
    top = answer["results"][0]
    assert top["path"] == "MEMORY.md" and "peanuts" in top["snippet"]
    assert {"startLine", "endLine", "score", "snippet", "source", "citation"} <= set(top)

    r = _memsift(tmp_path, "-w", ws, "search", "a828e60")
    assert r.returncode == 0 and "memory/2026-11-02.md" in r.stdout.splitlines()[0]

    r = _memsift(tmp_path, "-w", ws, "search", "zzqx nothing matches this", "--min-score", "0.99")
    assert r.returncode == 0 and "No results." in r.stdout  # no hits is still success

    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-02.md:3:2")
    assert r.returncode == 0
    assert r.stdout.splitlines()[0].startswith("- 09:40 Standup") and len(r.stdout.splitlines()) == 2
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-02.md", "--from", "3", "--lines", "1", "--json")
    assert json.loads(r.stdout)["text"].startswith("- 09:40 Standup")

    r = _memsift(tmp_path, "-w", ws, "status", "--json", "--deep")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["files"] == 6 and st["dirty"] is False and st["deep"]["embedding"]["ok"]
    r = _memsift(tmp_path, "-w", ws, "status")
    assert "Provider" in r.stdout and "local" in r.stdout


def test_two_workspaces_keep_their_own_indexes(tmp_path, example_workspace):
    # The workspace defaults to the current folder: searching another folder must not answer from
    # (or degrade to keyword-only on) the first folder's index, nor disturb it.
    other = tmp_path / "other"
    (other / "memory").mkdir(parents=True)
    (other / "MEMORY.md").write_text("# Other\n\n- The staging cluster runs in Frankfurt.\n")
    for ws, query, expect in ((example_workspace, "what is my sister allergic to?", "MEMORY.md"),
                              (other, "where does the staging cluster run?", "MEMORY.md"),
                              (example_workspace, "hotel shortlist for Lisbon", "memory/projects/travel.md")):
        r = _memsift(tmp_path, "search", query, "--json", cwd=ws)
        assert r.returncode == 0, r.stderr
        answer = json.loads(r.stdout)
        assert answer["mode"] == "hybrid" and not answer.get("degraded"), answer
        assert answer["results"][0]["path"] == expect
    assert len(list((tmp_path / "state" / "memory").glob("main-*.sqlite"))) == 2


def test_stdout_is_only_results(tmp_path, example_workspace):
    r = _memsift(tmp_path, "-w", str(example_workspace), "-vv", "search", "ledger", "--json")
    assert r.returncode == 0
    json.loads(r.stdout)  # logs went to stderr
    assert "sync done" in r.stderr


def test_config_show_prints_the_resolved_config(tmp_path, example_workspace):
    cfg = tmp_path / "c.json5"
    cfg.write_text("{agents: {defaults: {memorySearch: {query: {hybrid: {vectorWeight: 0.6, textWeight: 0.2}}, remote: {apiKey: 'sk-live-abc'}}}}}")
    r = _memsift(tmp_path, "-c", str(cfg), "-w", str(example_workspace), "config", "show")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["memorySearch"]["query"]["hybrid"]["vectorWeight"] == pytest.approx(0.75)
    assert data["agentId"] == "main" and Path(data["storePath"]).name.startswith("main-")
    assert "sk-live-abc" not in r.stdout


def test_exit_codes(tmp_path, example_workspace):
    ws = str(example_workspace)
    bad = tmp_path / "bad.json5"
    bad.write_text("{agents: {defaults: {memorySearch: {chunking: {tokns: 3}}}}}")
    r = _memsift(tmp_path, "-c", str(bad), "-w", ws, "search", "x")
    assert r.returncode == 3 and "agents.defaults.memorySearch.chunking.tokns" in r.stderr

    r = _memsift(tmp_path, "-w", ws, "get", "../../etc/passwd")
    assert r.returncode == 6 and "path not allowed" in r.stderr

    store = tmp_path / "dir-not-db"
    store.mkdir()
    cfg = tmp_path / "store.json5"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"store": {"path": str(store)}}}}}))
    r = _memsift(tmp_path, "-c", str(cfg), "-w", ws, "search", "ledger")
    assert r.returncode == 4 and "not a regular file" in r.stderr

    r = _memsift(tmp_path, "-w", ws, "search")
    assert r.returncode == 2  # usage

    off = tmp_path / "off.json5"
    off.write_text("{agents: {defaults: {memorySearch: {enabled: false}}}}")
    r = _memsift(tmp_path, "-c", str(off), "-w", ws, "search", "x")
    assert r.returncode == 3 and "disabled" in r.stderr
