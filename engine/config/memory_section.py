"""The global `memory` section read as the reference reads it (as OpenClaw does; docs/parity.md): QMD limits and
timeouts
only when above 0 (floored), `debounceMs` only when 0 or more, a relative `sessions.exportDir`
and a relative `command` path from the workspace, `retentionDays` floored and only when above 0."""

from __future__ import annotations

import math
import os
import shlex
from pathlib import Path

from ..logging import get_logger
from .models import MemoryConfig, QmdLimits, QmdUpdate

__all__ = ["normalise_memory"]

log = get_logger("memsift.config")

_LIMITS = {
    "max_results": "maxResults",
    "max_snippet_chars": "maxSnippetChars",
    "max_injected_chars": "maxInjectedChars",
    "timeout_ms": "timeoutMs",
}
_TIMEOUTS = {
    "command_timeout_ms": "commandTimeoutMs",
    "update_timeout_ms": "updateTimeoutMs",
    "embed_timeout_ms": "embedTimeoutMs",
}


def _positive(value: float, default: float, key: str) -> float:
    """A finite value of at least 1 after flooring, else the default (the reference ignores it)."""
    floored = math.floor(value) if math.isfinite(value) else 0
    if floored > 0:
        return floored
    log.warning(
        "config value ignored: only values above 0 are used; using the default", key=key, value=value, default=default
    )
    return default


def _command(command: str, workspace: Path) -> str:
    """`command` whose first word, when a relative path (`bin/qmd`, `./qmd`), is made absolute from
    the workspace: the reference runs qmd with the workspace as its working folder, memsift from
    QMD's own home (where a relative path finds nothing). A bare name is still looked up on PATH;
    what cannot be split or expanded is left for the backend's own message."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    first = os.path.expanduser(words[0]) if words else ""
    if os.sep not in first or first.startswith("~") or first == words[0] and os.path.isabs(first):
        return command
    return shlex.join([os.path.normpath(Path(workspace) / first), *words[1:]])


def normalise_memory(memory: MemoryConfig, workspace: Path) -> MemoryConfig:
    qmd = memory.qmd
    limit_defaults, update_defaults = QmdLimits(), QmdUpdate()
    limits = qmd.limits.model_copy(update={
        name: _positive(getattr(qmd.limits, name), getattr(limit_defaults, name), f"memory.qmd.limits.{alias}")
        for name, alias in _LIMITS.items()
    })
    update = {
        name: _positive(getattr(qmd.update, name), getattr(update_defaults, name), f"memory.qmd.update.{alias}")
        for name, alias in _TIMEOUTS.items()
    }
    debounce = qmd.update.debounce_ms
    if not (math.isfinite(debounce) and debounce >= 0):
        log.warning("config value ignored: debounceMs must be 0 or more; using the default",
                    key="memory.qmd.update.debounceMs", value=debounce, default=update_defaults.debounce_ms)
        debounce = update_defaults.debounce_ms
    update["debounce_ms"] = debounce
    sessions = qmd.sessions
    export_dir = sessions.export_dir
    if export_dir and export_dir.strip():
        # Relative to the workspace, as the reference resolves it (never the process's folder).
        export_dir = os.path.normpath(Path(workspace) / Path(export_dir.strip()).expanduser())
    retention = sessions.retention_days
    if retention is not None:
        retention = math.floor(retention) if math.isfinite(retention) and math.floor(retention) > 0 else None
    return memory.model_copy(update={"qmd": qmd.model_copy(update={
        "command": _command(qmd.command, workspace),
        "limits": limits,
        "update": qmd.update.model_copy(update=update),
        "sessions": sessions.model_copy(update={"export_dir": export_dir or None, "retention_days": retention}),
    })})
