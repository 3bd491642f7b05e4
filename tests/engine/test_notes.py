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


# Moments at a month's and a year's end (UTC) and the day and time each is for a user in each zone:
# 25 hours apart, so the two are on different days at every one of them.
NOTE_MOMENTS = [
    ("2026-12-31T23:30:00+00:00", {"Pacific/Kiritimati": "2027-01-01 13:30", "Pacific/Pago_Pago": "2026-12-31 12:30"}),
    ("2027-03-01T02:15:00+00:00", {"Pacific/Kiritimati": "2027-03-01 16:15", "Pacific/Pago_Pago": "2027-02-28 15:15"}),
    ("2028-02-29T10:45:00+00:00", {"Pacific/Kiritimati": "2028-03-01 00:45", "Pacific/Pago_Pago": "2028-02-28 23:45"}),
]


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Pacific/Pago_Pago"])
@pytest.mark.parametrize(("moment", "expected"), NOTE_MOMENTS)
def test_a_note_goes_to_the_users_day_in_the_users_time_zone(tmp_path, zone, moment, expected):
    """`memsift note` with the user's zone configured (OpenClaw's userTimezone) writes to her day's file
    and stamps her time, as OpenClaw names its daily files; not the machine's day. Counted from
    `$MEMSIFT_NOW` (fixed here, as every door counts from it)."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    cfg = tmp_path / "openclaw.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"userTimezone": zone}}}))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
           "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "MEMSIFT_NOW": moment}
    r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "--openclaw-config", str(cfg), "-w",
                        str(ws), "note", "called the notary", "--json"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    day, clock = expected[zone].split()
    assert json.loads(r.stdout)["path"] == f"memory/{day}.md"
    assert (ws / "memory" / f"{day}.md").read_text().splitlines()[-1] == f"- {clock} called the notary"


def test_a_note_that_cannot_be_written_is_a_clear_error_and_the_index_one_too(tmp_path):
    """A day's file that cannot be opened for writing (here a folder by that name: refused to root as to
    anyone, as a read-only workspace is) and a state folder that cannot be made say so, and what to do,
    in one line each: not a traceback, nor "the index can be searched" of an index that does not exist."""
    ws = tmp_path / "ws"
    (ws / "memory" / "2026-11-22.md").mkdir(parents=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT_NO_RESIDENT": "1", "MEMSIFT_NOW": "2026-11-22T09:41:00+00:00", "TZ": "UTC",
    }
    (tmp_path / "state").write_text("a file where the state folder should be")
    env.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws)]
    r = subprocess.run([*base, "note", "the spare key is under the flowerpot"], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "cannot write the note to memory/2026-11-22.md" in r.stderr and "the note was not written" in r.stderr
    (ws / "MEMORY.md").write_text("# Memory\n\nThe spare key is under the flowerpot.\n")
    r = subprocess.run([*base, "search", "spare key"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 4 and "Traceback" not in r.stderr, r.stderr
    assert "cannot inspect index" in r.stderr and "Not a directory" in r.stderr and "MEMSIFT_STATE_DIR" in r.stderr
    # The index's folder is there but its lock cannot be made (a folder by that name, as a read-only state folder).
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "idx.sqlite.lock").mkdir()
    config = tmp_path / "memsift.json5"
    config.write_text(json.dumps({"memorySearch": {"store": {"path": str(tmp_path / "store" / "idx.sqlite")}}}))
    r = subprocess.run([*base, "-c", str(config), "search", "spare key"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 4 and "Traceback" not in r.stderr, r.stderr
    assert f"cannot write in the state folder {tmp_path / 'store'}" in r.stderr
    assert "there is no index to search yet" in r.stderr and "MEMSIFT_STATE_DIR" in r.stderr


def test_a_note_written_as_a_list_item_is_not_bulleted_twice(tmp_path):
    """Notes are list items ("- 09:41 …"): one typed as a list item was written "- 09:41 - call…"."""
    append_note(tmp_path, "- call the dentist", now=NOW)
    append_note(tmp_path, "* [ ] buy oat milk", now=NOW)
    append_note(tmp_path, "-5 degrees outside tonight", now=NOW)
    lines = (tmp_path / "memory" / "2026-11-22.md").read_text().splitlines()[2:]
    assert lines == ["- 09:41 call the dentist", "- 09:41 [ ] buy oat milk", "- 09:41 -5 degrees outside tonight"]


def _cli_at_0941(tmp_path):
    """(a new workspace, the environment, the CLI's command line for it) on 2026-11-22 at 09:41."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update(MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "x"), MEMSIFT_NO_RESIDENT="1",
               MEMSIFT_NOW="2026-11-22T09:41:00+00:00")
    return ws, env, [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws)]


