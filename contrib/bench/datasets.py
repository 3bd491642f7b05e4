"""Benchmark workspaces built from ../shared/bench-data, following its README recipes.

- SciFact (BEIR): one Markdown file per abstract, `memory/docs/<_id>.md` = `# <title>` + text.
- LongMemEval (oracle split): all 940 unique sessions in one workspace, each appended to
  `memory/<YYYY-MM-DD>.md` (its haystack date) under a heading naming the session id, one turn per
  line as `[<session_id>#<turn>] user: …`. The line range of every session's turns is recorded: a
  hit is relevant when the turns it shows all belong to one answer session (the blank lines and
  headings between sessions belong to none, so a hit showing a heading and the first turns below
  it still falls inside that session).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["BENCH_DATA", "SciFact", "LongMemEval", "load_scifact", "load_longmemeval"]

BENCH_DATA = Path(__file__).resolve().parents[3] / "shared" / "bench-data"


@dataclass
class SciFact:
    workspace: Path
    queries: dict[str, str]  # query id → claim
    qrels: dict[str, dict[str, dict[str, int]]]  # split → query id → doc id → relevance

    def split(self, name: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        rels = self.qrels[name]
        return {q: self.queries[q] for q in rels if q in self.queries}, rels


@dataclass
class Question:
    qid: str
    qtype: str
    text: str
    now: float  # the question's date, as a POSIX timestamp (UTC)
    answer_sessions: list[str]


@dataclass
class LongMemEval:
    workspace: Path
    questions: list[Question]
    sessions: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # id → (path, first, last turn line)

    def session_of(self, path: str, start: int, end: int) -> str | None:
        """The one session whose turns the line range shows, or None (no turn, or two sessions)."""
        shown = [sid for sid in self._by_path.get(path, ()) if self.sessions[sid][1] <= end and start <= self.sessions[sid][2]]
        return shown[0] if len(shown) == 1 else None

    def __post_init__(self) -> None:
        self._by_path: dict[str, list[str]] = defaultdict(list)
        for sid, (p, _lo, _hi) in self.sessions.items():
            self._by_path[p].append(sid)


def _write_if_changed(path: Path, text: str) -> None:
    """Rewrite only what differs, so a rebuilt workspace keeps its mtimes (and its index stays valid)."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def load_scifact(root: Path, data: Path = BENCH_DATA / "scifact") -> SciFact:
    ws = root / "scifact"
    docs = ws / "memory" / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    with open(data / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            body = " ".join(d["text"].split()) if isinstance(d["text"], str) else ""
            _write_if_changed(docs / f"{d['_id']}.md", f"# {d['title'].strip()}\n\n{body}\n")
    queries = {}
    with open(data / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in ("train", "test"):
        rels: dict[str, dict[str, int]] = defaultdict(dict)
        with open(data / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                rels[row["query-id"]][row["corpus-id"]] = int(row["score"])
        qrels[split] = dict(rels)
    return SciFact(ws, queries, qrels)


def _lme_date(text: str) -> datetime:
    # "2023/05/30 (Tue) 23:40"
    day, _weekday, clock = text.split()
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


def load_longmemeval(root: Path, path: Path = BENCH_DATA / "longmemeval_oracle.json") -> LongMemEval:
    ws = root / "longmemeval"
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions: dict[str, tuple[datetime, list[dict]]] = {}
    for item in data:
        for sid, date, turns in zip(item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]):
            sessions.setdefault(sid, (_lme_date(date), turns))
    by_day: dict[str, list[str]] = defaultdict(list)
    for sid, (when, _turns) in sorted(sessions.items(), key=lambda kv: (kv[1][0], kv[0])):
        by_day[when.strftime("%Y-%m-%d")].append(sid)
    ranges: dict[str, tuple[str, int, int]] = {}
    for day, sids in by_day.items():
        rel = f"memory/{day}.md"
        lines = [f"# {day}", ""]
        for sid in sids:
            when, turns = sessions[sid]
            lines.append(f"## Session {sid} ({when.strftime('%H:%M')})")
            first = len(lines) + 1
            for i, turn in enumerate(turns):
                content = " ".join(str(turn.get("content", "")).split())
                lines.append(f"[{sid}#{i}] {turn.get('role', 'user')}: {content}")
            ranges[sid] = (rel, first, len(lines))
            lines.append("")
        _write_if_changed(ws / rel, "\n".join(lines) + "\n")
    questions = [
        Question(
            qid=item["question_id"],
            qtype=item["question_type"],
            text=item["question"],
            now=_lme_date(item["question_date"]).timestamp(),
            answer_sessions=list(item["answer_session_ids"]),
        )
        for item in data
        if not item["question_id"].endswith("_abs")
    ]
    return LongMemEval(ws, questions, ranges)
