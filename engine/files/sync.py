"""What every backend's sync does with the files on disk before it stores anything: read a
Markdown file safely into chunks and their days, and sort the files into changed, touched only
(same bytes, new mtime) and unchanged against what the index holds.

A file is unchanged when its mtime and size are as recorded, without being read. That fails for a
file read in the same tick of its filesystem's clock as it was last written (2 s on FAT, 1 s on
HFS+ and some network shares, a few ms on ext4): rewritten to the same size within that tick, it
keeps both, and the edit would never be indexed. So a file read that soon after its last write
(within RACY_WINDOW_NS of a whole-second mtime, FINE_RACY_WINDOW_NS of another) is recorded with
its mtime 1 ns early: the next sync reads it again and compares its bytes (git's "racily clean"
entries). Status and stale flags take such a record as matching. A file dated more than
DATED_AHEAD_NS ahead of this clock by `touch -d`, tar or rsync (its mtime set apart from its ctime,
which the kernel sets) is recorded as it is: else every sync would read a copied-in tree again for
as long as its dates are ahead, and a later write takes the clock's time anyway.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

from .chunking import Chunk, chunk_text, split_for_input_limit
from .discovery import MemoryFile, Skipped, decode_note, is_utf16_note
from .multimodal import label_for, multimodal_hash, sniff_mime
from .note_dates import ChunkDay, chunk_days

__all__ = [
    "MAX_MARKDOWN_BYTES",
    "MarkdownRead",
    "MediaRead",
    "read_regular",
    "read_markdown",
    "markdown_bytes",
    "skip_reason",
    "pending_changes",
    "read_transcript",
    "session_days_key",
    "read_media",
    "FileSort",
    "sort_files",
    "stamp_matches",
    "as_recorded",
    "RACY_WINDOW_NS",
    "FINE_RACY_WINDOW_NS",
]

MAX_MARKDOWN_BYTES = 16 * 2**20
# How long after a write a file's clock may still be in the same tick: a whole-second mtime comes
# from a coarse clock (FAT: 2 s, HFS+: 1 s); others tick in at most a jiffy (10 ms at HZ=100).
RACY_WINDOW_NS = 2_000_000_000
FINE_RACY_WINDOW_NS = 50_000_000
DATED_AHEAD_NS = 5 * 60 * 10**9  # a clock minutes apart (a synced folder) stays racy; days ahead, set by hand, not
_STAT_EXTRA = ("st_atime", "st_mtime", "st_ctime", "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_blksize",
               "st_blocks", "st_rdev", "st_flags")

P = TypeVar("P")


@dataclass
class MarkdownRead:
    hash: str  # sha256 of the file's bytes
    chunks: list[Chunk]
    days: list[ChunkDay]  # each chunk's day (engine/files/note_dates.py)


def read_regular(f: MemoryFile, st: os.stat_result, skipped: list[Skipped], head: int | None = None) -> bytes | None:
    """The file's bytes, read without following a symlink or blocking on a fifo or device
    swapped in since discovery, and never more than MAX_MARKDOWN_BYTES (`head`: its first bytes only)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(f.abs_path, flags)
    except OSError as exc:
        skipped.append(Skipped(f.rel_path, f"cannot read: {exc.strerror}"))
        return None
    now = os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        skipped.append(Skipped(f.rel_path, "replaced while being indexed (not the file discovered)"))
        return None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(head if head is not None else MAX_MARKDOWN_BYTES + 1)
    if head is None and len(data) > MAX_MARKDOWN_BYTES:
        skipped.append(Skipped(f.rel_path, f"larger than {MAX_MARKDOWN_BYTES // 2**20} MiB (grew while being read)"))
        return None
    return data


def markdown_bytes(f: MemoryFile, st: os.stat_result, skipped: list[Skipped], head: int | None = None
                   ) -> bytes | None:
    """A Markdown file's bytes (`head`: its first bytes only), or None with the reason a sync skips
    it added to `skipped`."""
    if st.st_size > MAX_MARKDOWN_BYTES:
        skipped.append(Skipped(f.rel_path, f"larger than {MAX_MARKDOWN_BYTES // 2**20} MiB ({st.st_size} bytes)"))
        return None
    data = read_regular(f, st, skipped, head)
    if data is not None and b"\x00" in data and not is_utf16_note(data):
        skipped.append(Skipped(f.rel_path, "binary content (NUL bytes)"))
        return None
    return data


_JUDGED_BYTES = 2**16  # a binary file shows a NUL early; status judges many files, and reads only this


