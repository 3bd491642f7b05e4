"""OpenClaw's own memory search as a side of `memsift parity` (`--against openclaw`).

Before switching OpenClaw's memory slot to memsift, an operator wants to see what changes. This
side asks OpenClaw's builtin engine (memory-core) the same questions on the same workspace, through
its CLI: `openclaw memory index` first (unless `--no-sync`), then `openclaw memory search --json
--max-results K` per question. Each call starts OpenClaw (seconds on two cores), so the side's
latency is a whole CLI call, not a search; and memory-core answers from its own index with its own
provider (keyword-only without an embedding key), whatever the slot says.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from typing import Any, Callable

from ..config import ResolvedConfig
from ..errors import ConfigError

__all__ = ["OpenClawSide", "OPENCLAW_SIDE"]

OPENCLAW_SIDE = "openclaw"
CALL_TIMEOUT_S = 120.0
INDEX_TIMEOUT_S = 600.0


class OpenClawSide:
    """`openclaw memory …` for one agent."""

    def __init__(self, settings: ResolvedConfig, command: str, say: Callable[[str], None]) -> None:
        self.settings, self.say = settings, say
        self.command = shlex.split(command) or ["openclaw"]
        self.agent = settings.agent_id
        self.warnings: list[str] = []  # the answers cannot be compared (another workspace)
        self.notes: list[str] = []  # they can, and this is worth knowing

    async def _run(self, *args: str, timeout: float) -> str:
        import anyio  # noqa: PLC0415

        argv = [*self.command, "memory", *args, "--agent", self.agent]
        try:
            with anyio.fail_after(timeout):
                done = await anyio.run_process(argv, check=False)
        except FileNotFoundError:
            raise ConfigError(
                f"OpenClaw was not found ({self.command[0]}): install it, or pass --openclaw-command"
            ) from None
        except TimeoutError:
            raise ConfigError(f"`{shlex.join(argv[:3])}` took over {timeout:g} s") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()[-3:]
            raise ConfigError(f"`{shlex.join(argv[:3])}` failed (exit {done.returncode}): {' / '.join(said)[:400]}")
        return done.stdout.decode("utf-8", "replace")

    async def sync(self) -> None:
        """Index with memory-core, then check it reads the workspace memsift reads."""
        self.say(f"indexing with OpenClaw's memory-core for agent {self.agent} (up to {INDEX_TIMEOUT_S:g} s)")
        await self._run("index", timeout=INDEX_TIMEOUT_S)
        await self.check_workspace()

    async def check_workspace(self) -> None:
        try:
            status = _json(await self._run("status", "--json", timeout=CALL_TIMEOUT_S))
        except ValueError:
            return
        entry = status[0] if isinstance(status, list) and status else status
        details = entry.get("status", entry) if isinstance(entry, dict) else {}
        theirs = details.get("workspaceDir") if isinstance(details, dict) else None
        if theirs and os.path.realpath(theirs) != os.path.realpath(self.settings.workspace):
            self.warnings.append(
                f"OpenClaw's agent {self.agent} reads {theirs}, memsift reads {self.settings.workspace}: "
                "not the same files (pass -w, or -c with the OpenClaw config)"
            )
        provider = details.get("provider") if isinstance(details, dict) else None
        vector = (details.get("vector") or {}) if isinstance(details, dict) else {}
        if provider and (vector.get("index") or {}).get("state") == "empty":
            self.notes.append(f"OpenClaw's memory-core has no vectors (provider {provider} unavailable): it answers "
                                 "from keywords alone")

    async def search(self, query: str, k: int) -> tuple[list[tuple[str, int, int]], float, str | None]:
        """(hits, milliseconds, error): one `openclaw memory search` call."""
        started = time.perf_counter()
        try:
            text = await self._run(
                "search", "--json", "--max-results", str(k), "--query", query, timeout=CALL_TIMEOUT_S
            )
            answer = _json(text)
            hits = [(str(h["path"]), int(h["startLine"]), int(h["endLine"])) for h in answer.get("results", [])][:k]
            return hits, (time.perf_counter() - started) * 1000, None
        except (ConfigError, ValueError, KeyError, TypeError) as exc:
            return [], (time.perf_counter() - started) * 1000, str(exc)[:400]


def _json(text: str) -> Any:
    """The JSON document OpenClaw printed (anything it wrote before it is skipped)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError("OpenClaw printed no JSON")
    return json.loads(text[min(starts):])
