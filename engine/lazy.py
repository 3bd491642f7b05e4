"""numpy, imported on first use.

A cold keyword search (`memsift search --mode keyword`, or any search of an index built without a
model) never touches a vector, yet importing numpy costs ~60 ms of its ~0.4 s. Modules on that
path write `from memsift.engine.lazy import np` and use `np.…` as usual: the first attribute read
imports numpy, and each attribute is then cached on the proxy.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["np"]


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
