"""The builtin backend's registration (entry point `memsift.backends: builtin`)."""

from __future__ import annotations

from memsift.engine.config.coverage import with_qmd_coverage
from memsift.engine.plugins import BackendContext, BackendPlugin


def _open(ctx: BackendContext):  # noqa: ANN202
    from .manager import BuiltinSearchManager  # noqa: PLC0415

    # The builtin index also covers QMD's own collections: a QMD fallback (and parity) searches the same files.
    return BuiltinSearchManager(
        with_qmd_coverage(ctx.settings), progress=ctx.progress
    )  # selects its provider when first needed


backend = BackendPlugin(
    name="builtin",
    open=_open,
    description="SQLite FTS5 BM25 + sqlite-vec vectors in one file per agent (the default; embedded, no server)",
)
