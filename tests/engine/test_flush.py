"""Every branch of the flush policy."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memsift.engine.errors import ConfigError
from memsift.engine.files.flush import (
    FlushSettings,
    FlushState,
    SessionUsage,
    flush_prompts,
    mark_flushed,
    parse_byte_size,
    should_flush,
)

DEFAULT = FlushSettings()


@pytest.mark.parametrize(
    "usage,state,settings,kw,flush,reason",
    [
        (SessionUsage(projected_tokens=176_000), FlushState(), DEFAULT, {}, True, "176000 tokens ≥ threshold 176000"),
        (SessionUsage(projected_tokens=175_999), FlushState(), DEFAULT, {}, False, "175999 tokens < threshold 176000"),
        (
            SessionUsage(context_window=32_000, projected_tokens=8_000),
            FlushState(),
            DEFAULT,
            {},
            True,
            "8000 tokens ≥ threshold 8000",
        ),
        (SessionUsage(total_tokens=190_000, total_tokens_fresh=True), FlushState(), DEFAULT, {}, True, "190000 tokens"),
        (
            SessionUsage(total_tokens=190_000, total_tokens_fresh=False),
            FlushState(),
            DEFAULT,
            {},
            False,
            "no fresh token count",
        ),
        (
            SessionUsage(projected_tokens=10, total_tokens=999_999, total_tokens_fresh=True),
            FlushState(),
            DEFAULT,
            {},
            False,
            "10 tokens <",
        ),
        (
            SessionUsage(context_window=20_000, projected_tokens=10**6),
            FlushState(),
            DEFAULT,
            {},
            False,
            "threshold -4000 ≤ 0",
        ),
        (SessionUsage(projected_tokens=10**6), FlushState(), FlushSettings(enabled=False), {}, False, "disabled"),
        (SessionUsage(projected_tokens=10**6), FlushState(), DEFAULT, {"heartbeat": True}, False, "heartbeat"),
        (SessionUsage(projected_tokens=10**6), FlushState(), DEFAULT, {"cli_runtime": True}, False, "CLI-runtime"),
        (
            SessionUsage(projected_tokens=10**6),
            FlushState(),
            DEFAULT,
            {"workspace_writable": False},
            False,
            "read-only",
        ),
        (
            SessionUsage(projected_tokens=10**6),
            FlushState(2, 2),
            DEFAULT,
            {},
            False,
            "already flushed in compaction cycle 2",
        ),
        (SessionUsage(projected_tokens=10**6), FlushState(3, 2), DEFAULT, {}, True, "tokens ≥"),  # a new cycle
        (SessionUsage(transcript_bytes=3 * 1024**2), FlushState(), DEFAULT, {}, True, "transcript 3145728 B"),
        (SessionUsage(transcript_bytes=3 * 1024**2), FlushState(0, 0), DEFAULT, {}, False, "already flushed"),
        (SessionUsage(transcript_bytes=1024), FlushState(), DEFAULT, {}, False, "no fresh token count"),
    ],
)
def test_gate(usage, state, settings, kw, flush, reason):
    decision = should_flush(usage, state, settings, **kw)
    assert decision.flush is flush and reason in decision.reason


def test_a_session_that_never_flushed_is_not_mistaken_for_one_that_did():
    # The reference compared a missing flush count (0) with a missing compaction count (0).
    assert should_flush(SessionUsage(projected_tokens=200_000), FlushState()).flush
    state = mark_flushed(FlushState(compaction_count=0))
    assert state.flushed_at_compaction == 0 and not should_flush(SessionUsage(projected_tokens=200_000), state).flush


def test_byte_sizes():
    assert parse_byte_size(2097152) == 2097152
    assert parse_byte_size("2MiB") == 2 * 1024**2 and parse_byte_size("1.5 kb") == 1500 and parse_byte_size("10") == 10
    with pytest.raises(ConfigError, match="forceFlushTranscriptBytes"):
        parse_byte_size("lots")


def test_prompts_name_todays_file_in_the_users_timezone():
    late = datetime(2026, 11, 22, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    prompt, system = flush_prompts(late)
    assert "memory/2026-11-22.md" in prompt and "memory/2026-11-22.md" in system
    assert "Append only" in prompt and "read-only" in system and "NO_REPLY" in prompt
    assert "Current time: 2026-11-22T23:30-05:00" in prompt
    custom, _ = flush_prompts(late, prompt="write to memory/{date}.md at {now}")
    assert custom == "write to memory/2026-11-22.md at 2026-11-22T23:30-05:00"
