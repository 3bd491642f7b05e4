"""Which folder is the workspace, found the way git finds its repository, and whether it holds memory.

A workspace is a folder holding `MEMORY.md`, `memory.md` or a `memory/` folder. The current
folder (the default) is searched upward for the nearest one, so `memsift` run from inside
`ws/memory/` works on `ws`. A folder given explicitly (`--workspace`, `MEMSIFT_WORKSPACE`, the
config) is taken as it is, except a folder inside a workspace's `memory/`, which means that
workspace. A folder given explicitly that does not exist is an error, never a new empty index.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError

__all__ = ["MARKERS", "is_workspace", "find_workspace", "workspace_warning"]

MARKERS = ("MEMORY.md", "memory.md", "memory")


def is_workspace(folder: Path) -> bool:
    return (folder / "MEMORY.md").is_file() or (folder / "memory.md").is_file() or (folder / "memory").is_dir()


def find_workspace(start: Path, *, given_by: str | None) -> Path:
    """The workspace for `start` (absolute). `given_by` names where an explicit folder came from
    (for the error message), or is None for the current folder."""
    if given_by is not None:
        if not start.exists():
            raise ConfigError(
                f"workspace folder {str(start)!r} does not exist (from {given_by}); "
                "pass the folder that holds MEMORY.md and memory/",
                key_path=given_by if "." in given_by else None,
            )
        if not start.is_dir():
            raise ConfigError(f"workspace {str(start)!r} is not a folder (from {given_by})",
                              key_path=given_by if "." in given_by else None)
        if is_workspace(start):
            return start
        for folder in (start, *start.parents):
            if folder.name == "memory" and is_workspace(folder.parent):
                return folder.parent  # a folder inside ws/memory/ means ws
        return start
    for folder in (start, *start.parents):
        if is_workspace(folder):
            return folder
    return start


def workspace_warning(settings: object) -> str | None:
    """A warning when the workspace holds no memory files at all (so every search finds nothing),
    or only symlinked ones (never followed, as the reference does not)."""
    ws: Path = settings.workspace  # type: ignore[attr-defined]
    linked = _linked_markers(ws)
    if is_workspace(ws) and not linked:
        return None
    extra = list(settings.memory_search.extra_paths)  # type: ignore[attr-defined]
    qmd = settings.memory.qmd  # type: ignore[attr-defined]
    if settings.memory.backend == "qmd":  # type: ignore[attr-defined]
        extra += [p.path for p in qmd.paths]
    if any(os.path.exists(ws / os.path.expanduser(p)) for p in extra):
        return None
    if linked:
        names = " and ".join(m + "/" if m == "memory" else m for m in linked)
        said = f"{ws}'s {names} {'is a symlink' if len(linked) == 1 else 'are symlinks'}, which memsift does not " \
               "follow (as OpenClaw does not), so searches find nothing"
        targets = [t for t in (os.path.realpath(ws / m) for m in linked) if os.path.exists(t)]
        if not targets:
            return f"{said}; {'it points' if len(linked) == 1 else 'they point'} to nothing that exists"
        return f"{said}; to search {'it' if len(targets) == 1 else 'them'}, add {', '.join(targets)} to " \
               "memorySearch.extraPaths"
    return (f"{ws} holds no memory files (no MEMORY.md, memory.md or memory/ folder), so searches find nothing; "
            "pass -w with your agent's workspace, or run memsift from inside it")


def _linked_markers(ws: Path) -> list[str]:
    """The workspace's MEMORY.md / memory.md / memory/ when each of those present is a symlink."""
    present = [m for m in MARKERS if os.path.lexists(ws / m)]
    return present if present and all(os.path.islink(ws / m) for m in present) else []
