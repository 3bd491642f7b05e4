"""What a search on the builtin index would do right now, in one line (the first row of `memsift status`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Outlook", "search_outlook"]


@dataclass(frozen=True)
class Outlook:
    index_exists: bool
    provider_error: str | None  # the configured provider cannot be set up: searches fail
    provider: str | None  # "id/model" of the provider searches embed with, or None
    requested: str
    unavailable_reason: str | None
    stale: str | None  # why the index needs a rebuild (searches go keyword-only meanwhile)
    vectors_by_scan: bool  # sqlite-vec did not load: vectors are scanned in process
    pending: int  # files changed since the last sync
    sync_on_search: bool
    fallback: str | None  # "from: reason" when the fallback provider is in use


def search_outlook(o: Outlook) -> tuple[str, str]:
    """(mode, sentence): the mode a search answers in now, and what it does, with the reason."""
    if o.provider_error:
        return "none", (f"fail (exit 5): the embedding provider cannot be set up: {o.provider_error}; "
                        "fix it, or set provider to auto or none")
    if not o.index_exists:
        return ("hybrid" if o.provider else "fts-only"), f"build the index first ({o.pending} file(s)), then search"
    if o.provider is None:
        mode = "fts-only"
        what = "keyword only" + ("" if o.requested == "none" else f": no embedding provider ({o.unavailable_reason})")
    elif o.stale:
        mode, what = "fts-only", f"keyword only until `memsift index` rebuilds the index: {o.stale}"
    else:
        mode = "hybrid"
        what = f"hybrid: keyword (BM25) and vector ({o.provider}" + (
            ", scanned in process)" if o.vectors_by_scan else ")"
        )
        if o.fallback:
            what += f", with the fallback provider ({o.fallback})"
    if o.pending and o.sync_on_search:
        what += f"; first syncs {o.pending} changed file(s)"
    return mode, what
