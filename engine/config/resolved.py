"""`ResolvedConfig`: one agent's settings, merged and normalised (made by `load.py`). A module of its
own, with no other engine imports, so the layers that read settings never import the loader."""

from __future__ import annotations

from pathlib import Path

from ..records import Record, spec
from .models import MemoryConfig, MemorySearchConfig

__all__ = ["ResolvedConfig"]


class ResolvedConfig(Record, frozen=True):
    """Everything one agent's memory search needs, merged and normalised."""

    agent_id: str
    workspace: Path
    state_dir: Path
    store_path: Path
    config_path: Path | None
    memory_search: MemorySearchConfig
    memory: MemoryConfig
    # Where the workspace came from ("--workspace", a config key), or None for the current folder.
    # Not part of the settings' identity: the same folder reached two ways is the same workspace.
    workspace_given_by: str | None = spec(default=None, exclude=True)
    # Said to the user once per command (a top-level key set aside, an unset ${VAR}): not settings.
    notes: tuple[str, ...] = spec(default=(), exclude=True)
    # Where each setting came from (`memorySearch.query.maxResults` → "<file>: memory.search.query.maxResults").
    sources: dict[str, str] = spec(factory=dict, exclude=True)
    # OpenClaw's state folder where an OpenClaw config is read ($OPENCLAW_STATE_DIR, else ~/.openclaw):
    # its agents/<id>/sessions hold the Gateway's transcripts (files/transcripts.py `sessions_folder`)
    openclaw_state_dir: Path | None = spec(default=None, exclude=True)
    openclaw_config: Path | None = spec(default=None, exclude=True)  # the OpenClaw file read under memsift's
