"""Pre-compaction memory flush: when a gateway should ask the model to write durable notes.

The reference's gate (as OpenClaw does; docs/parity.md), with its dedup defect fixed: "already flushed for this
compaction" is an explicit compaction number, so a session that never flushed is never mistaken
for one that did (the reference compared a missing count, 0, with a missing count, 0).

    threshold = floor(contextWindow) − floor(reserveTokensFloor) − floor(softThresholdTokens)

Fire when the session's tokens reach the threshold, or its transcript reaches
`forceFlushTranscriptBytes`, once per compaction cycle; never for heartbeats, CLI-runtime
backends, or a workspace that cannot be written.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from datetime import datetime

from ..errors import ConfigError

__all__ = [
    "FlushSettings",
    "FlushState",
    "SessionUsage",
    "FlushDecision",
    "should_flush",
    "mark_flushed",
    "flush_prompts",
    "parse_byte_size",
    "DEFAULT_CONTEXT_WINDOW",
]

DEFAULT_CONTEXT_WINDOW = 200_000
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.I)
_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3, "gib": 1024**3}


def parse_byte_size(value: int | float | str, *, key: str = "forceFlushTranscriptBytes") -> int:
    """`2097152`, `"2MiB"`, `"2 mb"` → bytes. Anything else is a ConfigError naming the key."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ConfigError(f"{key}: {value!r} is not a byte size (like 2097152 or \"2MiB\")", key_path=key)
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])


@dataclass(frozen=True)
class FlushSettings:
    enabled: bool = True
    soft_threshold_tokens: int = 4000
    force_flush_transcript_bytes: int = 2 * 1024 * 1024
    reserve_tokens_floor: int = 20_000


@dataclass(frozen=True)
class FlushState:
    """What the gateway keeps per session between turns."""

    compaction_count: int = 0  # compactions so far in this session
    flushed_at_compaction: int | None = None  # the compaction number of the last flush, if any


@dataclass(frozen=True)
class SessionUsage:
    context_window: int | None = None  # the model's configured window
    projected_tokens: int | None = None  # freshest prompt + last output + current prompt estimate
    total_tokens: int | None = None
    total_tokens_fresh: bool = False
    transcript_bytes: int | None = None


@dataclass(frozen=True)
class FlushDecision:
    flush: bool
    reason: str
    threshold: int
    tokens: int | None


def _threshold(usage: SessionUsage, settings: FlushSettings) -> int:
    window = usage.context_window if usage.context_window and usage.context_window > 0 else DEFAULT_CONTEXT_WINDOW
    return math.floor(window) - math.floor(settings.reserve_tokens_floor) - math.floor(settings.soft_threshold_tokens)


def should_flush(
    usage: SessionUsage,
    state: FlushState,
    settings: FlushSettings = FlushSettings(),
    *,
    heartbeat: bool = False,
    cli_runtime: bool = False,
    workspace_writable: bool = True,
) -> FlushDecision:
    threshold = _threshold(usage, settings)
    if usage.projected_tokens is not None:
        tokens: int | None = usage.projected_tokens
    elif usage.total_tokens is not None and usage.total_tokens_fresh:
        tokens = usage.total_tokens
    else:
        tokens = None

    def no(reason: str) -> FlushDecision:
        return FlushDecision(False, reason, threshold, tokens)

    if not settings.enabled:
        return no("memory flush disabled")
    if heartbeat:
        return no("heartbeat turn")
    if cli_runtime:
        return no("CLI-runtime backend")
    if not workspace_writable:
        return no("workspace is read-only")
    if state.flushed_at_compaction is not None and state.flushed_at_compaction == state.compaction_count:
        return no(f"already flushed in compaction cycle {state.compaction_count}")
    if usage.transcript_bytes is not None and usage.transcript_bytes >= settings.force_flush_transcript_bytes:
        return FlushDecision(
            True,
            f"transcript {usage.transcript_bytes} B ≥ {settings.force_flush_transcript_bytes} B",
            threshold,
            tokens,
        )
    if threshold <= 0:
        return no(f"threshold {threshold} ≤ 0: never fires")
    if tokens is None:
        return no("no fresh token count")
    if tokens >= threshold:
        return FlushDecision(True, f"{tokens} tokens ≥ threshold {threshold}", threshold, tokens)
    return no(f"{tokens} tokens < threshold {threshold}")


def mark_flushed(state: FlushState) -> FlushState:
    """The state after a flush ran in the current compaction cycle."""
    return replace(state, flushed_at_compaction=state.compaction_count)


_PROMPT = (
    "Pre-compaction memory flush. Store durable memories now in memory/{date}.md "
    "(create memory/ if needed). Append only: never rewrite or delete existing entries. "
    "Bootstrap files such as MEMORY.md are read-only here. Use exactly that file name. "
    "If there is nothing worth storing, reply with NO_REPLY.\nCurrent time: {now}"
)
_SYSTEM = (
    "Pre-compaction memory flush turn. The session is near compaction; capture durable memories "
    "(decisions, preferences, people, dates, todos) to memory/{date}.md, appending only. "
    "MEMORY.md and other bootstrap files are read-only. You may reply with NO_REPLY when nothing "
    "needs saving.\nCurrent time: {now}"
)


def flush_prompts(now: datetime, *, prompt: str | None = None, system_prompt: str | None = None) -> tuple[str, str]:
    """The flush turn's prompt and system prompt, for the user's local date (pass an aware `now`)."""
    fields = {"date": now.strftime("%Y-%m-%d"), "now": now.isoformat(timespec="minutes")}
    return (prompt or _PROMPT).format(**fields), (system_prompt or _SYSTEM).format(**fields)
