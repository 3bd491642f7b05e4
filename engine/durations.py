"""Durations as the reference writes them: `500ms`, `30s`, `5m`, `1h30m`, `2d`, or a bare number."""

from __future__ import annotations

import re

__all__ = ["parse_duration_ms", "check_duration", "DURATION_FORMS", "vector_progress_words"]

_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DURATION_MS = 36_500 * 86_400_000  # 100 years: longer is a typo, and past it timers overflow


def _bounded(ms: float) -> int:
    if not ms <= MAX_DURATION_MS:  # also NaN
        raise ValueError(f"a duration of at most 36500d (100 years): use {DURATION_FORMS}")
    return int(ms)
DURATION_FORMS = (
    "a number with a unit (ms, s, m, h, d) such as 30s, 5m or 1h30m, 0s to turn it off, or a bare number of minutes"
)


def check_duration(value: str | float | int, *, bare_unit: str = "m") -> int:
    """Milliseconds, or ValueError for anything that is not a duration (spaces inside, a negative
    number, an unknown unit). Config loading uses it, so a typo is an error, not the default."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: use {DURATION_FORMS}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: use {DURATION_FORMS}")
        return _bounded(value * _UNIT_MS[bare_unit])
    text = value.strip().lower()
    if text and " " not in text:
        try:
            number = float(text)
        except ValueError:
            pos, total = 0, 0.0
            for m in _PART_RE.finditer(text):
                if m.start() != pos:
                    break
                total += float(m.group(1)) * _UNIT_MS[m.group(2)]
                pos = m.end()
            if pos == len(text):
                return _bounded(total)
        else:
            if number >= 0:
                return _bounded(number * _UNIT_MS[bare_unit])
    raise ValueError(f"not a duration: use {DURATION_FORMS}")


def parse_duration_ms(value: str | float | int | None, *, default_ms: int, bare_unit: str = "m") -> int:
    """Milliseconds. A bare number takes `bare_unit`; anything unparseable gives the default (the
    reference's rule; memsift's config loading has already refused such values)."""
    if value is None:
        return default_ms
    try:
        return check_duration(value, bare_unit=bare_unit)
    except ValueError:
        return default_ms


def vector_progress_words(progress: dict) -> str:
    """A keyword-first index's vectors being made, for searches and `status`: "1,234 of 18,809
    chunks have vectors, about 6 min left" (the time left once a rate can be told)."""
    said = f"{progress['done']:,} of {progress['total']:,} chunks have vectors"
    eta = progress.get("etaSeconds")
    if eta is not None:
        said += f", about {eta // 60} min left" if eta >= 90 else f", about {max(1, eta)} s left"
    return said
