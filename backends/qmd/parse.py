"""Reading QMD's output tolerantly: search JSON (noise around it, no-results markers, `[]`),
`qmd://collection/path` URIs, the snippet's `@@ -start,count` header, `status` and `--version`."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .process import QmdOutputError

__all__ = ["QmdHit", "parse_search_output", "parse_file_uri", "parse_ls", "spelled_on_disk", "parse_snippet",
           "parse_status", "parse_version"]

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NO_RESULTS_RE = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)?(?:(?:warn|warning|info|error|qmd)\s*:?\s*)?no results found", re.I | re.M
)
_INDEX_SUFFIX_RE = re.compile(r"\?index=[^/?]*$")
_HEADER_RE = re.compile(r"^@@ -(\d+),(\d+) @@[^\n]*\n?")


@dataclass(frozen=True)
class QmdHit:
    docid: str | None
    score: float
    collection: str | None
    path: str | None  # collection-relative, as QMD printed it (see spelled_on_disk)
    title: str | None
    snippet: str  # without the @@ header
    start_line: int | None
    end_line: int | None


def parse_file_uri(uri: str) -> tuple[str | None, str | None]:
    """`qmd://coll/sub/file.md?index=x` → ("coll", "sub/file.md"). The path is kept as printed:
    QMD's CLI prints names unencoded (`q?.md`, `50%25.md` is a file called so), other outputs
    URL-encode them; `spelled_on_disk` tells which (only a trailing `?index=` is QMD's)."""
    if not uri.startswith("qmd://"):
        return None, uri or None
    rest = _INDEX_SUFFIX_RE.sub("", uri[len("qmd://") :])
    coll, _, path = rest.partition("/")
    return unquote(coll) or None, path or None


def spelled_on_disk(root: Path, path: str) -> str:
    """A hit's collection-relative `path` as the file is named under `root`: as printed when such a
    file exists, else URL-decoded when that one does, else as printed."""
    if os.path.lexists(root / path):
        return path
    decoded = unquote(path)
    return decoded if decoded != path and os.path.lexists(root / decoded) else path


def parse_ls(out: str, collection: str) -> list[str]:
    """The collection-relative names `qmd ls <collection>` printed (`44 B  Dec  7 14:18  qmd://c/a.md`
    a line), unencoded as QMD prints them; a name holding a newline runs on to the next entry's line."""
    pieces = _ANSI_RE.sub("", out).split(f"qmd://{collection}/")[1:]
    names = []
    for i, piece in enumerate(pieces):
        if i + 1 < len(pieces):
            piece = piece.rsplit("\n", 1)[0]  # the last line is the next entry's size and date
        names.append(_INDEX_SUFFIX_RE.sub("", piece.rstrip("\r\n")))
    return [n for n in names if n]


def parse_snippet(snippet: str) -> tuple[int | None, int | None, str]:
    """(start, end, text): the header gives START,COUNT of the source lines that follow."""
    m = _HEADER_RE.match(snippet or "")
    if not m:
        return None, None, snippet or ""
    start, count = int(m.group(1)), int(m.group(2))
    return start, start + max(count, 1) - 1, snippet[m.end() :]


def _starts_a_line(text: str, i: int) -> bool:
    return not text[text.rfind("\n", 0, i) + 1 : i].strip()


def _first_json_array(text: str) -> str | None:
    """The first balanced `[...]` in `text` that opens a line (QMD prints its JSON on lines of its
    own; `error [0] happened` is no answer), skipping brackets inside strings."""
    start = text.find("[")
    while start != -1 and not _starts_a_line(text, start):
        start = text.find("[", start + 1)
    while start != -1:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
                if depth == 0:
                    candidate = text[start : i + 1]
                    try:
                        json.loads(candidate)
                        return candidate
                    except ValueError:
                        break
        start = text.find("[", start + 1)
        while start != -1 and not _starts_a_line(text, start):
            start = text.find("[", start + 1)
    return None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parse_search_output(stdout: str, stderr: str = "") -> list[QmdHit]:
    """Hits from `qmd search|vsearch|query --json`. Raises QmdOutputError when nothing parses."""
    out = _ANSI_RE.sub("", stdout or "")
    err = _ANSI_RE.sub("", stderr or "")
    if _NO_RESULTS_RE.search(out) or (not out.strip() and _NO_RESULTS_RE.search(err)):
        return []
    if not out.strip():
        raise QmdOutputError(f"qmd returned invalid JSON: stdout empty (stderr: {err.strip()[:117]})")
    try:
        data = json.loads(out)
    except ValueError:
        extracted = _first_json_array(out)
        if extracted is None:
            raise QmdOutputError(f"qmd returned invalid JSON: {out.strip()[:117]}") from None
        data = json.loads(extracted)
    if not isinstance(data, list):
        raise QmdOutputError("qmd returned JSON that is not an array")
    if data and not any(isinstance(item, dict) and isinstance(item.get("file"), str) and item["file"] for item in data):
        # Output that parses but holds no hit is garbage, not "no memories": the fallback answers.
        raise QmdOutputError(f"qmd returned JSON that is not a list of hits: {json.dumps(data)[:117]}")
    hits = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("file"), str) or not item["file"]:
            continue
        score = item.get("score")
        score = float(score) if isinstance(score, (int, float)) and score == score else 0.0
        coll, path = parse_file_uri(str(item.get("file") or ""))
        coll = item.get("collection") if isinstance(item.get("collection"), str) else coll
        start, end, text = parse_snippet(str(item.get("snippet") or item.get("body") or ""))
        explicit_start = _positive_int(item.get("start_line", item.get("startLine")))
        explicit_end = _positive_int(item.get("end_line", item.get("endLine")))
        if explicit_start or explicit_end:
            start = explicit_start or start
            end = explicit_end or end
        if start is None and _positive_int(item.get("line")):
            start = end = item["line"]
        if start is not None and end is not None and end < start:
            start, end = end, start
        if (start or 1) == 1:
            text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark: not text, as memsift reads notes
        docid = item.get("docid")
        hits.append(
            QmdHit(
                docid=str(docid).lstrip("#") if docid else None,
                score=score,
                collection=coll,
                path=path,
                title=item.get("title") if isinstance(item.get("title"), str) else None,
                snippet=text,
                start_line=start,
                end_line=end,
            )
        )
    return hits


def parse_status(stdout: str) -> dict[str, Any]:
    """The numbers of `qmd status`: documents, vectors, pending, index path."""
    text = _ANSI_RE.sub("", stdout or "")
    out: dict[str, Any] = {}
    for key, pattern in (
        ("documents", r"Total:\s+(\d+)"),
        ("vectors", r"Vectors:\s+(\d+)"),
        ("pending", r"Pending:\s+(\d+)"),
    ):
        m = re.search(pattern, text)
        if m:
            out[key] = int(m.group(1))
    m = re.search(r"^Index:\s+(\S.*)$", text, re.M)
    if m:
        out["indexPath"] = m.group(1).strip()
    return out


def parse_version(stdout: str) -> str | None:
    m = re.search(r"qmd\s+(\d+\.\d+\.\d+)", stdout or "")
    return m.group(1) if m else None