def test_text_that_starts_with_a_dash_is_told_how_to_pass_it(tmp_path):
    """`memsift note "- call the dentist"` and `memsift search "-5 degrees"` ended in click's "No
    such option '- '" alone; the error now gives the command that works."""
    ws, env, cli = _cli_at_0941(tmp_path)
    for args, hint in ((["note", "- call the dentist"], "memsift note -- '- call the dentist'"),
                       (["search", "-5 degrees outside"], "memsift search -- '-5 degrees outside'"),
                       (["note", "---"], "memsift note -- ---")):  # a Markdown rule
        r = subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and hint in r.stderr, r.stderr
    r = subprocess.run([*cli, "search", "--jsn", "x"], env=env, capture_output=True, text=True, timeout=300)
    assert "Did you mean" in r.stderr and "goes after" not in r.stderr  # a mistyped option stays one
    r = subprocess.run([*cli, "note", "--", "- call the dentist"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert (ws / "memory" / "2026-11-22.md").read_text().endswith("- 09:41 call the dentist\n")


def test_a_note_piped_in_with_a_dash_is_read_from_stdin(tmp_path):
    """`pbpaste | memsift note -` wrote a note reading "-"; a missing TEXT said click's "Missing
    argument 'TEXT'." alone. The dash reads stdin; nothing, or too much, is a clear error."""
    ws, env, cli = _cli_at_0941(tmp_path)
    log = ws / "memory" / "2026-11-22.md"
    r = subprocess.run([*cli, "note", "-"], input=b"the spare key is \xffunder the pot\nsecond line\n", env=env,
                       capture_output=True, timeout=300)
    assert r.returncode == 0 and r.stdout.decode().strip() == "memory/2026-11-22.md:3", r.stderr
    assert log.read_text() == "# 2026-11-22\n\n- 09:41 the spare key is \ufffdunder the pot\n  second line\n"
    for args, given in ((["note"], b"ignored: only a dash reads stdin"), (["note", "-"], b"  \n"),
                        (["note", "-"], b"x" * (2 << 20))):
        r = subprocess.run([*cli, *args], input=given, env=env, capture_output=True, timeout=300)
        assert r.returncode == 2 and b"Traceback" not in r.stderr, r.stderr
        assert b"memsift note -" in r.stderr or b"at most 1 MiB" in r.stderr, r.stderr
    assert log.read_text().count("\n- ") == 1  # nothing else was written
    found = subprocess.run([*cli, "search", "spare key", "--mode", "keyword", "--json"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert [h["path"] for h in json.loads(found.stdout)["results"]] == ["memory/2026-11-22.md"]


def test_names_other_tools_give_are_answered_with_memsifts(tmp_path):
    """`memsift query` (QMD's), `memsift help` (git's) and `search --limit` were met with click's nearest
    spelling: "Did you mean 'helpers'?", "'index'?" for `find`, "'--corpus'?" for `--top`, or nothing."""
    ws, env, cli = _cli_at_0941(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=300)

    for args, meant in ((["query", "gate code"], "'memsift search'"),
                        (["vsearch", "gate"], "'memsift search --mode vector'"),
                        (["find", "gate"], "'memsift search'"), (["version"], "'memsift --version'"),
                        (["search", "--limit", "3", "gate"], "'--max-results'"),
                        (["search", "--top=3", "gate"], "'--max-results'"),
                        (["search", "--format", "json", "x"], "'--json'"),
                        (["get", "--vector", "MEMORY.md"], None)):  # `get` has no --mode: click's own words
        r = run(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        if meant:
            assert f"Did you mean {meant}?" in r.stderr, (args, r.stderr)
        else:
            assert "--mode" not in r.stderr, r.stderr
    assert "Did you mean 'search'?" in run("serach", "x").stderr  # a misspelling still gets click's
    shown = run("help", "search")
    assert shown.returncode == 0 and shown.stdout == run("search", "--help").stdout
    assert run("help").stdout == run("--help").stdout
    assert run("help", "helpers", "stop").stdout == run("helpers", "stop", "--help").stdout
    nope = run("help", "nope")
    assert nope.returncode == 2 and "No such command 'nope'" in nope.stderr, nope.stderr


def test_a_note_keeps_no_terminal_codes(tmp_path):
    """`memsift note "$(some command)"` passed a command's colours along: ESC sequences and a bell
    were written into the log, so `cat`ting it recoloured the terminal (and its title) while no
    search matched them. The note keeps its text, tabs and line breaks."""
    ws, env, cli = _cli_at_0941(tmp_path)
    text = "\x1b]0;pwned\x07\x1b[1;31mdeploy failed\x1b[0m:\tdisk full\x07\nretry at 10:00\x08"
    r = subprocess.run([*cli, "note", text], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    log = (ws / "memory" / "2026-11-22.md").read_text()
    assert log.endswith("- 09:41 deploy failed:\tdisk full\n  retry at 10:00\n"), repr(log)
    r = subprocess.run([*cli, "search", "deploy failed disk full", "--mode", "keyword", "--json"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert "deploy failed:\tdisk full" in json.loads(r.stdout)["results"][0]["snippet"], r.stdout[-2000:]


# A log as Windows writes it: PowerShell 5's `>` (UTF-16 with its mark), Notepad (CRLF), PowerShell's
# `-Encoding utf8` (a UTF-8 mark). `memsift note` appended UTF-8 with "\n" to each: the UTF-16 log
# became garbage past its old end for every reader (memsift's too), and the others mixed line breaks.
WINDOWS_LOGS = [
    ("utf-16", "# 2026-11-22\r\n\r\n- 08:00 the walrus budget was approved\r\n", "\r\n"),
    ("utf-16-be-marked", "# 2026-11-22\r\n- 08:00 no line break at the end", "\r\n"),
    ("utf-8", "# 2026-11-22\r\n\r\n- 08:00 the walrus budget was approved\r\n", "\r\n"),
    ("utf-8-sig", "# 2026-11-22\n- 08:00 the walrus budget was approved\n", "\n"),
]


@pytest.mark.parametrize(("encoding", "before", "newline"), WINDOWS_LOGS)
def test_a_note_is_written_as_the_log_it_joins_is(tmp_path, encoding, before, newline):
    log = tmp_path / "memory" / "2026-11-22.md"
    log.parent.mkdir()
    raw = b"\xfe\xff" + before.encode("utf-16-be") if encoding == "utf-16-be-marked" else before.encode(encoding)
    log.write_bytes(raw)
    old_lines = before.count("\n") + (0 if before.endswith("\n") else 1)
    assert append_note(tmp_path, "Ç bought oat milk\nand tea", now=NOW) == ("memory/2026-11-22.md", old_lines + 1)
    after = log.read_bytes()
    assert after.startswith(raw)  # nothing before the note rewritten
    text = after.decode({"utf-16-be-marked": "utf-16"}.get(encoding, encoding))  # strict: no garbage anywhere
    joined = before if before.endswith("\n") else before + newline
    assert text == joined + f"- 09:41 Ç bought oat milk{newline}  and tea{newline}"


def test_a_note_in_a_utf16_log_is_found_and_read_back_through_the_cli(tmp_path):
    from memsift.engine.testing.doors import run_cli

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-22.md").write_bytes("# 2026-11-22\r\n\r\n- 08:00 the walrus budget\r\n".encode("utf-16"))
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws)}}}))
    done = run_cli(tmp_path, cfg, "note", "the gannet survey moves to Thursday", "--json",
                   MEMSIFT_NOW="2026-11-22T09:41")
    written = json.loads(done.stdout)
    assert (written["path"], written["line"]) == ("memory/2026-11-22.md", 4), done.stdout
    found = json.loads(run_cli(tmp_path, cfg, "search", "gannet survey", "--json").stdout)["results"]
    assert found and found[0]["path"] == "memory/2026-11-22.md" and "09:41 the gannet survey" in found[0]["snippet"]
    got = json.loads(run_cli(tmp_path, cfg, "get", "memory/2026-11-22.md", "--from", "4", "--lines", "1",
                             "--json").stdout)
    assert got["text"] == "- 09:41 the gannet survey moves to Thursday\r"  # its lines, as the index cites them
