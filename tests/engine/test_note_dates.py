"""The day a chunk speaks of: a line's timestamp, the nearest dated heading, the file name."""

from __future__ import annotations

from memsift.engine.files.chunking import Chunk, chunk_text
from memsift.engine.files.note_dates import ChunkDay, chunk_days, chunk_line_days, date_in_text, day_at, file_name_day


def _days(path: str, text: str) -> list[tuple[int, ChunkDay]]:
    chunks = chunk_text(text, strategy="evidence", tokens=175, overlap=0)
    return [(c.start_line, d) for c, d in zip(chunks, chunk_days(path, text, chunks))]


def test_a_dated_heading_dates_its_section_and_its_subsections():
    lines = [
        "# Notes", "General things with no date.",
        "## 2023-03-02 planning", "Discussed the ledger migration with Sam.",
        "### Follow-ups", "Sam sends the schema draft.",
        "## Ideas", "Try the new queue library.",
    ]
    text = "\n".join(lines) + "\n"
    # One chunk per section, each opening with its heading (as the evidence chunker cuts bigger files).
    chunks = [Chunk(n, n + 1, f"{lines[n - 1]}\n{lines[n]}", "h") for n in (1, 3, 5, 7)]
    days = chunk_days("memory/notes.md", text, chunks)
    assert [d.day for d in days] == [None, "2023-03-02", "2023-03-02", None]
    assert [d.source for d in days] == [None, "heading", "heading", None]
    # A chunk holding two sections is dated by its first line of content.
    assert chunk_days("memory/notes.md", text, [Chunk(1, 4, "\n".join(lines[:4]), "h")])[0].day is None


def test_a_timestamp_opening_a_line_wins_over_heading_and_file_name():
    text = "# 2023-05-08\n\n[2023-05-07 23:50] late note about the deploy window and the rollback plan\n"
    [(_, d)] = _days("memory/2023-05-08.md", text)
    assert (d.day, d.source) == ("2023-05-07", "timestamp")


def test_the_file_name_dates_what_nothing_else_does():
    [(_, d)] = _days("memory/2023-05-08.md", "- shipped the billing export\n")
    assert d == ChunkDay("2023-05-08", "file name", ("2023-05-08",))
    assert file_name_day("sessions/2023-05-08-standup.md") == "2023-05-08"
    assert file_name_day("2023-05-08/notes.md") is None  # a folder's date is not the note's


def test_the_daily_note_names_of_other_tools_date_their_notes():
    named = {
        "journals/2023_05_08.md": "2023-05-08",  # Logseq's journals
        "notes/daily.journal.2023.05.08.md": "2023-05-08",  # Dendron's
        "memory/20230508.md": "2023-05-08",
        "memory/2023/05/08.md": "2023-05-08",  # a year/month/day layout
        "memory/2023/05/08-standup.md": "2023-05-08",
        "memory/12345678.md": None,  # eight digits, no day: an id
        "memory/ref-00231231.md": None,  # a day of the year 23 is no day a note is written
        "memory/2023_05-08.md": None,  # one separator throughout, or none
        "memory/2023/13/01.md": None,
        "memory/2023/05/08/notes.md": None,  # that day's folder, as above
        "roam/May 8th, 2023.md": "2023-05-08",  # Roam's daily pages
        "memory/Monday, 8 May 2023.md": "2023-05-08",
        "memory/Sept. 3, 2023.md": "2023-09-03",
        "memory/mayday 12 2023.md": None,  # a word that starts as a month does is no month
        "memory/May 31st, 2023 notes/x.md": None,  # a folder's day alone, as above
        # A sync tool's conflict copy is dated as its note, not by the conflict's moment its name adds.
        "memory/2023-05-08.sync-conflict-20230510-101010-ABCDEFG.md": "2023-05-08",  # Syncthing
        "memory/projects/shed.sync-conflict-20230510-101010-ABCDEFG.md": None,
        "memory/shed (Jane's conflicted copy 2023-05-10).md": None,  # Dropbox
        "memory/shed (conflicted copy 2023-05-10 101010).md": None,  # Nextcloud
        "memory/shed (Conflicted copy laptop 202305101010).md": None,  # Obsidian Sync
        "memory/2023-05-08 (conflicted copy 2023-05-10).md": "2023-05-08",
        "memory/shed_conflict-20230510-101010.md": None,  # ownCloud
        "memory/2023/05/08.sync-conflict-20230510-101010-ABCDEFG.md": "2023-05-08",
    }
    assert {path: file_name_day(path) for path in named} == named


