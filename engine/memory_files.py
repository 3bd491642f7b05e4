"""Which files are memory, and reading them safely (`memory_get`).

Memory files are `MEMORY.md`, `memory.md`, `memory/**/*.md` and the `.md` files of `extraPaths`.
Symlinks are never followed, anywhere on the way, and only regular files count. Reads are
restricted to exactly those files: `..`, absolute paths elsewhere, symlinks and non-`.md` files
are refused with `PathNotAllowedError`; a memory file that does not exist reads as empty text.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import PathNotAllowedError
from .multimodal import modality_of

__all__ = ["MemoryFile", "Skipped", "discover_memory_files", "resolve_memory_path", "read_memory_file", "ROOT_FILES"]

ROOT_FILES = ("MEMORY.md", "memory.md")
READABLE_ROOT_FILES = ("MEMORY.md", "memory.md", "DREAMS.md")


@dataclass(frozen=True)
class MemoryFile:
    abs_path: str  # a plain string: discovery makes one per file on every sync, and Path() is slow
    rel_path: str  # workspace-relative, "/" separators; may start with "../" for extra paths
    source: str = "memory"
    modality: str | None = None  # "image" / "audio" for multimodal files, None for Markdown


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
    return name.lower().endswith(".md")


def _walk_md(root: Path, skipped: list[Skipped], workspace: Path, extra_ext: tuple[str, ...] = ()) -> list[str]:
    """Regular `.md` files (and `extra_ext` files) under `root`, recursively, never entering or
    returning symlinks. Paths stay strings here: this runs over every file on every sync."""
    out: list[str] = []
    stack = [str(root)]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(Skipped(_rel(workspace, Path(d)), f"cannot list directory: {exc.strerror}"))
            continue
        for e in entries:
            try:
                if e.is_symlink():
                    if _is_md(e.name) or e.is_dir():
                        skipped.append(Skipped(_rel(workspace, Path(e.path)), "symlink (not followed)"))
                    continue
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif _is_md(e.name) or (extra_ext and e.name.lower().endswith(extra_ext)):
                    if e.is_file(follow_symlinks=False):
                        out.append(e.path)
                    else:
                        skipped.append(Skipped(_rel(workspace, Path(e.path)), "not a regular file"))
            except OSError as exc:
                skipped.append(Skipped(_rel(workspace, Path(e.path)), f"cannot stat: {exc.strerror}"))
    return out


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
    # (path, real path, workspace-relative path). The walk never enters a symlink, so a file's
    # real and relative paths are its root's plus the part below the root: no realpath() (8 lstat
    # calls) and no relpath() per file.
    candidates: list[tuple[str, str, str]] = []

    def add_one(p: Path) -> None:
        candidates.append((str(p), os.path.realpath(p), _rel(workspace, p)))

    def add_tree(root: Path, ext: tuple[str, ...] = ()) -> None:
        real_root, rel_root, prefix = os.path.realpath(root), _rel(workspace, root), len(str(root))
        for p in _walk_md(root, skipped, workspace, ext):
            below = p[prefix:].replace(os.sep, "/")
            candidates.append((p, real_root + p[prefix:], rel_root + below if rel_root != "." else below.lstrip("/")))

    for name in ROOT_FILES:
        p = workspace / name
        st = _lstat(p)
        if st is None:
            continue
        if stat.S_ISLNK(st.st_mode):
            skipped.append(Skipped(name, "symlink (not followed)"))
        elif stat.S_ISREG(st.st_mode):
            add_one(p)
    mem_dir = workspace / "memory"
    st = _lstat(mem_dir)
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            skipped.append(Skipped("memory", "symlink (not followed)"))
        elif stat.S_ISDIR(st.st_mode):
            add_tree(mem_dir)
    for root in _extra_roots(workspace, extra_paths):
        st = _lstat(root)
        if st is None:
            continue
        if stat.S_ISLNK(st.st_mode):
            skipped.append(Skipped(_rel(workspace, root), "symlink (not followed)"))
        elif stat.S_ISDIR(st.st_mode):
            add_tree(root, multimodal_ext)
        elif stat.S_ISREG(st.st_mode) and (_is_md(root.name) or (multimodal_ext and root.name.lower().endswith(multimodal_ext))):
            add_one(root)
        else:
            skipped.append(Skipped(_rel(workspace, root), "not a .md file or directory"))

    seen: set[str] = set()
    files: list[MemoryFile] = []
    for p, key, rel in candidates:
        if not _utf8_name(rel):
            # SQLite, JSON and MCP all need UTF-8; such a name would break every sync.
            skipped.append(Skipped(rel, "file name is not valid UTF-8"))
            continue
        if key in seen:
            continue
        seen.add(key)
        files.append(MemoryFile(p, rel, modality=None if _is_md(p) else modality_of(os.path.basename(p))))
    files.sort(key=lambda f: f.rel_path)
    return files, skipped


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _no_symlinks_between(root: Path, target: Path, shown: str) -> None:
    """Refuse if `root`, or any component from it down to `target`, is a symlink."""
    current = root
    parts = target.relative_to(root).parts
    for part in (None, *parts):
        if part is not None:
            current = current / part
        st = _lstat(current)
        if st is None:
            return  # a missing component: the file does not exist, which reads as empty
        if stat.S_ISLNK(st.st_mode):
            raise PathNotAllowedError(shown, "symlinks are not followed")


def resolve_memory_path(
    workspace: Path, extra_paths: list[str] | tuple[str, ...], path: str
) -> tuple[Path, str]:
    """Map a requested path to (absolute path, workspace-relative path) or refuse it."""
    if not isinstance(path, str) or not path.strip():
        raise PathNotAllowedError(str(path), "path required")
    if "\x00" in path:
        raise PathNotAllowedError(path, "path contains a NUL byte")
    raw = path.strip().replace("\\", "/")
    try:
        candidate = Path(raw).expanduser()
    except RuntimeError:  # `~nosuchuser/…`
        raise PathNotAllowedError(path, "`~` names a user whose home folder is unknown") from None
    candidate = candidate if candidate.is_absolute() else workspace / candidate
    candidate = Path(os.path.normpath(candidate))  # lexical: `..` cannot hide behind a symlink
    if not _is_md(candidate.name):
        raise PathNotAllowedError(path, "only .md memory files can be read")

    rel = _rel(workspace, candidate)
    if _inside(candidate, workspace):
        rel_parts = PurePosixPath(rel).parts
        if rel in READABLE_ROOT_FILES or (len(rel_parts) > 1 and rel_parts[0] == "memory"):
            _no_symlinks_between(workspace, candidate, path)
            return candidate, rel
    for root in _extra_roots(workspace, extra_paths):
        if candidate == root or (_inside(candidate, root) and candidate != root):
            _no_symlinks_between(root, candidate, path)
            return candidate, rel
    raise PathNotAllowedError(path, "not a memory file (MEMORY.md, memory/**/*.md or an extra path)")


def read_memory_file(
    workspace: Path,
    extra_paths: list[str] | tuple[str, ...],
    path: str,
    from_line: int | None = None,
    lines: int | None = None,
    *,
    max_chars: int | None = None,
) -> tuple[str, str, int, bool]:
    """Read a memory file or a line range. Returns (relative path, text, total lines, missing).

    The file is streamed: only the lines asked for are kept (and at most about `max_chars`
    characters of them), so one line of a 200 MB file costs one line of memory."""
    abs_path, rel = resolve_memory_path(workspace, extra_paths, path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(abs_path, flags)
    except FileNotFoundError:
        return rel, "", 0, True
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathNotAllowedError(path, "symlinks are not followed") from None
        if exc.errno in (errno.ENOTDIR,):
            return rel, "", 0, True
        raise PathNotAllowedError(path, f"cannot open: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses directories
        os.close(fd)
        raise PathNotAllowedError(path, "not a regular file")
    start = max(1, int(from_line or 1))
    count = max(1, int(lines)) if lines is not None else None
    with os.fdopen(fd, "rb") as fh:
        data, total = _read_lines(fh, start, count, None if max_chars is None else (max_chars + 1) * 4)
    return rel, data.decode("utf-8", errors="replace"), total, False


_BLOCK = 2**20


def _read_lines(fh: Any, start: int, count: int | None, max_bytes: int | None) -> tuple[bytes, int]:
    """Lines `start`..`start+count-1` (1-based, joined by "\n", as `text.split("\n")` numbers
    them) and the total number of lines (a final newline ends the last line, it does not start
    another; an empty file has none), reading the file in blocks and keeping at most `max_bytes`
    of the lines asked for."""
    end = None if count is None else start + count  # first line not wanted
    line = 1  # number of the line the next byte belongs to
    kept = bytearray()
    last = b""  # the file's last byte
    while block := fh.read(_BLOCK):
        last = block[-1:]
        pos = 0
        while pos < len(block):
            nl = block.find(b"\n", pos)
            stop = len(block) if nl < 0 else nl
            if line >= start and (end is None or line < end) and (max_bytes is None or len(kept) < max_bytes):
                room = len(block) if max_bytes is None else pos + max_bytes - len(kept)
                kept += block[pos : min(stop, room)]
                if nl >= 0 and (end is None or line + 1 < end) and (max_bytes is None or len(kept) < max_bytes):
                    kept += b"\n"
            if nl < 0:
                break
            line += 1
            pos = nl + 1
    total = 0 if not last else line - 1 if last == b"\n" else line
    return bytes(kept), total
