"""The durable "remember this" path: append a timestamped line to today's daily log.

`memory/YYYY-MM-DD.md` (local date) is created with a `# YYYY-MM-DD` heading when missing, and
only ever appended to (O_APPEND): existing lines are never rewritten. A note is written as the file
is: in its encoding (a UTF-16 log PowerShell 5 wrote stays UTF-16: UTF-8 bytes appended to it
would turn the note, and the file for any reader, into garbage) and with its line breaks (CRLF for
a log edited on Windows). A symlinked `memory/` or daily file is refused, as everywhere else in
memsift.
"""

from __future__ import annotations

import os
import re
import stat
from datetime import datetime
from pathlib import Path

from ..errors import MemsiftError, PathNotAllowedError
from .discovery import UTF16_CODECS, decode_note

_BULLET = re.compile(r"^[-*+]\s+")  # a Markdown list item's marker
# A terminal's escape sequences (colours, titles, cursor moves: a command's output passed as the
# note) and other control characters but tab: kept, they would recolour the terminal of whoever
# `cat`s the log, and no search matches them.
_TERMINAL_CODES = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])"  # CSI, OSC, two-character
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)

__all__ = ["append_note"]


def _refuse_symlink(path: Path, shown: str) -> None:
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise PathNotAllowedError(shown, "symlinks are not followed")
    except FileNotFoundError:
        pass


def append_note(workspace: Path, text: str, *, now: datetime | None = None) -> tuple[str, int]:
    """Append `text` to the log of `now`'s day (default: today on this machine), stamped with its
    time; return (workspace-relative path, line number of the note)."""
    lines = [ln.rstrip() for ln in _TERMINAL_CODES.sub("", text or "").strip().splitlines()]
    if lines and (unbulleted := _BULLET.sub("", lines[0], count=1)):
        lines[0] = unbulleted  # "- call the dentist": the entry is a list item already ("- 09:30 …")
    if not lines or not lines[0]:
        raise PathNotAllowedError("memory/", "a note needs some text")
    now = now or datetime.now().astimezone()
    day = now.strftime("%Y-%m-%d")
    folder = workspace / "memory"
    rel = f"memory/{day}.md"
    _refuse_symlink(folder, "memory")
    path = folder / f"{day}.md"
    entry = f"- {now.strftime('%H:%M')} {lines[0]}" + "".join(f"\n  {ln}" for ln in lines[1:]) + "\n"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _refuse_symlink(path, rel)
        _append(path, day, entry)
    except OSError as exc:  # a read-only workspace, a full disk, a folder of another user
        raise MemsiftError(
            f"cannot write the note to {rel}: {exc.strerror or exc}; the note was not written. "
            f"Check that {folder} is a folder you can write"
        ) from None
    try:
        with open(path, "rb") as fh:
            total = decode_note(fh.read()).count("\n")
    except OSError as exc:  # a file others may append to but not read
        raise MemsiftError(f"the note was written to {rel}, but the file cannot be read back: {exc.strerror}") from None
    return rel, total - entry.count("\n") + 1


def _append(path: Path, day: str, entry: str) -> None:
    """`entry` at the end of the day's log in one write, after a heading for a new file and a line
    break for a file that lacks its last one, in the file's encoding and line breaks."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "ab") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            fh.write(f"# {day}\n\n{entry}".encode("utf-8"))
            return
        encoding, newline, ends_a_line = _written_as(path, size)
        text = ("" if ends_a_line else "\n") + entry
        fh.write(text.replace("\n", newline).encode(encoding))


def _written_as(path: Path, size: int) -> tuple[str, str, bool]:
    """An existing log's encoding, line break ("\r\n" when its last one is) and whether it ends
    with one, from its first two bytes and its last few KiB."""
    with open(path, "rb") as fh:
        encoding = UTF16_CODECS.get(fh.read(2), "utf-8")
        start = max(0, size - 4096)
        fh.seek(start - start % 2 if encoding != "utf-8" else start)  # a UTF-16 code unit starts at an even byte
        tail = fh.read().decode(encoding, "replace")
    last = tail.rfind("\n")
    return encoding, "\r\n" if last > 0 and tail[last - 1] == "\r" else "\n", tail.endswith("\n")