def skip_reason(f: MemoryFile) -> str | None:
    """Why a sync would skip this Markdown file, judged now from its size and first bytes; None when
    it would not (or it is an image or audio file, which have their own rules)."""
    if f.modality is not None:
        return None
    try:
        st = os.lstat(f.abs_path)
    except OSError:
        return None
    skipped: list[Skipped] = []
    markdown_bytes(f, st, skipped, head=_JUDGED_BYTES)
    return skipped[0].reason if skipped else None


def pending_changes(files: Sequence[MemoryFile], known: Mapping[str, tuple[int, int]], reasons: Mapping[str, str],
                    judge: Callable[[MemoryFile], str | None] | None = None) -> tuple[int, list[dict[str, str]]]:
    """Status's `pendingChanges` and `skipped`: the memory files added, removed or modified since they
    were indexed (by mtime and size: what a search's sync takes), and the files skipped on purpose,
    which are no change however long they stay. `known`: the indexed memory files (path → (mtime_ns,
    size)); `reasons`: the skipped files with why (a sync's record, discovery's); `judge`: why a file
    the index lacks would be skipped (`skip_reason`), for a backend that keeps no record of it."""
    reasons = dict(reasons)
    left = dict(known)
    changed = 0
    for f in files:
        if f.rel_path not in left:
            if f.rel_path not in reasons and judge is not None and (why := judge(f)) is not None:
                reasons[f.rel_path] = why
            if f.rel_path in reasons:
                continue
        try:
            st = os.lstat(f.abs_path)
        except OSError:
            continue
        recorded = left.pop(f.rel_path, None)
        if recorded is None or not stamp_matches(recorded[0], recorded[1], st):
            changed += 1
    return changed + len(left), [{"path": p, "reason": r} for p, r in reasons.items()]


def read_markdown(
    f: MemoryFile,
    st: os.stat_result,
    skipped: list[Skipped],
    *,
    strategy: str,
    tokens: int,
    overlap: int,
    max_input_bytes: int | None = None,
) -> MarkdownRead | None:
    """A Markdown file as chunks and days, or None with the reason added to `skipped`."""
    data = markdown_bytes(f, st, skipped)
    if data is None:
        return None
    text = decode_note(data)
    chunks = chunk_text(text, strategy=strategy, tokens=tokens, overlap=overlap)
    if max_input_bytes:
        chunks = split_for_input_limit(chunks, max_input_bytes)
    return MarkdownRead(hashlib.sha256(data).hexdigest(), chunks, chunk_days(f.rel_path, text, chunks))


def read_transcript(f: MemoryFile, skipped: list[Skipped], *, strategy: str, tokens: int, overlap: int,
                    max_input_bytes: int | None = None, zone: str | None = None) -> MarkdownRead | None:
    """A JSONL session transcript as `User:` / `Assistant:` chunks whose line ranges point at its
    JSONL lines, each dated by its first message's timestamp, on the user's day (`zone`, an IANA
    name; None: this machine's); None with the reason in `skipped`. The hash covers the flattened
    text and its line and time maps (what the chunks are made of); an index records the zone
    (`session_days_key`)."""
    from ..config.zones import wall_clock  # noqa: PLC0415
    from .transcripts import flatten_transcript  # noqa: PLC0415

    try:
        with open(f.abs_path, encoding="utf-8", errors="replace") as fh:
            t = flatten_transcript(fh, zone)  # line by line: never the whole file in memory
    except OSError as exc:
        skipped.append(Skipped(f.rel_path, f"cannot read: {exc.strerror}"))
        return None
    digest = hashlib.sha256(
        (t.text + "\n" + ",".join(map(str, t.line_map)) + "\n" + ",".join(map(str, t.timestamps))).encode()
    ).hexdigest()
    chunks, days = [], []
    for c in chunk_text(t.text, strategy=strategy, tokens=tokens, overlap=overlap):
        first = min(c.start_line, len(t.line_map)) - 1
        chunks.append(Chunk(t.line_map[first], t.line_map[min(c.end_line, len(t.line_map)) - 1], c.text, c.hash))
        stamp = t.timestamps[first] if first < len(t.timestamps) else 0.0
        day = wall_clock(stamp, zone).date().isoformat() if stamp > 0 else None
        days.append(ChunkDay(day, "timestamp", (day,)) if day else ChunkDay(None, None))
    if max_input_bytes:
        chunks = split_for_input_limit(chunks, max_input_bytes)
        days = []  # pieces no longer line up with the days; a transcript then reads as undated
    return MarkdownRead(digest, chunks, days)


@dataclass
class FileSort(Generic[P]):
    changed: list[P]  # read, to be stored
    touched: list[tuple[MemoryFile, int, int]]  # same bytes, new (mtime_ns, size): only the record moves
    unchanged: int


