from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from memsift.engine.errors import PathNotAllowedError
from memsift.engine.files.notes import append_note

NOW = datetime(2026, 11, 22, 9, 41, tzinfo=timezone.utc)


def test_creates_todays_log_and_only_appends(tmp_path):
    assert append_note(tmp_path, "Lena's flight lands at 18:05", now=NOW) == ("memory/2026-11-22.md", 3)
    log = tmp_path / "memory" / "2026-11-22.md"
    log.write_text(log.read_text() + "- 10:00 written by hand, no newline at the end")
    assert append_note(tmp_path, "two lines\nsecond line", now=NOW) == ("memory/2026-11-22.md", 5)
    assert log.read_text() == (
        "# 2026-11-22\n\n- 09:41 Lena's flight lands at 18:05\n- 10:00 written by hand, no newline at the end\n"
        "- 09:41 two lines\n  second line\n"
    )


def test_refuses_empty_text_and_symlinks(tmp_path):
    with pytest.raises(PathNotAllowedError):
        append_note(tmp_path, "   \n", now=NOW)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(elsewhere, ws / "memory")
    with pytest.raises(PathNotAllowedError, match="symlink"):
        append_note(ws, "x", now=NOW)
    assert list(elsewhere.iterdir()) == []


def test_note_then_search_through_the_cli(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT_NO_RESIDENT": "1",
    }
    env.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws)]
    r = subprocess.run(
        [*base, "note", "the spare key is under the blue flowerpot", "--json"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    written = json.loads(r.stdout)
    assert written["path"].startswith("memory/") and written["line"] == 3
    r = subprocess.run(
        [*base, "search", "where is the spare key", "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert json.loads(r.stdout)["results"][0]["path"] == written["path"]


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Pacific/Pago_Pago"])  # 25 hours apart: one is another day
def test_a_note_goes_to_the_users_day_in_the_users_time_zone(tmp_path, zone):
    """`memsift note` with the user's zone configured (OpenClaw's userTimezone) writes to her day's file
    and stamps her time, as OpenClaw names its daily files; not the machine's day."""
    from zoneinfo import ZoneInfo

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    cfg = tmp_path / "openclaw.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"userTimezone": zone}}}))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
           "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    for _ in range(3):  # asked again if her day turned over while it ran
        before = datetime.now(ZoneInfo(zone))
        r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "--openclaw-config", str(cfg), "-w",
                            str(ws), "note", "called the notary", "--json"], capture_output=True, text=True, env=env,
                           timeout=120)
        after = datetime.now(ZoneInfo(zone))
        if before.date() == after.date():
            break
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == f"memory/{after.date().isoformat()}.md"
    line = (ws / json.loads(r.stdout)["path"]).read_text().splitlines()[-1]
    assert line[2:7] in {before.strftime("%H:%M"), after.strftime("%H:%M")}, line
