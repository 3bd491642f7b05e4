"""Export session transcripts (JSONL) as Markdown for QMD (`memory.qmd.sessions`).

Each `<sessions>/<name>.jsonl` with an mtime inside `retentionDays` becomes
`<exportDir>/<name>.md`: `# Session <name>`, then one `User: …` / `Assistant: …` line per message,
secrets redacted. Files are rewritten only when their source changed; exports of transcripts that
are gone (or too old) are removed. Only `.md` files this exporter wrote are ever deleted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from memsift.engine.private_dirs import make_private_dir
from memsift.engine.transcripts import flatten_transcript, list_transcripts

__all__ = ["export_sessions"]

MARKER = "<!-- exported by memsift from {source} -->"


def export_sessions(sessions_dir: Path, export_dir: Path, retention_days: float | None) -> dict[str, int]:
    make_private_dir(export_dir)
    cutoff = time.time() - retention_days * 86400 if retention_days else None
    wanted: set[str] = set()
    written = unchanged = 0
    for src in list_transcripts(sessions_dir):
        try:
            st = os.lstat(src)
        except OSError:
            continue
        if cutoff and st.st_mtime < cutoff:
            continue
        name = src.name.replace(".jsonl", "", 1)
        target = export_dir / f"{name}.md"
        wanted.add(target.name)
        lines = flatten_transcript(src.read_text(encoding="utf-8", errors="replace")).lines
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
