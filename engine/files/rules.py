"""Which files are memory, decided once for every backend: every read and every hit is judged here.

Memory is:

- `MEMORY.md` and `memory.md` at the workspace root (and `DREAMS.md`, for reads);
- the `.md` files under `memory/`, at any depth;
- each extra path **exactly as configured**: a file is that file alone, a folder its `.md` files
  at any depth (and its image/audio files, for hits, when multimodal indexing is on);
- each QMD collection's folder **with its pattern** (`memory.qmd.paths`,
  `memorySearch.qmd.extraCollections`, the exported session transcripts), also read as
  `qmd/<collection>/<path>`: a single-file collection (`MEMORY.md`, or an extra path that is one
  file) is that file, never its folder;
- session transcripts (`sessions/<name>.jsonl`) as hits of the `sessions` source, and for reads
  when `sessions` is a source: the lines the index shows (`User: …`, redacted) at their JSONL
  line numbers.

Symlinks are never followed: not at a root, not on the way down, not at the file (a collection
or extra path that is a symlink is no memory at all). Only `.md` files can be read. The QMD
backend, the builtin index and Postgres all read through `MemoryRules.read` and every search
answer's hits pass `MemoryRules.admits_hit` above the backends (`scoped.py`), so a rule added
here holds on every backend and every door.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..errors import PathNotAllowedError
from .discovery import READABLE_ROOT_FILES, ignored_dir, open_memory_file, read_open_file
from .multimodal import extensions_for
from .transcripts import SESSIONS_PREFIX, read_open_transcript, sessions_folder, transcript_name
from ..config.coverage import collection_root

if TYPE_CHECKING:
    from ..config.resolved import ResolvedConfig
    from ..results import ReadResult

__all__ = [
    "MemoryCollection",
    "MemoryRules",
    "memory_collections",
    "session_export_dir",
    "slug_name",
    "glob_matches",
    "extra_roots",
    "read_memory_file",
    "read_memory",
    "FileText",
    "MAX_READ_CHARS",
]


@dataclass(frozen=True)
class MemoryCollection:
    """One QMD collection: its name (`qmd/<name>/…` reads in it), folder and pattern."""

    name: str
    path: Path  # absolute
    pattern: str
    kind: str  # memory | custom | sessions


def slug_name(name: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return slug or "collection"


def _lstat(p: Path | str) -> os.stat_result | None:
    try:
        return os.lstat(p)
    except OSError:
        return None


def _is_symlink(p: Path) -> bool:
    st = _lstat(p)
    return st is not None and stat.S_ISLNK(st.st_mode)


def _inside_real(path: Path, root: Path) -> bool:
    try:
        real, real_root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    except OSError:
        return False
    return real == real_root or real_root in real.parents


def session_export_dir(settings: ResolvedConfig) -> Path:
    """Where QMD's session transcripts are exported (`memory.qmd.sessions.exportDir`, else a
    folder in the agent's QMD home). Relative values are already made absolute by the config."""
    sess = settings.memory.qmd.sessions
    if sess.export_dir:
        return Path(os.path.normpath(Path(sess.export_dir).expanduser()))
    return settings.state_dir / "agents" / settings.agent_id / "qmd" / "sessions"


