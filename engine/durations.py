"""Durations as the reference writes them: `500ms`, `30s`, `5m`, `1h30m`, `2d`, or a bare number."""

from __future__ import annotations

import re

__all__ = ["parse_duration_ms"]

_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(value: str | float | int | None, *, default_ms: int, bare_unit: str = "m") -> int:
    """Milliseconds. A bare number takes `bare_unit`; anything unparseable gives the default."""
    if value is None:
        return default_ms
    if isinstance(value, (int, float)):
        return int(value * _UNIT_MS[bare_unit]) if value >= 0 else default_ms
    text = value.strip().lower()
    if not text or " " in text:
        return default_ms
    try:
        return int(float(text) * _UNIT_MS[bare_unit])
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _PART_RE.finditer(text):
        if m.start() != pos:
            return default_ms
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
        pos = m.end()
    return int(total) if pos == len(text) and pos > 0 else default_ms
