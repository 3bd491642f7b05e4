"""A time-only question's notes on the QMD backend ("what did I do yesterday?").

QMD knows no dates, and its BM25 finds nothing once the time words are taken out of such a
question. Its answer is the notes of the named days, which the files themselves say: a daily note
by its name, any other memory file by its dated lines and headings. So the collections' files are
read here, through the memory rules every backend reads by, chunked as the builtin index chunks
them and dated by the same rules (engine/files/note_dates.py); engine/search/time_only.py orders
them. Only files whose name dates them inside a window, and files no name dates (MEMORY.md, extra
paths; at most MAX_UNDATED of them), are read.

`weightless_in_notes` is QMD's answer to "does this word select no notes?" (in most, as a chat
log's two people, or in none): the builtin and Postgres count files in their indexes; here up to
SAMPLE_FILES files, spread over the collections, are read and the share holding the word counted.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Sequence

from memsift.engine.files.chunking import chunk_text
from memsift.engine.files.note_dates import chunk_days, file_name_day
from memsift.engine.files.rules import MemoryCollection, glob_matches
from memsift.engine.search.ranking import Candidate
from memsift.engine.search.time_only import is_weightless
from memsift.engine.search.time_query import TimeWindow

__all__ = ["window_notes", "weightless_in_notes", "MAX_UNDATED", "SAMPLE_FILES"]

MAX_UNDATED = 200  # files without a date in their name read per question (MEMORY.md, extra notes)
SAMPLE_FILES = 200  # files read to judge whether a word is in most notes
_SKIP_DIRS = {".git", "node_modules", ".obsidian", ".trash"}


def _files(c: MemoryCollection) -> list[str]:
    """The collection's files (relative, sorted), symlinks never followed."""
    out = []
    for root, dirs, names in os.walk(c.path, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in names:
            full = Path(root) / name
            if not name.lower().endswith(".md") or full.is_symlink():
                continue
            rel = full.relative_to(c.path).as_posix()
            if glob_matches(c.pattern, rel):
                out.append(rel)
    return sorted(out)


def window_notes(
    collections: Sequence[MemoryCollection],
    windows: Sequence[TimeWindow],
    *,
    shown_path: Callable[[MemoryCollection, str], str | None],
    read_note: Callable[[MemoryCollection, str], str],
    strategy: str,
    tokens: int,
    overlap: int,
) -> list[Candidate]:
    """Chunks of the collections' files that may speak of the windows' days, each with its days
    (the caller filters and orders them by those days)."""

    def named_inside(day: str) -> bool:
        from datetime import date  # noqa: PLC0415

        d = date.fromisoformat(day)
        return any(w.distance_days(d) == 0 for w in windows)

    out: list[Candidate] = []
    undated = 0
    for c in collections:
        if not c.path.is_dir():
            continue
        for rel in _files(c):
            named = file_name_day(rel)
            if named is not None and not named_inside(named):
                continue  # a daily note of another day
            if named is None:
                undated += 1
                if undated > MAX_UNDATED:
                    continue
            shown = shown_path(c, rel)
            text = read_note(c, rel) if shown else ""
            if not text:
                continue
            chunks = chunk_text(text, strategy=strategy, tokens=tokens, overlap=overlap)
            for i, (chunk, day) in enumerate(zip(chunks, chunk_days(shown, text, chunks))):
                if not day.days:
                    continue
                out.append(
                    Candidate(
                        chunk_id=f"{c.name}:{rel}:{i}",
                        path=shown,
                        source="sessions" if c.kind == "sessions" else "memory",
                        start_line=chunk.start_line,
                        end_line=chunk.end_line,
                        text=chunk.text,
                        day=day.day,
                        day_source=day.source,
                    )
                )
    return out


def weightless_in_notes(collections: Sequence[MemoryCollection], words: Sequence[str],
                        read_note: Callable[[MemoryCollection, str], str]) -> set[str]:
    """The words (as word beginnings, case folded) found in COMMON_SHARE of the notes or more, or in none."""
    files = [(c, rel) for c in collections if c.path.is_dir() for rel in _files(c)]
    if not files or not words:
        return set()
    step = max(1, len(files) // SAMPLE_FILES)
    texts = [read_note(c, rel).casefold() for c, rel in files[::step][:SAMPLE_FILES]]
    found = {w: sum(1 for t in texts if re.search(r"\b" + re.escape(w.casefold()), t)) for w in words}
    return {w for w, n in found.items() if is_weightless(n, len(texts))}