def memory_collections(settings: ResolvedConfig, sessions_dir: Path | None = None) -> list[MemoryCollection]:
    """The QMD collections of an agent, named as the reference names them:

    - `memory-root-<agent>`: the workspace with pattern `MEMORY.md`; `memory-dir-<agent>`:
      `memory/` with `**/*.md` (when `includeDefaultMemory`);
    - `memory.qmd.paths[]`, then `memorySearch.extraPaths`, then `memorySearch.qmd.extraCollections`:
      names lowercased, runs outside `[a-z0-9-]` → `-`; an explicit name is kept verbatim only for
      a path outside the workspace, otherwise `<name>-<agent>`; unnamed ones are
      `custom-<n>-<agent>`; collisions get `-2`, `-3`;
    - `sessions-<agent>` for exported session transcripts (`sessions_dir`).

    A path that is a symlink is left out (it is no memory on any backend); a single `.md` file
    becomes its folder with the file's name as the pattern."""
    agent = slug_name(settings.agent_id)
    ws = settings.workspace
    qmd = settings.memory.qmd
    out: list[MemoryCollection] = []
    if qmd.include_default_memory:
        out.append(MemoryCollection(f"memory-root-{agent}", ws, "MEMORY.md", "memory"))
        out.append(MemoryCollection(f"memory-dir-{agent}", ws / "memory", "**/*.md", "memory"))
    custom: list[tuple[str, str | None, str]] = [(p.path, p.name, p.pattern) for p in qmd.paths]
    custom += [(p, None, "**/*.md") for p in settings.memory_search.extra_paths]
    custom += [(p.path, p.name, p.pattern) for p in settings.memory_search.qmd.extra_collections]
    seen = {(c.path, c.pattern) for c in out}
    names = {c.name for c in out}
    for index, (raw, name, pattern) in enumerate(custom):
        path = collection_root(ws, raw)
        st = _lstat(path)
        if st is not None and stat.S_ISLNK(st.st_mode):
            continue  # never followed (the builtin index skips it too, and says so in status)
        if st is not None and stat.S_ISREG(st.st_mode) and pattern == "**/*.md":  # a single file
            path, pattern = path.parent, glob_escape(path.name)
        if (path, pattern) in seen:
            continue
        seen.add((path, pattern))
        if name and not _inside_real(path, ws):
            base = slug_name(name)
        elif name:
            base = f"{slug_name(name)}-{agent}"
        else:
            base = f"custom-{index + 1}-{agent}"
        final, n = base, 2
        while final in names:
            final, n = f"{base}-{n}", n + 1
        names.add(final)
        out.append(MemoryCollection(final, path, pattern, "custom"))
    if sessions_dir is not None:
        out.append(MemoryCollection(f"sessions-{agent}", sessions_dir, "**/*.md", "sessions"))
    return out


# --- patterns ------------------------------------------------------------------------------------

_GLOB_SPECIAL = re.compile(r"([*?\[\]{}!])")


