"""A note rewritten to the same size within the tick of its filesystem's clock in which a sync read
it (FAT: 2 s, HFS+ and some network shares: 1 s) keeps its mtime and size. Before, every door then
took it as unchanged until its next edit: the new text was never searched. Such a note is now read
again by the next sync, through the cold CLI, the resident helper, `memsift watch` and MCP; status still counts it as
indexed (its stamp is the one recorded, give or take the nanosecond that marks it)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from helpers import Watch, tools_over_mcp
from memsift.engine.files.sync import FINE_RACY_WINDOW_NS, RACY_WINDOW_NS, as_recorded, stamp_matches
from memsift.engine.testing.doors import cli_env, run_cli

NOTE = "memory/2026-11-05.md"


def test_a_stat_read_within_the_window_is_recorded_early_and_still_matches(tmp_path: Path) -> None:
    f = tmp_path / "n.md"
    f.write_text("x")
    os.utime(f, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))  # a fine clock's mtime
    st = os.stat(f)
    assert as_recorded(st, st.st_mtime_ns + FINE_RACY_WINDOW_NS) is st  # its tick is over: recorded as is
    os.utime(f, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))  # a whole second: a coarse clock's
    coarse = os.stat(f)
    assert as_recorded(coarse, coarse.st_mtime_ns + RACY_WINDOW_NS) is coarse
    assert as_recorded(coarse, coarse.st_mtime_ns + FINE_RACY_WINDOW_NS).st_mtime_ns == coarse.st_mtime_ns - 1
    racy = as_recorded(st, st.st_mtime_ns + 1000)
    assert racy.st_mtime_ns == st.st_mtime_ns - 1 and racy.st_size == st.st_size and racy.st_mode == st.st_mode
    assert stamp_matches(racy.st_mtime_ns, racy.st_size, st) and stamp_matches(st.st_mtime_ns, st.st_size, st)
    assert not stamp_matches(st.st_mtime_ns + 1, st.st_size, st) and not stamp_matches(st.st_mtime_ns, 2, st)


def _rewrite_in_the_same_tick(ws: Path, old: str, new: str, tick: int) -> None:
    note = ws / NOTE
    note.write_text(note.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    os.utime(note, ns=(tick, tick))


def test_a_same_size_rewrite_in_the_same_tick_is_found_through_every_door(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / NOTE).write_text("- The gate code is 4711.\n", encoding="utf-8")
    tick = time.time_ns() + 60_000_000_000  # a tick not over yet, however loaded the machine is
    os.utime(ws / NOTE, ns=(tick, tick))
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    status = json.loads(run_cli(tmp_path, cfg, "status", "--json").stdout)
    assert status["index"]["pendingChanges"] == 0 and not status["dirty"], status["index"]

    def found(code: str, resident: bool) -> list[str]:
        done = run_cli(tmp_path, cfg, "search", f"gate code {code}", "--mode", "keyword", "--json", resident=resident)
        return [h["snippet"] for h in json.loads(done.stdout)["results"] if code in h["snippet"]]

    for old, new, resident in (("4711", "9082", False), ("9082", "1337", True), ("1337", "2024", True)):
        _rewrite_in_the_same_tick(ws, old, new, tick)
        assert found(new, resident), (new, resident)
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    # The watch: the rewrite's inotify event starts a sync, which must read the note again.
    watch = Watch([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg)], cli_env(tmp_path, resident=True))
    try:
        watch.wait_for(lambda e: e["event"] == "ready")
        _rewrite_in_the_same_tick(ws, "2024", "5150", tick)
        watch.wait_for(lambda e: e["event"] == "synced" and e["reason"] != "start")
        assert found("5150", True), watch.events[-5:]
        assert watch.count("answered") == 1, watch.events[-5:]
    finally:
        assert watch.stop() == 0
        run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    _rewrite_in_the_same_tick(ws, "5150", "8642", tick)
    for (answer,) in tools_over_mcp(tmp_path, cfg, [("memory_search", {"query": "gate code 8642", "mode": "keyword"})]):
        assert any("8642" in h["snippet"] for h in answer["results"]), answer
