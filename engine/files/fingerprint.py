"""Why an index must be rebuilt: the fingerprint keys both stored backends (builtin, Postgres)
record, said in words for `status` and the sync report."""

from __future__ import annotations

from typing import Any

__all__ = ["fingerprint_diff"]

# What a changed fingerprint key means to the person reading status. `{0}` and `{1}` are the old
# and new values, shown only where they are readable (never hashes).
_CHANGES = {
    "schema": "the index format changed with this version of memsift",
    "provider": "the embedding provider changed ({0} → {1})",
    "model": "the embedding model changed ({0} → {1})",
    "providerKey": "the embedding provider's settings changed (endpoint, headers or dimensions)",
    "sources": "the sources changed ({0} → {1})",
    "scopeHash": "the files it covers changed (workspace, extraPaths or multimodal settings)",
    "extraPaths": "the extra paths changed ({0} → {1})",
    "chunkStrategy": "the chunking changed (strategy {0} → {1}; evidence: a chunk is what a hit shows)",
    "chunkTokens": "the chunk size changed (chunkTokens {0} → {1})",
    "chunkOverlap": "the chunk overlap changed (chunkOverlap {0} → {1})",
    "chunker": "memsift's chunker changed with this version",
    "ftsTokenizer": "the keyword tokenizer changed ({0} → {1})",
    "ftsText": "memsift's keyword index changed with this version",
    "noteDates": "memsift's reading of the days notes speak of changed with this version",
}


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def fingerprint_diff(current: dict[str, Any] | None, wanted: dict[str, Any]) -> str | None:
    """Why a full reindex is needed, in words, or None. `dims` is learned during the build, not compared."""
    if current is None:
        return "no index yet"
    for key, value in wanted.items():
        if current.get(key) != value:
            return _CHANGES.get(key, f"{key} changed").format(_shown(current.get(key)), _shown(value))
    return None