def glob_escape(name: str) -> str:
    """A file name as a pattern that matches only itself."""
    return _GLOB_SPECIAL.sub(r"[\1]", name)


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A collection pattern (QMD's globs: `**`, `*`, `?`, `[…]`, `{a,b}`) as a regex over a
    "/"-separated relative path. `*` and `?` never cross a "/"."""
    out, i, depth = [], 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\").replace("[", "\\[").replace("^", "\\^")
                out.append("[" + ("^" if negate else "") + body + "]")
                i = end
        elif ch == "{":
            out.append("(?:")
            depth += 1
        elif ch == "}" and depth:
            out.append(")")
            depth -= 1
        elif ch == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(ch))
        i += 1
    out.extend(")" * depth)
    try:
        return re.compile("".join(out) + r"\Z")
    except re.error:
        return re.compile(re.escape(pattern) + r"\Z")  # a broken class: the pattern as a literal name


def glob_matches(pattern: str, rel: str) -> bool:
    return bool(_glob_regex(pattern).match(rel))


# --- the rules -------------------------------------------------------------------------------------


def _is_md(name: str) -> bool:
    return name.lower().endswith(".md")


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _no_symlinks_between(root: Path, target: Path, shown: str) -> None:
    """Refuse if `root`, or any component from it down to `target`, is a symlink. A missing
    component means the file does not exist (which reads as empty)."""
    current = root
    for part in (None, *target.relative_to(root).parts):
        if part is not None:
            current = current / part
        st = _lstat(current)
        if st is None:
            return
        if stat.S_ISLNK(st.st_mode):
            raise PathNotAllowedError(shown, "symlinks are not followed")


def _not_in_an_ignored_folder(folders: tuple[str, ...], shown: Any) -> None:
    """A read of a file that discovery leaves out (`discovery.IGNORED_DIRS`) is refused, as its hits are."""
    for folder in folders:
        if ignored_dir(folder):
            raise PathNotAllowedError(shown, f"in a {folder}/ folder, which holds no memory (old versions, deleted "
                                             "notes or a tool's files): memsift neither indexes nor reads it")


def _candidate(workspace: Path, path: Any) -> tuple[str, Path]:
    """The request cleaned (`raw`, "/" separators) and its absolute, lexically normalised path."""
    if not isinstance(path, str) or not path.strip():
        raise PathNotAllowedError(str(path), "path required")
    if "\x00" in path:
        raise PathNotAllowedError(path, "path contains a NUL byte")
    raw = path.strip()
    if "\\" in raw and not os.path.lexists(_absolute(workspace, raw, path)):
        raw = raw.replace("\\", "/")  # a Windows-style path (a file whose name holds a backslash is read as named)
    return raw, _absolute(workspace, raw, path)


def _absolute(workspace: Path, raw: str, path: str) -> Path:
    try:
        candidate = Path(raw).expanduser()
    except RuntimeError:  # `~nosuchuser/…`
        raise PathNotAllowedError(path, "`~` names a user whose home folder is unknown") from None
    candidate = candidate if candidate.is_absolute() else workspace / candidate
    return Path(os.path.normpath(candidate))  # lexical: `..` cannot hide behind a symlink


def _as_spelled_on_disk(path: Path) -> Path:
    """`path` with each missing part replaced by the folder's entry that is the same text in another
    Unicode normalisation, else `path` as it is: macOS (and files synced from it) write "café" as
    "cafe" + a combining accent, while a keyboard or a language model types the one character."""
    current = Path(path.parts[0])
    for part in path.parts[1:]:
        step = current / part
        if not os.path.lexists(step):
            wanted = unicodedata.normalize("NFC", part)
            try:
                same = [e for e in os.listdir(current) if unicodedata.normalize("NFC", e) == wanted]
            except OSError:
                return path
            if len(same) != 1:  # none, or two spellings side by side: neither is guessed
                return path
            step = current / same[0]
        current = step
    return current


MAX_READ_CHARS = 16 * 2**20  # what one read returns at most, whoever asks (the index skips larger notes)


@dataclass(frozen=True)
class FileText:
    """What one read returned: the path as answers show it, the text, the file's line count."""

    path: str
    text: str
    total_lines: int
    missing: bool = False
    truncated: bool = False  # cut at the read's character bound: more follows


@dataclass(frozen=True)
class MemoryRules:
    """The memory files of one agent's settings (see the module docstring)."""

    workspace: Path
    extra_paths: tuple[Path, ...] = ()  # absolute, normalised: a file or a folder, exactly
    collections: tuple[MemoryCollection, ...] = ()
    hit_extensions: tuple[str, ...] = ()  # image/audio files of extra paths that hits may name
    sessions_dir: Path | None = None  # the transcripts' folder, when `sessions` is a source

    @classmethod
    def from_settings(cls, settings: ResolvedConfig) -> MemoryRules:
        ms = settings.memory_search
        qmd = settings.memory.qmd
        export = session_export_dir(settings) if qmd.sessions.enabled else None
        mm = ms.multimodal
        return cls(
            workspace=settings.workspace,
            extra_paths=extra_roots(settings.workspace, ms.extra_paths),
            collections=tuple(memory_collections(settings, export)),
            hit_extensions=extensions_for(mm.modalities) if mm.enabled and mm.modalities else (),
            sessions_dir=sessions_folder(settings) if "sessions" in ms.sources else None,
        )

    @classmethod
    def plain(cls, workspace: Path, extra_paths: list[str] | tuple[str, ...] = ()) -> MemoryRules:
        """The workspace's own memory files and these extra paths (no QMD collections)."""
        return cls(workspace=workspace, extra_paths=extra_roots(workspace, extra_paths))

    # --- judging a path --------------------------------------------------------------------

    def resolve(self, path: Any, *, extensions: tuple[str, ...] = ()) -> tuple[Path, str]:
        """(absolute path, the path as answers show it) of a memory file, or PathNotAllowedError.

        `extensions`: other file types allowed besides `.md` (hits of multimodal files)."""
        raw, candidate = _candidate(self.workspace, path)
        if not raw.isascii() and not os.path.lexists(candidate):
            candidate = _as_spelled_on_disk(candidate)
        if raw.startswith("qmd/"):
            return self._in_collection_alias(raw, path, extensions)
        if not (_is_md(candidate.name) or (extensions and candidate.name.lower().endswith(extensions))):
            raise PathNotAllowedError(path, "only .md memory files can be read")
        rel = Path(os.path.relpath(candidate, self.workspace)).as_posix()
        if _inside(candidate, self.workspace) and _is_md(candidate.name):
            parts = PurePosixPath(rel).parts
            if rel in READABLE_ROOT_FILES or (len(parts) > 1 and parts[0] == "memory"):
                _not_in_an_ignored_folder(parts[1:-1], path)
                _no_symlinks_between(self.workspace, candidate, path)
                return candidate, rel
        for root in self.extra_paths:
            st = _lstat(root)
            if st is not None and stat.S_ISLNK(st.st_mode):
                continue  # a symlinked extra path is no memory (discovery skips it too)
            is_file = (st is not None and stat.S_ISREG(st.st_mode)) or (st is None and _is_md(root.name))
            if (candidate == root) if is_file else (candidate != root and _inside(candidate, root)):
                if not is_file:
                    _not_in_an_ignored_folder(candidate.relative_to(root).parts[:-1], path)
                _no_symlinks_between(root, candidate, path)
                return candidate, rel
        for c in self.collections:
            if c.kind == "memory":
                continue  # MEMORY.md and memory/: the workspace rules above
            if candidate != c.path and _inside(candidate, c.path) and _is_md(candidate.name):
                if glob_matches(c.pattern, candidate.relative_to(c.path).as_posix()) and not _is_symlink(c.path):
                    _no_symlinks_between(c.path, candidate, path)
                    return candidate, rel
        raise PathNotAllowedError(
            path, "not a memory file (MEMORY.md, memory/**/*.md, an extra path or a QMD collection)"
        )

    def _in_collection_alias(self, raw: str, shown: Any, extensions: tuple[str, ...]) -> tuple[Path, str]:
        """`qmd/<collection>/<path>`: a file of that collection that its pattern selects."""
        _, name, *rest = raw.split("/", 2)
        c = next((x for x in self.collections if x.name == name), None)
        if c is None:
            raise PathNotAllowedError(shown, f"no QMD collection named {name[:80]!r}")
        below = os.path.normpath(rest[0]) if rest and rest[0] else ""
        if not below or below == "." or below.startswith("..") or os.path.isabs(below):
            raise PathNotAllowedError(shown, f"not a file of QMD collection {name}")
        target = Path(os.path.normpath(c.path / below))
        if not below.isascii() and not os.path.lexists(target):
            target = _as_spelled_on_disk(target)
        rel = target.relative_to(c.path).as_posix()
        if not (_is_md(target.name) or (extensions and target.name.lower().endswith(extensions))):
            raise PathNotAllowedError(shown, "only .md memory files can be read")
        if not glob_matches(c.pattern, rel):
            raise PathNotAllowedError(shown, f"not a file of QMD collection {name} (pattern {c.pattern})")
        if _is_symlink(c.path):
            raise PathNotAllowedError(shown, "symlinks are not followed")
        _no_symlinks_between(c.path, target, shown)
        return target, f"qmd/{name}/{rel}"

    def readable(self, path: Any) -> str:
        """The path as a read answers it (a memory file, or a transcript of the sessions source),
        or PathNotAllowedError: what `read` will accept, judged before any backend reads."""
        transcript = self._transcript(path)
        return transcript[1] if transcript is not None else self.resolve(path)[1]

    def is_memory(self, path: str) -> bool:
        try:
            self.resolve(path)
        except PathNotAllowedError:
            return False
        return True

    def admits_hit(self, path: str, source: str | None = None) -> bool:
        """Whether a search hit names a memory file (or a session transcript of the sessions source)."""
        if source == "sessions" and isinstance(path, str) and path.startswith(SESSIONS_PREFIX):
            return transcript_name(path) is not None
        try:
            self.resolve(path, extensions=self.hit_extensions)
        except PathNotAllowedError:
            return False
        return True

    # --- reading ---------------------------------------------------------------------------

    def read(self, path: Any, from_line: int | None = None, lines: int | None = None, *,
             max_chars: int | None = None, offset: int = 0) -> FileText:
        """Read a memory file or a line range, streamed: only the lines asked for are kept, at
        most `max_chars` characters (and never more than MAX_READ_CHARS); `offset` skips that many
        characters (UTF-16 units) of the first line without holding them."""
        bound = MAX_READ_CHARS if max_chars is None else max(0, min(int(max_chars), MAX_READ_CHARS))
        transcript = self._transcript(path)
        abs_path, shown = transcript if transcript is not None else self.resolve(path)
        fd = open_memory_file(abs_path, path)
        if fd is None:
            return FileText(shown, "", 0, missing=True)
        read_open = read_open_file if transcript is None else read_open_transcript
        text, total, cut = read_open(fd, from_line, lines, bound, offset)
        return FileText(shown, text, total, truncated=cut)

    def _transcript(self, path: Any) -> tuple[Path, str] | None:
        """(file, `sessions/<name>`) when `path` names a session transcript of the sessions source;
        None for any other path; PathNotAllowedError for a transcript while sessions is no source."""
        name = transcript_name(path)
        if name is None:
            return None
        if self.sessions_dir is None:
            raise PathNotAllowedError(path, 'session transcripts are read when "sessions" is one of '
                                            'memorySearch.sources (with experimental.sessionMemory)')
        return self.sessions_dir / name, path


def extra_roots(workspace: Path, extra_paths: list[str] | tuple[str, ...]) -> tuple[Path, ...]:
    roots = []
    for raw in extra_paths:
        p = Path(raw).expanduser()
        p = p if p.is_absolute() else workspace / p
        roots.append(Path(os.path.normpath(p)))
    return tuple(roots)




def read_memory_file(workspace: Path, extra_paths: list[str] | tuple[str, ...], path: str, from_line: int | None = None,
                     lines: int | None = None, *, max_chars: int | None = None) -> tuple[str, str, int, bool]:
    """`MemoryRules.read` over the workspace's memory files and these extra paths: (relative path,
    text, total lines, missing)."""
    got = MemoryRules.plain(workspace, extra_paths).read(path, from_line, lines, max_chars=max_chars)
    return got.path, got.text, got.total_lines, got.missing


async def read_memory(rules: MemoryRules, path: str, from_line: int | None = None, lines: int | None = None, *,
                      max_chars: int | None = None, offset: int = 0) -> ReadResult:
    """`memory_get` for every backend: the rules judge the path, the file is streamed in a worker
    thread, and a cut read says where the rest starts (`nextFrom`, `nextOffset`)."""
    import anyio  # noqa: PLC0415

    from ..results import ReadResult  # noqa: PLC0415
    from ..text import utf16_len  # noqa: PLC0415

    got = await anyio.to_thread.run_sync(lambda: rules.read(path, from_line, lines, max_chars=max_chars, offset=offset))
    start = max(1, int(from_line or 1))
    next_from = next_offset = None
    if got.truncated:
        newlines = got.text.count("\n")
        next_from = start + newlines
        tail = got.text[got.text.rfind("\n") + 1:]
        next_offset = utf16_len(tail) + (offset if newlines == 0 else 0) or None
    return ReadResult(
        path=got.path,
        text=got.text,
        from_line=start,
        lines=lines,
        total_lines=got.total_lines,
        missing=got.missing,
        truncated=got.truncated or None,
        next_from=next_from,
        next_offset=next_offset,
    )