def sort_files(files: Sequence[MemoryFile], known: Mapping[str, Sequence[Any]], skipped: list[Skipped],
               read: Callable[[MemoryFile, os.stat_result], P | None], hash_of: Callable[[P], str],
               each: Callable[[int], None] | None = None) -> FileSort[P]:
    """`known`: path → (hash, mtime_ns, size, …) as indexed. A file whose mtime and size match is
    unchanged without being read; one whose bytes hash the same is only touched. `each(n)` runs
    before the n-th file (progress, cancellation)."""
    out: FileSort[P] = FileSort([], [], 0)
    for n, f in enumerate(files):
        if each is not None:
            each(n)
        prev = known.get(f.rel_path)
        if prev and f.walked is not None and f.walked == (prev[1], prev[2]):  # the walk's stat
            out.unchanged += 1
            continue
        try:
            st = os.lstat(f.abs_path)  # a fresh one right before the read
        except OSError as exc:
            skipped.append(Skipped(f.rel_path, f"vanished during sync: {exc.strerror}"))
            continue
        if prev and prev[1] == st.st_mtime_ns and prev[2] == st.st_size:
            out.unchanged += 1
            continue
        st = as_recorded(st, time.time_ns())
        pending = read(f, st)
        if pending is None:
            continue
        if prev and prev[0] == hash_of(pending):
            out.touched.append((f, st.st_mtime_ns, st.st_size))
            out.unchanged += 1
            continue
        out.changed.append(pending)
    return out


def as_recorded(st: os.stat_result, read_at_ns: int) -> os.stat_result:
    """The stat a sync records for a file it reads at `read_at_ns`: as it is, or with its mtime 1 ns
    early when its clock's tick may not be over (written less than the window before, or dated
    ahead of this clock by a write), so that the next sync reads it again (see the module's docstring)."""
    window = RACY_WINDOW_NS if st.st_mtime_ns % 1_000_000_000 == 0 else FINE_RACY_WINDOW_NS
    if read_at_ns - st.st_mtime_ns >= window:
        return st
    if st.st_mtime_ns - read_at_ns > DATED_AHEAD_NS and abs(st.st_mtime_ns - st.st_ctime_ns) >= window:
        return st  # dated ahead by whoever set it (a write sets both): a later write takes the clock's time
    extra = {name: getattr(st, name) for name in _STAT_EXTRA if hasattr(st, name)}
    extra["st_mtime_ns"] = st.st_mtime_ns - 1
    return os.stat_result(tuple(st), extra)


def stamp_matches(recorded_mtime_ns: int, recorded_size: int, st: os.stat_result) -> bool:
    """Whether a file's stat is the one recorded for it, a record made 1 ns early included (status,
    stale flags; a sync compares exactly, and so reads such a file again)."""
    return st.st_size == recorded_size and st.st_mtime_ns - recorded_mtime_ns in (0, 1)


class MediaRead:
    """An image or audio file read for indexing: its hash, its one chunk's label (the text a hit
    shows) and the bytes and type a multimodal provider embeds."""

    __slots__ = ("hash", "label", "mime", "data")

    def __init__(self, digest: str, label: str, mime: str, data: bytes) -> None:
        self.hash, self.label, self.mime, self.data = digest, label, mime, data


def read_media(f: MemoryFile, st: os.stat_result, skipped: list[Skipped], max_bytes: int) -> MediaRead | None:
    """`f` (a MemoryFile of an image or audio file) as a MediaRead, or None with the reason added
    to `skipped`: over `maxFileBytes`, unreadable, changed while read, or not what its name says."""
    rel, modality, size = f.rel_path, f.modality or "", st.st_size
    if size > max_bytes:
        skipped.append(Skipped(rel, f"{modality} file over multimodal.maxFileBytes ({size} > {max_bytes})"))
        return None
    try:
        with open(f.abs_path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        skipped.append(Skipped(rel, f"cannot read: {exc.strerror}"))
        return None
    if len(data) != size:
        skipped.append(Skipped(rel, "changed while being indexed"))
        return None
    mime = sniff_mime(data[:512])
    if mime is None or not mime.startswith(modality):
        skipped.append(Skipped(rel, f"content is not {modality} (sniffed {mime or 'unknown'})"))
        return None
    label = label_for(modality, rel)
    return MediaRead(multimodal_hash(rel, label, mime, data), label, mime, data)


def session_days_key(ms: Any) -> dict[str, str]:
    """The index fingerprint's record of the zone session transcripts are dated in (their days are
    stored): another zone re-dates them by a rebuild. Only where transcripts are a source, so no
    other index is rebuilt for it."""
    return {"sessionDays": ms.query.time.timezone or "local"} if "sessions" in ms.sources else {}
