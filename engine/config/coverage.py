"""The builtin index covers QMD's own collections too (`memory.qmd.paths`,
`memorySearch.qmd.extraCollections`), so a QMD fallback, `--backend builtin` and `memsift parity`
search and read the same files QMD does; what it cannot cover is named, never lost silently.

A collection maps onto the builtin index's extra paths when its pattern selects a whole folder's
`.md` files (`**/*.md`, also below literal folders: `notes/**/*.md`) or one `.md` file (`MEMORY.md`,
or a file given as the path). Other patterns (`*.txt`, `*.md` at one level only) are not covered:
the builtin walk takes every `.md` file of a folder, hidden folders included, or one file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config layer calls with_qmd_coverage itself (its index-path check)
    from .resolved import ResolvedConfig

__all__ = ["with_qmd_coverage", "qmd_not_covered", "collection_root"]

_GLOB_CHARS = set("*?[]{}!")
_SESSIONS_GAP = (
    "QMD's exported session transcripts (memory.qmd.sessions): the builtin index searches transcripts only with "
    'experimental.sessionMemory and sources ["memory", "sessions"]'
)


def collection_root(workspace: Path, raw: str) -> Path:
    """A collection's folder (or file) as QMD gets it: `~` expanded, relative to the workspace, normalised."""
    path = Path(raw).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else workspace / path))


def _collections(settings: ResolvedConfig) -> list[tuple[Path, str]]:
    """(absolute path, pattern) of QMD's custom collections other than `extraPaths` (already covered)."""
    entries = [*settings.memory.qmd.paths, *settings.memory_search.qmd.extra_collections]
    return [(collection_root(settings.workspace, entry.path), entry.pattern) for entry in entries]


def _as_extra_path(path: Path, pattern: str) -> tuple[Path | None, str | None]:
    """The extra path that covers exactly this collection, or why there is none."""
    if pattern == "**/*.md":
        return path, None  # a folder, or a single file given as the path
    if not pattern.lower().endswith(".md"):
        return None, "the builtin index reads .md files only"
    head, _, tail = pattern.rpartition("/")
    if tail == "*.md" and head.endswith("**") and not _GLOB_CHARS & set(head[:-2].rstrip("/")):
        return Path(os.path.normpath(path / head[:-2])) if head[:-2] else path, None  # literal folders, then **/*.md
    if not _GLOB_CHARS & set(pattern):
        return Path(os.path.normpath(path / pattern)), None  # one file
    return None, "the builtin index takes a whole folder's .md files, one .md file, or <folder>/**/*.md"


def with_qmd_coverage(settings: ResolvedConfig) -> ResolvedConfig:
    """`settings` whose extra paths also hold the QMD collections the builtin index can cover."""
    ms = settings.memory_search
    extra = list(ms.extra_paths)
    seen = {os.path.normpath(p if os.path.isabs(os.path.expanduser(p)) else settings.workspace / p) for p in extra}
    for path, pattern in _collections(settings):
        covered, _why = _as_extra_path(path, pattern)
        if covered is not None and str(covered) not in seen:
            seen.add(str(covered))
            extra.append(str(covered))
    if len(extra) == len(ms.extra_paths):
        return settings
    return settings.model_copy(update={"memory_search": ms.model_copy(update={"extra_paths": extra})})


def qmd_not_covered(settings: ResolvedConfig) -> list[str]:
    """What QMD indexes that the builtin index does not, each with the reason."""
    gaps = []
    for path, pattern in _collections(settings):
        covered, why = _as_extra_path(path, pattern)
        if covered is None:
            gaps.append(f"{path} (pattern {pattern}): {why}")
    if settings.memory.qmd.sessions.enabled and "sessions" not in settings.memory_search.sources:
        gaps.append(_SESSIONS_GAP)
    return gaps
