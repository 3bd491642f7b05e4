"""How much text a hit shows and a chunk holds: the one low place both the chunker and the
snippets read (a chunk is at most what a hit shows)."""

from __future__ import annotations

__all__ = ["SNIPPET_MAX_CHARS", "EVIDENCE_TOKENS", "REFERENCE_TOKENS", "REFERENCE_OVERLAP"]

SNIPPET_MAX_CHARS = 700
EVIDENCE_TOKENS = SNIPPET_MAX_CHARS // 4  # 175: a chunk is at most what a hit shows (4 characters a token)
REFERENCE_TOKENS, REFERENCE_OVERLAP = 400, 80  # the reference's chunker defaults
