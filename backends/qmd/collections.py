"""Managed QMD collections: which folders QMD indexes for an agent, named as the reference names them.

- `memory-root-<agent>`: the workspace with pattern `MEMORY.md`; `memory-dir-<agent>`: `memory/`
  with `**/*.md` (when `includeDefaultMemory`).
- `memory.qmd.paths[]`, then `memorySearch.extraPaths`, then `memorySearch.qmd.extraCollections`
  (the defaults' then the agent's): names lowercased, runs outside
  `[a-z0-9-]` → `-`; an explicit name is kept verbatim only for a path outside the workspace,
  otherwise `<name>-<agent>`; unnamed ones are `custom-<n>-<agent>`; collisions get `-2`, `-3`.
- `sessions-<agent>` for exported session transcripts.

What exists is read from QMD's own `index.yml` (plain YAML), not from `collection list` text.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from memsift.engine.config import ResolvedConfig
from memsift.engine.qmd_coverage import collection_root

__all__ = ["ManagedCollection", "resolve_collections", "read_index_yml", "slug_name"]


@dataclass(frozen=True)
class ManagedCollection:
    name: str
    path: Path  # absolute
    pattern: str
    kind: str  # memory | custom | sessions


def slug_name(name: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return slug or "collection"


def _inside(path: Path, root: Path) -> bool:
    try:
        real, real_root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    except OSError:
        return False
    return real == real_root or real_root in real.parents


def resolve_collections(settings: ResolvedConfig, sessions_dir: Path | None = None) -> list[ManagedCollection]:
    agent = slug_name(settings.agent_id)
    ws = settings.workspace
    qmd = settings.memory.qmd
    out: list[ManagedCollection] = []
    if qmd.include_default_memory:
        out.append(ManagedCollection(f"memory-root-{agent}", ws, "MEMORY.md", "memory"))
        out.append(ManagedCollection(f"memory-dir-{agent}", ws / "memory", "**/*.md", "memory"))
    custom: list[tuple[str, str | None, str]] = [(p.path, p.name, p.pattern) for p in qmd.paths]
    custom += [(p, None, "**/*.md") for p in settings.memory_search.extra_paths]
    custom += [(p.path, p.name, p.pattern) for p in settings.memory_search.qmd.extra_collections]
    seen = {(c.path, c.pattern) for c in out}
    names = {c.name for c in out}
    for index, (raw, name, pattern) in enumerate(custom):
        path = collection_root(ws, raw)
        if path.is_file() and pattern == "**/*.md":  # a single file as a collection
            path, pattern = path.parent, path.name
        if (path, pattern) in seen:
            continue
        seen.add((path, pattern))
        if name and not _inside(path, ws):
            base = slug_name(name)
        elif name:
            base = f"{slug_name(name)}-{agent}"
        else:
            base = f"custom-{index + 1}-{agent}"
        final, n = base, 2
        while final in names:
            final, n = f"{base}-{n}", n + 1
        names.add(final)
        out.append(ManagedCollection(final, path, pattern, "custom"))
    if sessions_dir is not None:
        out.append(ManagedCollection(f"sessions-{agent}", sessions_dir, "**/*.md", "sessions"))
    return out


def read_index_yml(path: Path) -> dict[str, tuple[str, str]]:
    """{name: (path, pattern)} from QMD's config file; {} when absent or unreadable."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    cols = data.get("collections") if isinstance(data, dict) else None
    if not isinstance(cols, dict):
        return {}
    out = {}
    for name, spec in cols.items():
        if isinstance(spec, dict) and spec.get("path"):
            out[str(name)] = (str(spec["path"]), str(spec.get("pattern") or "**/*.md"))
    return out
