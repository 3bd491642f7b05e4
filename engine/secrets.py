"""Keeping API keys out of every log line, error message, status and --json output.

Providers register the keys they hold; `redact` masks them in any text, and the structlog
processor applies it to every log event. Registration is process-wide because logging is.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["register_secret", "redact", "redact_processor"]

_SECRETS: set[str] = set()
_BEARER_RE = re.compile(r"(?i)(bearer\s+)[^\s\"',]+")


def register_secret(value: str | None) -> None:
    """Remember a secret (and its long prefix, which some APIs echo back) for redaction."""
    if value and len(value) >= 4:
        _SECRETS.add(value)
        if len(value) >= 16:
            _SECRETS.add(value[:12])


def redact(text: str) -> str:
    for s in sorted(_SECRETS, key=len, reverse=True):
        if s in text:
            text = text.replace(s, "***")
    return _BEARER_RE.sub(r"\1***", text)


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _walk(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v) for v in value)
    return value


def redact_processor(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    return _walk(event)
