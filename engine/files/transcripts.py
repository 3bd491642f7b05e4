"""Session transcripts (JSONL) as searchable text: `User: …` / `Assistant: …` lines.

Shared by the builtin index (source `sessions`) and the QMD export. Only `type: "message"`
records with role user or assistant count; text blocks are joined, whitespace collapsed, secrets
redacted. `line_map[i]` is the 1-based JSONL line of flattened line i+1, so hits point at the
transcript's real lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from ..config.zones import is_moment, zone_info

__all__ = ["Transcript", "flatten_transcript", "redact_text", "list_transcripts", "sessions_folder",
           "TRANSCRIPT_SUFFIXES", "is_transcript_name", "read_open_transcript", "transcript_name",
           "SESSIONS_PREFIX"]

_SECRET_RES = [
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\b(ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/-]{16,}=*"),
    re.compile(r"(?i)\b(api[_-]?key|token|secret|password)\s*[:=]\s*\S{6,}"),
]
TRANSCRIPT_SUFFIXES = (".jsonl",)
SESSIONS_PREFIX = "sessions/"  # a transcript's path in hits and reads: sessions/<name>


def redact_text(text: str) -> str:
    for rx in _SECRET_RES:
        text = rx.sub("[redacted]", text)
    return text


@dataclass
class Transcript:
    lines: list[str] = field(default_factory=list)  # "User: …" / "Assistant: …"
    line_map: list[int] = field(default_factory=list)  # JSONL line number of each flattened line
    timestamps: list[float] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _message_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        blocks = (b for b in content if isinstance(b, dict) and b.get("type") == "text")
        return " ".join(b["text"] for b in blocks if isinstance(b.get("text"), str))
    return ""


def _timestamp(rec: dict, msg: dict, zone: str | None = None) -> float:
    """POSIX seconds of a record: a number (seconds or milliseconds) or an ISO 8601 string
    ("2026-11-20T09:00:00Z", as OpenClaw writes them; one without an offset is a time of `zone`, the
    user's, else of this machine); 0 when there is none or it cannot be read."""
    ts = msg.get("timestamp", rec.get("timestamp"))
    if isinstance(ts, bool):
        return 0.0
    if isinstance(ts, (int, float)):
        seconds = ts / 1000 if ts >= 1e11 else float(ts)  # milliseconds or seconds
        return seconds if is_moment(seconds) else 0.0  # NaN, Infinity, 1e300: no moment
    if isinstance(ts, str):
        try:
            when = datetime.fromisoformat(ts.strip().replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=zone_info(zone)) if zone else when.astimezone()
            seconds = when.timestamp()
        except (ValueError, OverflowError, OSError):  # no date; year 1 or 9999 in a far zone
            return 0.0
        return seconds if is_moment(seconds) else 0.0
    return 0.0


def _message(line: str) -> tuple[dict, dict, str] | None:
    """(record, message, `User: …` / `Assistant: …`) of a JSONL line holding one, else None."""
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # a torn line, or arrays nested past the parser's depth
        return None
    msg = rec.get("message") if isinstance(rec, dict) else None
    if not isinstance(msg, dict) or rec.get("type") != "message" or msg.get("role") not in ("user", "assistant"):
        return None
    text = " ".join(_message_text(msg.get("content")).split())
    if not text:
        return None
    return rec, msg, f"{'User' if msg['role'] == 'user' else 'Assistant'}: {redact_text(text)}"


def flatten_transcript(raw: str | Iterable[str], zone: str | None = None) -> Transcript:
    """The user's and the assistant's messages of a JSONL transcript: its text, or its lines one by
    one (a file opened as text: a transcript of hundreds of MB, images inline, is never held whole)."""
    out = Transcript()
    for number, line in enumerate(raw.split("\n") if isinstance(raw, str) else raw, start=1):
        if (got := _message(line)) is not None:
            rec, msg, shown = got
            out.lines.append(shown)
            out.line_map.append(number)
            out.timestamps.append(_timestamp(rec, msg, zone))
    return out


def read_open_transcript(fd: int, from_line: int | None = None, lines: int | None = None,
                         max_chars: int | None = None, offset: int = 0) -> tuple[str, int, bool]:
    """`memory_get` of a transcript, as `read_open_file` of a Markdown file: its JSONL lines
    `from_line`.. as the index shows them (`User: …` / `Assistant: …`, secrets redacted), a line that
    holds no message left empty, so line numbers stay the JSONL's that hits cite. (text, the file's
    number of lines, whether the text was cut at `max_chars`); `offset` drops that many UTF-16 units
    of the first line. Streamed line by line (newlines as the index splits them); only the lines
    asked for are parsed."""
    from .discovery import line_range, skip_units  # noqa: PLC0415

    start, count, skip = line_range(from_line, lines, offset)
    end = None if count is None else start + count
    parts: list[str] = []
    kept, cut, total = 0, False, 0
    with open(fd, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            total = number
            if number < start or (end is not None and number >= end) or cut:
                continue
            got = _message(line)
            text = got[2] if got else ""
            if number == start and skip:
                text, _ = skip_units(text, skip)
            if number > start:
                text = "\n" + text
            if max_chars is not None and kept + len(text) > max_chars:
                text, cut = text[: max_chars - kept], True
            parts.append(text)
            kept += len(text)
    return "".join(parts), total, cut


def sessions_folder(settings: Any) -> Path:
    """Where the agent's session transcripts are: `<stateDir>/agents/<agentId>/sessions`, the state
    folder being OpenClaw's where memsift reads an OpenClaw config (the Gateway writes them there),
    else memsift's own."""
    root = settings.openclaw_state_dir or settings.state_dir
    return root / "agents" / settings.agent_id / "sessions"


def is_transcript_name(name: str) -> bool:
    """`*.jsonl`, or a `.jsonl.reset.<ts>` / `.jsonl.deleted.<ts>` archive; no `.bak.` archive, no
    folder: the names a sessions folder's transcripts have (hits `sessions/<name>`)."""
    if "/" in name or "\\" in name or "\x00" in name or ".bak." in name or name.startswith(".jsonl"):
        return False
    return name.endswith(".jsonl") or ".jsonl.reset." in name or ".jsonl.deleted." in name


def transcript_name(path: Any) -> str | None:
    """`<name>` of a hit or read path `sessions/<name>` naming a transcript, else None."""
    if isinstance(path, str) and path.startswith(SESSIONS_PREFIX) and is_transcript_name(path[len(SESSIONS_PREFIX):]):
        return path[len(SESSIONS_PREFIX):]
    return None


def list_transcripts(sessions_dir: Path) -> list[Path]:
    """The direct children `is_transcript_name` admits; no symlinks."""
    if not sessions_dir.is_dir():
        return []
    return [p for p in sorted(sessions_dir.iterdir())
            if is_transcript_name(p.name) and not p.is_symlink() and p.is_file()]