def test_what_is_not_a_date_dates_nothing():
    assert date_in_text("Release 2.10 notes") is None
    assert date_in_text("build 2023-02-30") is None  # no such day
    assert date_in_text("Monday 8 May 2023 standup") == "2023-05-08"
    assert date_in_text("Standup, May 8th, 2023") == "2023-05-08"
    assert date_in_text("Mayday 12 2023 drill") is None and date_in_text("Marching 3 2023") is None
    text = "```\n# 2023-01-01 not a heading, code\n```\nplain words in the note, no dates around\n"
    assert [d.day for _, d in _days("memory/notes.md", text)] == [None]


def test_a_hit_found_elsewhere_is_dated_by_its_line():
    text = "# 2023-04-10\nfirst\n# 2023-04-11\nsecond\n"
    assert day_at("memory/log.md", text, 4, "second") == ChunkDay("2023-04-11", "heading", ("2023-04-11",))
    assert day_at("memory/log.md", text, 2, "first") == ChunkDay("2023-04-10", "heading", ("2023-04-10",))


def test_a_chunk_speaks_of_every_day_its_lines_do():
    """A MEMORY.md section listing decisions of several days is of all of them (filters and windows
    judge the lines), dated by its first entry; an entry's continuation lines keep its day."""
    text = (
        "# Memory\n\n## Decisions\n\n- 2026-03-18: chose Postgres for the ledger, because\n"
        "  multi-row transactions matter.\n- 2026-09-30: moved the exports to Parquet.\n- keep the deploy window on "
        "Tuesdays\n"
    )
    [(_, d)] = _days("MEMORY.md", text)
    assert (d.day, d.source, d.days) == ("2026-03-18", "timestamp", ("2026-03-18", "2026-09-30"))
    lines = text.split("\n")
    per_line = chunk_line_days("MEMORY.md", "\n".join(lines[:8]), d.day, d.source)
    assert per_line[4:8] == ["2026-03-18", "2026-03-18", "2026-09-30", None]  # the undated entry stays undated
    log = "[2023-05-07 23:50] late note\n- the next morning's entry\n"
    assert chunk_line_days("memory/2023-05-08.md", log, "2023-05-07", "timestamp") == ["2023-05-07", "2023-05-08", None]


def test_a_date_a_sentence_mentions_is_no_timestamp():
    """"  2026-11-30." wrapping a sentence used to date the whole daily log 2026-11-30."""
    text = (
        "# 2026-11-12\n\n- 09:00 met Chen about the pipeline\n- 14:10 Marco rotated the TLS certificates; the old "
        "ones expire on\n"
        "  2026-11-30.\n- 18:00 2026-12-01 is the renewal deadline\n"
    )
    [(_, d)] = _days("memory/2026-11-12.md", text)
    assert (d.day, d.source, d.days) == ("2026-11-12", "heading", ("2026-11-12",))


def test_a_transcripts_iso_timestamps_date_its_messages():
    """OpenClaw writes `"timestamp": "2026-11-20T09:00:00Z"`; numbers (seconds or milliseconds)
    stay as they were; what cannot be read is no date (the file's modification day applies)."""
    import json  # noqa: PLC0415
    from datetime import datetime, timezone  # noqa: PLC0415

    from memsift.engine.files.transcripts import flatten_transcript  # noqa: PLC0415

    def record(ts, text):
        return json.dumps({"type": "message", "timestamp": ts, "message": {"role": "user", "content": text}})

    raw = "\n".join(
        [
            record("2026-11-20T09:00:00Z", "iso with Z"),
            record("2026-11-21T10:00:00+02:00", "with an offset"),
            record(1763629200000, "milliseconds"),
            record("next tuesday", "not a date"),
            record(True, "a bool"),
        ]
    )
    t = flatten_transcript(raw)
    utc = [datetime.fromtimestamp(s, timezone.utc).isoformat() if s else None for s in t.timestamps]
    assert utc == ["2026-11-20T09:00:00+00:00", "2026-11-21T08:00:00+00:00", "2025-11-20T09:00:00+00:00", None, None]
    # A time without an offset is the user's (it was this machine's)
    naive = flatten_transcript(record("2026-11-20T09:00:00", "no offset"), zone="Pacific/Kiritimati")
    assert datetime.fromtimestamp(naive.timestamps[0], timezone.utc).isoformat() == "2026-11-19T19:00:00+00:00"
