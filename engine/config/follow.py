"""Settings that follow their config files while a long-running command serves.

`memsift mcp` (the OpenClaw plugin's child, an MCP client's server) and `memsift watch` run for
days. An operator who edits the config meanwhile (`openclaw config set …`, an extra path added, a
new backend) expects it to apply, as a one-shot command's does, without finding and restarting the
process. So such a command reads its config through a ConfigFollower: it remembers each file the
read touched (the config, the OpenClaw file, every `$include`, by inode, size and times) and, every
`every_s`, looks at them again. When one changed and the settings now differ, the command serves
the new ones; an edit that breaks the config is said once and the settings it had go on serving
(a half-saved file never takes memory search down). Environment variables are the process's own:
they cannot change under it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TypeVar

from ..errors import ConfigError
from ..logging import get_logger
from .resolved import ResolvedConfig
from .snapshot import file_signature
from .sources import recording_reads

__all__ = ["ConfigFollower", "FOLLOW_EVERY_S"]

FOLLOW_EVERY_S = 2.0
log = get_logger("memsift.config")
T = TypeVar("T")


class ConfigFollower:
    """`load()` reads the settings and notes what they came from; `next_change(current)` waits for
    settings that differ from `current`."""

    def __init__(self, read: Callable[[], tuple[ResolvedConfig, list[tuple[Any, Any]]]], *,
                 every_s: float = FOLLOW_EVERY_S, on_broken: Callable[[str], None] | None = None) -> None:
        """`read()`: the settings and the files they came from with their signatures
        (`snapshot.settings_and_sources`: a snapshot that holds is as good as a read)."""
        self._read, self.every_s = read, every_s
        self._files: list[tuple[Path, Any]] = []
        self.on_broken = on_broken or (lambda message: log.warning(message))

    def load(self) -> ResolvedConfig:
        """The settings, read now (ConfigError as the loader raises it)."""
        with recording_reads(file_signature) as files:
            try:
                settings, self._files = self._read()
            except Exception:
                self._files = list(files)  # what a broken read got to: its next edit is what to wait for
                raise
        return settings

    def changed(self) -> bool:
        return any(file_signature(path) != signature for path, signature in self._files)

    def reload(self, current: ResolvedConfig) -> ResolvedConfig | None:
        """The settings the config gives now, when they differ from `current`; None when they do not
        (a comment, a key set to what it was) or the config is broken (said through `on_broken`)."""
        try:
            new = self.load()
        except ConfigError as exc:
            self.on_broken(f"the config changed and cannot be read ({exc}); the settings it had still serve")
            return None
        return None if same_settings(new, current) else new

    async def next_change(self, current: ResolvedConfig) -> ResolvedConfig:
        """Wait until the config's files changed into settings other than `current`."""
        import anyio  # noqa: PLC0415

        while True:
            await anyio.sleep(self.every_s)
            if self.changed() and (new := await anyio.to_thread.run_sync(self.reload, current)) is not None:
                return new


    async def next_opened(self, current: ResolvedConfig,
                          open_for: Callable[[ResolvedConfig], T]) -> tuple[ResolvedConfig, T]:
        """`next_change`, with what `open_for(settings)` makes for them (a manager); settings it
        cannot open are said (`on_broken`) and the wait goes on with `current`."""
        while True:
            new = await self.next_change(current)
            try:
                return new, open_for(new)
            except Exception as exc:  # noqa: BLE001  (a backend the new settings cannot open: keep serving)
                self.on_broken(f"the config changed, but its settings cannot be served ({exc}); the settings it "
                               "had still serve")


def same_settings(a: ResolvedConfig, b: ResolvedConfig) -> bool:
    return bool(a.model_dump(mode="json") == b.model_dump(mode="json"))
