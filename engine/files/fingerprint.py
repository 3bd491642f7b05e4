"""Why an index must be rebuilt: the fingerprint keys both stored backends (builtin, Postgres)
record, said in words for `status` and the sync report; and which memsift made an index (`builtBy`,
`updatedBy`, recorded beside the fingerprint, never compared: an upgrade that keeps the format
keeps the index, and says so once)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["fingerprint_diff", "memsift_version", "made_by", "rebuild_note", "reuse_note", "version_stamps"]

# Recorded beside the fingerprint, never compared: which memsift built the index, and the provider
# fallback it was built with.
_RECORDED = ("builtBy", "updatedBy", "fallback")
# The keys whose change comes with a new memsift (not with the user's settings).
_RELEASE_KEYS = ("schema", "chunker", "ftsText", "noteDates")
# Keys that either the user's settings or a new memsift change (the local model's graph is built by
# memsift, and its recipe is part of the provider's key): after an upgrade, said so.
_EITHER_KEYS = {"providerKey": "the embedding model's settings, or this memsift's build of it, changed",
                "sessionDays": ("the time zone session transcripts are dated in, or this memsift's dating of "
                                "them, changed")}


@lru_cache(maxsize=1)
def memsift_version() -> str:
    from ..plugins.registry import own_version  # noqa: PLC0415  (read as the registry reads memsift's entry points)

    return own_version() or "unknown"


def version_stamps(previous: dict[str, Any] | None, *, rebuilt: bool) -> dict[str, str]:
    """`builtBy` and `updatedBy` for an index written now: a rebuild is this memsift's; an update
    keeps whoever built it (none recorded: 0.1.x)."""
    built = memsift_version() if rebuilt else (previous or {}).get("builtBy")
    return {"updatedBy": memsift_version(), **({"builtBy": built} if built else {})}


def made_by(meta: dict[str, Any] | None) -> str:
    """Which memsift built the index, in words (0.1.x recorded no version)."""
    built = (meta or {}).get("builtBy")
    return f"memsift {built}" if built else "an earlier memsift (0.1.x, which recorded no version)"


def _upgraded(meta: dict[str, Any] | None) -> bool:
    """Another memsift updated the index last (this one has not written it yet)."""
    if not meta:
        return False
    return meta.get("updatedBy") != memsift_version()


def reuse_note(meta: dict[str, Any] | None) -> str | None:
    """The one line an upgrade that keeps the index says (None: this memsift updated it last)."""
    if not _upgraded(meta):
        return None
    return f"the index built by {made_by(meta)} is kept: memsift {memsift_version()} reads its format"


def rebuild_note(meta: dict[str, Any] | None, cause: str) -> str | None:
    """The line a search says when an upgrade's index must be rebuilt and the search did not wait
    for it (None: this memsift updated it last; the degraded vector side says the rest)."""
    if not _upgraded(meta):
        return None
    return (f"the index built by {made_by(meta)} must be rebuilt for memsift {memsift_version()} ({cause}); "
            "until then searches use keywords only: run `memsift index`")

# What a changed fingerprint key means to the person reading status. `{0}` and `{1}` are the old
# and new values, shown only where they are readable (never hashes).
_CHANGES = {
    "schema": "the index format changed with this version of memsift",
    "provider": "the embedding provider changed ({0} → {1})",
    "model": "the embedding model changed ({0} → {1})",
    "providerKey": ("the embedding provider's settings changed "
                    "(endpoint, headers, dimensions, or the local model's int8 or fp32 graph)"),
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
    "sessionDays": "the time zone session transcripts are dated in changed ({0} → {1})",
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
        if key in _RECORDED:  # who built it, and with which fallback, is recorded, never compared
            continue
        if current.get(key) != value:
            upgraded = _upgraded(current)
            text = _EITHER_KEYS.get(key) if upgraded else None
            why = text or _CHANGES.get(key, f"{key} changed").format(_shown(current.get(key)), _shown(value))
            if upgraded and (key in _RELEASE_KEYS or key in _EITHER_KEYS):
                why += f" (built by {made_by(current)}; this is memsift {memsift_version()})"
            return why
    return None
