"""numpy, imported on first use; regular expressions, compiled on first use.

A cold keyword search (`memsift search --mode keyword`, or any search of an index built without a
model) never touches a vector, yet importing numpy costs ~60 ms of its ~0.4 s. Modules on that
path write `from memsift.engine.lazy import np` and use `np.…` as usual: the first attribute read
imports numpy, and each attribute is then cached on the proxy.

`lazy_re(...)` does the same for a pattern that only some questions or some text need (CJK
character classes, the time phrases): compiling them all at import cost a cold search ~10 ms.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["np", "lazy_re"]


class _LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:  # called only for attributes not cached yet
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


np: Any = _LazyModule("numpy")


class _LazyPattern:
    """A compiled pattern's methods (`search`, `sub`, …), compiled on the first one used."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, attr: str) -> Any:  # called only for attributes not cached yet
        value = getattr(re.compile(*self._source), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<lazy pattern {self._source[0][:40]!r}>"


def lazy_re(pattern: str, flags: int = 0) -> Any:
    return _LazyPattern(pattern, flags)
