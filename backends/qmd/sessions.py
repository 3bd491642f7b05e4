"""Export session transcripts (JSONL) as Markdown for QMD (`memory.qmd.sessions`).

Each `<sessions>/<name>.jsonl` with an mtime inside `retentionDays` becomes
`<exportDir>/<name>.md`: `# Session <name>`, then one `User: …` / `Assistant: …` line per message,
secrets redacted. Files are rewritten only when their source changed; exports of transcripts that
are gone (or too old) are removed. Only `.md` files this exporter wrote are ever deleted.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

__all__ = ["flatten_transcript", "export_sessions", "redact_text"]

MARKER = "<!-- exported by memsift from {source} -->"
_SECRET_RES = [
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\b(ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/-]{16,}=*"),
    re.compile(r"(?i)\b(api[_-]?key|token|secret|password)\s*[:=]\s*\S{6,}"),
]


def redact_text(text: str) -> str:
    for rx in _SECRET_RES:
        text = rx.sub("[redacted]", text)
    return text


def _message_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def flatten_transcript(raw: str) -> list[str]:
    """`User: …` / `Assistant: …` lines from a session JSONL (invalid lines skipped)."""
    lines = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        if not isinstance(msg, dict) or rec.get("type") != "message" or msg.get("role") not in ("user", "assistant"):
            continue
        text = " ".join(_message_text(msg.get("content")).split())
        if text:
            lines.append(f"{'User' if msg['role'] == 'user' else 'Assistant'}: {redact_text(text)}")
    return lines


def export_sessions(sessions_dir: Path, export_dir: Path, retention_days: float | None) -> dict[str, int]:
    export_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    cutoff = time.time() - retention_days * 86400 if retention_days else None
    wanted: set[str] = set()
    written = unchanged = 0
    sources = sorted(sessions_dir.glob("*.jsonl")) if sessions_dir.is_dir() else []
    for src in sources:
        try:
            st = os.lstat(src)
        except OSError:
            continue
        if not src.is_file() or src.is_symlink() or (cutoff and st.st_mtime < cutoff):
            continue
        name = src.name[: -len(".jsonl")]
        target = export_dir / f"{name}.md"
        wanted.add(target.name)
        lines = flatten_transcript(src.read_text(encoding="utf-8", errors="replace"))
        body = f"# Session {name}\n{MARKER.format(source=src.name)}\n\n" + ("\n".join(lines) or "(empty)") + "\n"
        if target.exists() and target.read_text(encoding="utf-8", errors="replace") == body:
            unchanged += 1
            continue
        tmp = target.with_suffix(".md.tmp")
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, target)
        written += 1
    removed = 0
    for old in export_dir.glob("*.md"):
        if old.name not in wanted and "exported by memsift" in old.read_text(encoding="utf-8", errors="replace")[:300]:
            old.unlink()
            removed += 1
    return {"written": written, "unchanged": unchanged, "removed": removed}
