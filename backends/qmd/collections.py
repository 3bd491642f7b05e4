"""QMD's collections of an agent, and what QMD itself has registered.

Which folders and patterns are collections, and their names, are decided with the rest of "which
files are memory" in `engine/files/rules.py` (`memory_collections`); this module reads QMD's own
`index.yml` (plain YAML, not `collection list` text) to know what QMD has registered.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from memsift.engine.files.rules import MemoryCollection, memory_collections, slug_name

__all__ = ["ManagedCollection", "resolve_collections", "read_index_yml", "slug_name"]

ManagedCollection = MemoryCollection
resolve_collections = memory_collections


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
