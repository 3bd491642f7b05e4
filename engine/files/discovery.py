"""Finding the memory files on disk (discovery, for indexing) and reading one safely.

Memory files are `MEMORY.md`, `memory.md`, `memory/**/*.md` and the `.md` files of `extraPaths`,
outside the folders below them that hold no memory (`IGNORED_DIRS`). Symlinks are never followed,
anywhere on the way, and only regular files count. Which paths a
read or a hit may name is decided in `rules.py`; the file is then opened here with
`O_NOFOLLOW | O_NONBLOCK` and streamed, so a fifo never blocks and one line of a 200 MB file costs
one line of memory.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import stat
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

from ..errors import PathNotAllowedError
from .multimodal import modality_of

__all__ = ["MemoryFile", "Skipped", "IGNORED_DIRS", "ignored_dir", "ignored_file", "discover_memory_files",
           "open_memory_file", "read_open_file", "ROOT_FILES", "READABLE_ROOT_FILES", "skip_units", "line_range",
           "decode_note", "is_utf16_note", "UTF16_CODECS"]

ROOT_FILES = ("MEMORY.md", "memory.md")
READABLE_ROOT_FILES = ("MEMORY.md", "memory.md", "DREAMS.md")
# Folders below a memory root that hold no memory: tools' folders (the watcher's list, the reference's)
# and the old versions and deleted notes that sync tools, note apps and editors keep beside the notes
# (Syncthing's .stversions, Resilio's .sync, Dropbox's .dropbox.cache, Obsidian's .trash, Logseq's
# .recycle, VS Code's Local History .history, the desktop's and macOS's trash). Indexed, a stale copy
# answered "what is the gate code?" ahead of the note itself.
IGNORED_DIRS = frozenset({".git", "node_modules", ".pnpm-store", ".venv", "venv", ".tox", "__pycache__",
                          ".stversions", ".sync", ".dropbox.cache", ".trash", ".Trash", ".Trashes", ".recycle",
                          ".history"})


def ignored_dir(name: str) -> bool:
    """Whether a folder of this name, below a memory root, is left out (`.Trash-1000`: a drive's trash)."""
    return name in IGNORED_DIRS or name.startswith(".Trash-")


# macOS's iCloud Drive, with "Optimize Mac Storage", replaces a note it moved off the Mac by a hidden
# placeholder (`notes.md` → `.notes.md.icloud`): the note is then no file here, and no search finds it.
_ICLOUD_PLACEHOLDER = ".icloud"


def _icloud_note(name: str) -> str | None:
    """The note's name when `name` is iCloud Drive's placeholder of a Markdown file, else None."""
    if name.startswith(".") and name.endswith(_ICLOUD_PLACEHOLDER):
        note = name[1:-len(_ICLOUD_PLACEHOLDER)]
        return note if _is_md(note) else None
    return None


def _icloud_skipped(rel: str, placeholder: str) -> Skipped:
    return Skipped(rel, f"in iCloud Drive, not downloaded to this Mac (only its placeholder {placeholder} is "
                        "here): open it, or run `brctl download` on it, to search it")


def ignored_file(name: str) -> bool:
    """Whether a file of this name, below a memory root, is left out: macOS's AppleDouble companions
    (`._2026-11-02.md`, the Finder's metadata on a network share, exFAT or FAT drive), binary, one
    beside every note; skipped as binary, they filled status's "Skipped" list."""
    return name.startswith("._")


@dataclass(slots=True)  # not frozen: a frozen init costs 4 ms per 10,000 files on every sync
class MemoryFile:
    abs_path: str  # a plain string: discovery makes one per file on every sync, and Path() is slow
    rel_path: str  # workspace-relative, "/" separators; may start with "../" for extra paths
    source: str = "memory"
    modality: str | None = None  # "image" / "audio" for multimodal files, None for Markdown
    # (mtime_ns, size) as the walk saw them: enough to tell an unchanged file, so the freshness
    # check before a search stats each file once. A changed file is stat'ed again to be read.
    walked: tuple[int, int] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str

    def __post_init__(self) -> None:
        if not _utf8_name(self.path):  # shown in status and --json: keep it printable
            object.__setattr__(self, "path", _printable(self.path))


def _rel(workspace: Path, p: Path) -> str:
    return Path(os.path.relpath(p, workspace)).as_posix()


def _utf8_name(name: str) -> bool:
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:  # undecodable bytes in a file name arrive as lone surrogates
        return False


def _printable(name: str) -> str:
    return os.fsencode(name).decode("utf-8", "replace")


def _is_md(name: str) -> bool:
    return name.endswith(".md") or name[-3:].lower() == ".md"


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _walk_md(root: str, skipped: list[Skipped], workspace: Path,
             extra_ext: tuple[str, ...] = ()) -> list[tuple[str, str, int, int]]:
    """Regular `.md` files (and `extra_ext` files) under `root`, recursively, never entering or
    returning symlinks: (absolute path, "/"-separated path below root, mtime_ns, size) each.

    This runs over every file before every search that checks freshness, so it is lean: paths
    stay strings, and the stat every candidate needs (to tell an unchanged file without reading
    it) is taken here, once, through the directory's descriptor, and also tells symlinks,
    folders and fifos apart."""
    out: list[tuple[str, str, int, int]] = []
    stack = [(root, "")]
    while stack:
        d, below = stack.pop()
        try:
            fd = os.open(d, _DIR_FLAGS)
        except OSError as exc:
            skipped.append(Skipped(_rel(workspace, Path(d)), f"cannot list directory: {exc.strerror}"))
            continue
        try:
            entries = list(os.scandir(fd))  # in the disk's order: the caller sorts what it keeps
            prefix = d + os.sep
            for e in entries:
                name = e.name
                try:
                    if _is_md(name) or (extra_ext and name.lower().endswith(extra_ext)):
                        if ignored_file(name):
                            continue
                        st = e.stat(follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode):
                            out.append((prefix + name, below + name, st.st_mtime_ns, st.st_size))
                        elif stat.S_ISDIR(st.st_mode):
                            if not ignored_dir(name):
                                stack.append((prefix + name, below + name + "/"))
                        elif stat.S_ISLNK(st.st_mode):
                            skipped.append(Skipped(_rel(workspace, Path(prefix + name)), "symlink (not followed)"))
                        else:
                            skipped.append(Skipped(_rel(workspace, Path(prefix + name)), "not a regular file"))
                    elif e.is_dir(follow_symlinks=False):
                        if not ignored_dir(name):
                            stack.append((prefix + name, below + name + "/"))
                    elif (note := _icloud_note(name)) is not None:
                        skipped.append(_icloud_skipped(_rel(workspace, Path(prefix + note)), name))
                    elif e.is_symlink() and e.is_dir():
                        skipped.append(Skipped(_rel(workspace, Path(prefix + name)), "symlink (not followed)"))
                except OSError as exc:
                    skipped.append(Skipped(_rel(workspace, Path(prefix + name)), f"cannot stat: {exc.strerror}"))
        except OSError as exc:
            skipped.append(Skipped(_rel(workspace, Path(d)), f"cannot list directory: {exc.strerror}"))
        finally:
            os.close(fd)
    return out


def linked_root_skipped(rel: str, link: Path) -> Skipped:
    """A symlinked `MEMORY.md`, `memory/` or extra path, skipped (as the reference does: a link could
    lead anywhere), with what to do: name what it points to as an extra path, which is read."""
    target = os.path.realpath(link)
    if not os.path.exists(target):
        return Skipped(rel, f"symlink (not followed), to {target}, which does not exist")
    return Skipped(rel, f"symlink (not followed): to search it, add what it points to, {target}, to "
                        "memorySearch.extraPaths")


def _lstat(p: Path) -> os.stat_result | None:
    try:
        return os.lstat(p)
    except OSError:
        return None


def _extra_roots(workspace: Path, extra_paths: list[str] | tuple[str, ...]) -> list[Path]:
    roots = []
    for raw in extra_paths:
        p = Path(raw).expanduser()
        p = p if p.is_absolute() else workspace / p
        roots.append(Path(os.path.normpath(p)))
    return roots


def discover_memory_files(
    workspace: Path, extra_paths: list[str] | tuple[str, ...] = (), multimodal_ext: tuple[str, ...] = ()
) -> tuple[list[MemoryFile], list[Skipped]]:
    """All memory files, de-duplicated by real path, plus what was skipped and why.

    `multimodal_ext` (image/audio extensions) applies to extra paths only: the memory folder
    never yields multimodal files."""
    skipped: list[Skipped] = []
    files: list[MemoryFile] = []
    seen: set[str] = set()  # real paths: the first found wins

    def keep(p: str, rel: str, key: str, walked: tuple[int, int], maybe_media: bool) -> None:
        if not (rel.isascii() or _utf8_name(rel)):
            # SQLite, JSON and MCP all need UTF-8; such a name would break every sync.
            skipped.append(Skipped(rel, "file name is not valid UTF-8"))
        elif key not in seen:
            seen.add(key)
            modality = modality_of(os.path.basename(p)) if maybe_media and not _is_md(p) else None
            files.append(MemoryFile(p, rel, "memory", modality, walked))

    def add_one(p: Path, st: os.stat_result) -> None:
        keep(str(p), _rel(workspace, p), os.path.realpath(p), (st.st_mtime_ns, st.st_size), True)

    def add_tree(root: Path, ext: tuple[str, ...] = ()) -> None:
        # The walk never enters a symlink, so a file's real and relative paths are its root's
        # plus the part below the root: no realpath() (8 lstat calls) and no relpath() per file.
        real_root, rel_root = os.path.realpath(root) + os.sep, _rel(workspace, root)
        rel_prefix = "" if rel_root == "." else rel_root + "/"
        found = _walk_md(str(root), skipped, workspace, ext)
        found.sort()  # by path: duplicates resolve alike (the first found wins), whatever the disk's order
        for p, below, mtime_ns, size in found:
            keep(p, rel_prefix + below, real_root + below, (mtime_ns, size), bool(ext))

    for name in ROOT_FILES:
        p = workspace / name
        st = _lstat(p)
        if st is None:
            if _lstat(workspace / f".{name}{_ICLOUD_PLACEHOLDER}") is not None:
                skipped.append(_icloud_skipped(name, f".{name}{_ICLOUD_PLACEHOLDER}"))
            continue
        if stat.S_ISLNK(st.st_mode):
            skipped.append(linked_root_skipped(name, p))
        elif stat.S_ISREG(st.st_mode):
            add_one(p, st)
    mem_dir = workspace / "memory"
    st = _lstat(mem_dir)
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            skipped.append(linked_root_skipped("memory", mem_dir))
        elif stat.S_ISDIR(st.st_mode):
            add_tree(mem_dir)
    for root in _extra_roots(workspace, extra_paths):
        st = _lstat(root)
        if st is None:
            continue
        if stat.S_ISLNK(st.st_mode):
            skipped.append(linked_root_skipped(_rel(workspace, root), root))
        elif stat.S_ISDIR(st.st_mode):
            add_tree(root, multimodal_ext)
        elif stat.S_ISREG(st.st_mode) and (
            _is_md(root.name) or (multimodal_ext and root.name.lower().endswith(multimodal_ext))
        ):
            add_one(root, st)
        else:
            skipped.append(Skipped(_rel(workspace, root), "not a .md file or directory"))
    files.sort(key=attrgetter("rel_path"))
    return files, skipped


def open_memory_file(abs_path: Path, shown: Any) -> int | None:
    """An open file descriptor of a regular file, never through a symlink and never blocking on
    a fifo; None when the file does not exist (it reads as empty)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(abs_path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathNotAllowedError(shown, "symlinks are not followed") from None
        if exc.errno in (errno.ENOTDIR,):
            return None
        raise PathNotAllowedError(shown, f"cannot open: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses directories
        os.close(fd)
        raise PathNotAllowedError(shown, "not a regular file")
    return fd


UTF16_CODECS = {codecs.BOM_UTF16_LE: "utf-16-le", codecs.BOM_UTF16_BE: "utf-16-be"}  # byte-order mark → codec


def is_utf16_note(head: bytes) -> bool:
    """A note saved as UTF-16 with its byte-order mark (Windows PowerShell 5's `>` and `Out-File`
    write notes so, and Notepad's "UTF-16"): read as text, not skipped for its NUL bytes."""
    return head[:2] in UTF16_CODECS


def decode_note(data: bytes) -> str:
    """A note's text, as the index and every read see it: UTF-8 (undecodable bytes shown as U+FFFD,
    as the reference reads them) without a leading byte-order mark (PowerShell 5's `-Encoding utf8`
    and old Notepad write one: kept, it hid a first line's `# 2026-11-02` date and showed in
    snippets), or UTF-16 after its byte-order mark."""
    if is_utf16_note(data):
        return data.decode("utf-16", errors="replace")  # the BOM says the order, and is dropped
    return data.decode("utf-8-sig", errors="replace")


def read_open_file(fd: int, from_line: int | None = None, lines: int | None = None,
                   max_chars: int | None = None, offset: int = 0) -> tuple[str, int, bool]:
    """Lines `from_line`.. (`lines` of them, else to the end) of an open file: (text, the file's
    total number of lines, whether the text was cut at `max_chars` characters). `offset` skips
    that many characters (UTF-16 units, as MCP counts them) of the first line. A UTF-8 file is
    streamed: whatever the offset and the file's size, at most `max_chars` characters are kept
    (a UTF-16 note is decoded whole first, as the index reads it)."""
    start, count, skip = line_range(from_line, lines, offset)
    with os.fdopen(fd, "rb") as fh:
        if is_utf16_note(os.pread(fh.fileno(), 2, 0)):
            return _read_text(io.BytesIO(decode_note(fh.read()).encode("utf-8", "surrogatepass")), start, count,
                              max_chars, skip)
        return _read_text(fh, start, count, max_chars, skip)


def line_range(from_line: int | None, lines: int | None, offset: int | None) -> tuple[int, int | None, int]:
    """A read's (first line, how many or None for the rest, UTF-16 units skipped of the first line),
    each at least what it can be."""
    return max(1, int(from_line or 1)), max(1, int(lines)) if lines is not None else None, max(0, int(offset or 0))


_BLOCK = 2**20


def skip_units(text: str, units: int) -> tuple[str, int]:
    """`text` without its first `units` UTF-16 units (never half a character), and the units left."""
    if text.isascii():
        return text[units:], max(0, units - len(text))
    data = text.encode("utf-16-le", "surrogatepass")
    if units * 2 >= len(data):
        return "", units - len(data) // 2
    cut = units * 2
    if 0xDC00 <= int.from_bytes(data[cut:cut + 2], "little") <= 0xDFFF:
        cut -= 2  # inside a surrogate pair: keep the whole character
    return data[cut:].decode("utf-16-le", "surrogatepass"), 0


def _read_text(fh: Any, start: int, count: int | None, max_chars: int | None, skip: int) -> tuple[str, int, bool]:
    """Lines `start`..`start+count-1` (1-based, joined by "\n", as `text.split("\n")` numbers
    them), the total number of lines (a final newline ends the last line, it does not start
    another; an empty file has none) and whether the text was cut at `max_chars`."""
    end = None if count is None else start + count  # first line not wanted
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parts: list[str] = []
    kept, cut = 0, False
    line = 1  # number of the line the next byte belongs to
    last = b""  # the file's last byte

    def keep(text: str) -> None:
        nonlocal kept, cut, skip
        if skip and line == start:
            text, skip = skip_units(text, skip)
        if not text:
            return
        if max_chars is not None and kept + len(text) > max_chars:
            text, cut = text[: max_chars - kept], True
        parts.append(text)
        kept += len(text)

    first_block = True
    while block := fh.read(_BLOCK):
        pos = len(codecs.BOM_UTF8) if first_block and block.startswith(codecs.BOM_UTF8) else 0  # as decode_note
        first_block = False
        last = block[-1:] if pos < len(block) else last
        while pos < len(block):
            nl = block.find(b"\n", pos)
            stop = len(block) if nl < 0 else nl
            if line >= start and (end is None or line < end) and not cut:
                keep(decoder.decode(block[pos:stop]))
                if nl >= 0:
                    keep(decoder.decode(b"", final=True))  # a character cut at the line's end
                    decoder.reset()
                    if (end is None or line + 1 < end) and not cut:
                        keep("\n")
            if nl < 0:
                break
            line += 1
            pos = nl + 1
    if line >= start and (end is None or line < end) and not cut:
        keep(decoder.decode(b"", final=True))
    total = 0 if not last else line - 1 if last == b"\n" else line
    return "".join(parts), total, cut
