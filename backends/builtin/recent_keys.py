"""A bounded memory of keys seen recently (session keys): digests only, oldest forgotten first, so
any number of distinct keys, however long, keeps the state small."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

__all__ = ["RecentKeys"]


class RecentKeys:
    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def is_new(self, key: str) -> bool:
        """True the first time `key` is seen (or after it was forgotten); remembers it."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:16]
        if digest in self._seen:
            self._seen.move_to_end(digest)
            return False
        self._seen[digest] = None
        if len(self._seen) > self.limit:
            self._seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)
