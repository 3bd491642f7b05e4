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
from memsift.engine.files.sync import (DATED_AHEAD_NS, FINE_RACY_WINDOW_NS, RACY_WINDOW_NS, as_recorded,
                                       stamp_matches)
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


def _dated(st: os.stat_result, mtime_ns: int, ctime_ns: int) -> os.stat_result:
    extra = {"st_mtime_ns": mtime_ns, "st_ctime_ns": ctime_ns, "st_atime_ns": st.st_atime_ns}
    return os.stat_result(tuple(st), extra)


def test_a_file_dated_days_ahead_by_hand_is_recorded_as_it_is_and_one_written_ahead_is_not(tmp_path: Path) -> None:
    """A tree copied in with dates ahead of this clock (`touch -d`, tar, rsync from a machine whose clock
    runs ahead) was read again by every sync and every search's change check, for as long as its dates
    stayed ahead: 2,000 such notes made each search 0.25 s slower. Its mtime was set apart from its
    ctime, so it is recorded as it is; a file a write dated ahead (a file server's clock) stays racy."""
    f = tmp_path / "n.md"
    f.write_text("x")
    st = os.stat(f)
    now = 1_800_000_000_123_456_789
    day = 86_400 * 10**9
    copied_in = _dated(st, now + day, now - 10 * 10**9)  # mtime set by hand a day ahead, ten seconds ago
    assert as_recorded(copied_in, now) is copied_in
    whole_second = _dated(st, (now // 10**9) * 10**9 + day, now - 10 * 10**9)  # a coarse clock's mtime
    assert as_recorded(whole_second, now) is whole_second
    written_ahead = _dated(st, now + day, now + day)  # a write by a clock a day ahead sets both
    assert as_recorded(written_ahead, now).st_mtime_ns == now + day - 1
    minutes_ahead = _dated(st, now + DATED_AHEAD_NS // 2, now - 10 * 10**9)  # a synced folder's clock, minutes off
    assert as_recorded(minutes_ahead, now).st_mtime_ns == now + DATED_AHEAD_NS // 2 - 1


def test_notes_dated_a_day_ahead_are_recorded_with_their_own_dates(tmp_path: Path) -> None:
    """The outcome in an index: the builtin backend records a note copied in a day ahead with its own mtime
    (not 1 ns early, which made every later sync and search read it again), and finds its edits."""
    import sqlite3

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    note = ws / NOTE
    note.write_text("- The gate code is 4711.\n", encoding="utf-8")
    ahead = time.time_ns() + 86_400 * 10**9
    os.utime(note, ns=(ahead, ahead))
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    [store] = (tmp_path / "state").rglob("*.sqlite")
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT mtime_ns FROM files WHERE path = ?", (NOTE,)).fetchone() == (ahead,)
    note.write_text("- The gate code is 9082.\n", encoding="utf-8")  # an edit takes this clock's time
    done = run_cli(tmp_path, cfg, "search", "gate code 9082", "--mode", "keyword", "--json")
    assert any("9082" in h["snippet"] for h in json.loads(done.stdout)["results"]), done.stdout


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
