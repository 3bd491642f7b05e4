"""Export session transcripts (JSONL) as Markdown for QMD (`memory.qmd.sessions`).

Each `<sessions>/<name>.jsonl` with an mtime inside `retentionDays` becomes
`<exportDir>/<name>.md`: `# Session <name>`, then one `User: …` / `Assistant: …` line per message,
secrets redacted. Files are rewritten only when their text changed; exports of transcripts that
are gone (or too old) are removed.

memsift touches only files it wrote, known by a manifest of names and content hashes in its state
folder (`manifest`), never by a marker in the text: an existing file it did not write (or that
was edited since) is never replaced or deleted, and a new export is linked into place so that a
file created meanwhile is not overwritten either. The config refuses an export folder among the
memory files (`engine/config/load.py`), so this is the second line of defence.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from memsift.engine.logging import get_logger
from memsift.engine.private_dirs import make_private_dir
from memsift.engine.files.transcripts import flatten_transcript, list_transcripts

__all__ = ["export_sessions", "ExportReport", "MARKER"]

log = get_logger("memsift.qmd.sessions")

MARKER = "<!-- exported by memsift from {source} -->"  # for readers; deletion never relies on it
MANIFEST_VERSION = 1


@dataclass
class ExportReport:
    written: int = 0
    unchanged: int = 0
    removed: int = 0
    kept: list[str] = field(default_factory=list)  # names memsift left alone: files it did not write

    def as_dict(self) -> dict[str, int]:
        return {"written": self.written, "unchanged": self.unchanged, "removed": self.removed}

    def notes(self) -> list[str]:
        if not self.kept:
            return []
        shown = ", ".join(self.kept[:5]) + (f" and {len(self.kept) - 5} more" if len(self.kept) > 5 else "")
        return [f"session export: left {len(self.kept)} file(s) alone that memsift did not write ({shown}); "
                "their transcripts are not exported (memory.qmd.sessions.exportDir should be a folder of its own)"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _regular_digest(path: Path) -> str | None:
    """The content hash of a regular file (never through a symlink); None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        h = hashlib.sha256()
        while block := fh.read(2**20):
            h.update(block)
    return h.hexdigest()


def _load_manifest(path: Path, export_dir: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("dir") != str(export_dir) or not isinstance(data.get("files"), dict):
        return {}  # another export folder's files are not ours to touch here
    # Only a plain name of an export inside the folder: a tampered entry ("../memory/x.md", an
    # absolute path) must never reach an unlink outside it.
    return {str(k): str(v) for k, v in data["files"].items() if _is_export_name(str(k))}


def _is_export_name(name: str) -> bool:
    """A file name memsift could have written: `<name>.md`, one component, no separators."""
    return name.endswith(".md") and Path(name).name == name and not any(c in name for c in ("/", "\\", "\0"))


def _save_manifest(path: Path, export_dir: Path, files: dict[str, str]) -> None:
    make_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".manifest-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"version": MANIFEST_VERSION, "dir": str(export_dir), "files": dict(sorted(files.items()))}, fh)
    os.replace(tmp, path)


def _write_new(export_dir: Path, target: Path, body: bytes, *, replace: bool) -> bool:
    """Write `body` at `target` through a private temp file. A new file is linked into place (it
    fails if a file appeared meanwhile: nothing is overwritten); `replace` swaps one of ours."""
    fd, tmp = tempfile.mkstemp(dir=export_dir, prefix=".memsift-export-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        if replace:
            os.replace(tmp, target)
            return True
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def export_sessions(
    sessions_dir: Path, export_dir: Path, retention_days: float | None, *, manifest: Path
) -> ExportReport:
    """Export the transcripts. `manifest` (a file in memsift's state folder) records what memsift
    wrote, so only those files are ever rewritten or deleted."""
    make_private_dir(export_dir)
    ours = _load_manifest(manifest, export_dir)
    cutoff = time.time() - retention_days * 86400 if retention_days else None
    report = ExportReport()
    wanted: set[str] = set()
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
        try:
            with open(src, encoding="utf-8", errors="replace") as fh:
                lines = flatten_transcript(fh).lines  # line by line: never the whole file in memory
        except OSError:  # gone or unreadable since it was listed: left for the next export
            continue
        body = (
            f"# Session {name}\n{MARKER.format(source=src.name)}\n\n" + ("\n".join(lines) or "(empty)") + "\n"
        ).encode()
        digest = _sha(body)
        current = _regular_digest(target)
        exists = os.path.lexists(target)
        if current == digest:
            ours[target.name] = digest  # the very text memsift writes: its own export
            report.unchanged += 1
        elif not exists:
            if _write_new(export_dir, target, body, replace=False):
                ours[target.name] = digest
                report.written += 1
            else:
                report.kept.append(target.name)
        elif current is not None and ours.get(target.name) == current:
            _write_new(export_dir, target, body, replace=True)  # memsift's own, outdated
            ours[target.name] = digest
            report.written += 1
        else:  # a file (or symlink, or folder) memsift did not write, or one edited since
            ours.pop(target.name, None)
            report.kept.append(target.name)
    for name in sorted(set(ours) - wanted):
        path = export_dir / name
        if _regular_digest(path) == ours[name]:
            path.unlink()
            report.removed += 1
        ours.pop(name)  # gone, or edited by someone else: no longer memsift's either way
    _save_manifest(manifest, export_dir, ours)
    if report.kept:
        log.warning("session export left files alone that memsift did not write", files=report.kept[:10])
    return report
