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

__all__ = ["BENCH_DATA", "SciFact", "LongMemEval", "Chats", "load_scifact", "load_longmemeval", "load_chats"]

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
    # The turns marked `has_answer`, each as (path, its line numbers): the evidence an agent must see.
    evidence: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    workspace: Path | None = None  # set when the questions of a set span several workspaces
    # The evidence sessions as (path, first, last line), for session recall (empty: not scored).
    sessions: list[tuple[str, int, int]] = field(default_factory=list)
    # Line ranges the question may not be answered from (RealMem: its own and later sessions).
    hidden: list[tuple[str, int, int]] = field(default_factory=list)


@dataclass
class LongMemEval:
    workspace: Path
    questions: list[Question]
    sessions: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # id → (path, first, last turn line)

    def session_of(self, path: str, start: int, end: int) -> str | None:
        """The one session whose turns the line range shows, or None (no turn, or two sessions)."""
        shown = [
            sid
            for sid in self._by_path.get(path, ())
            if self.sessions[sid][1] <= end and start <= self.sessions[sid][2]
        ]
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
    turn_line: dict[tuple[str, int], int] = {}
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
                turn_line[(sid, i)] = len(lines)
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
            sessions=[ranges[sid] for sid in item["answer_session_ids"] if sid in ranges],
            evidence=[
                (ranges[sid][0], (turn_line[(sid, i)],))
                for sid, turns in zip(item["haystack_session_ids"], item["haystack_sessions"])
                for i, turn in enumerate(turns)
                if turn.get("has_answer")
            ],
        )
        for item in data
        if not item["question_id"].endswith("_abs")
    ]
    return LongMemEval(ws, questions, ranges)


# --- a second conversational layout: chats between two named people ------------------------------

PAIRS = [
    ("Jordan", "Riley"), ("Priya", "Tomas"), ("Aiko", "Bruno"), ("Fatima", "Oskar"), ("Ines", "Ravi"),
    ("Hana", "Diego"), ("Mei", "Lukas"), ("Sofia", "Kwame"), ("Elena", "Marcus"), ("Nadia", "Theo"),
]
_PRONOUNS = [  # first person → the asking person's name, so questions name people as chat questions do
    (r"\bI'm\b", "{a} is"), (r"\bI've\b", "{a} has"), (r"\bI'd\b", "{a} would"), (r"\bI'll\b", "{a} will"),
    (r"\bmyself\b", "{a}"), (r"\b[Mm]ine\b", "{a}'s"), (r"\b[Mm]y\b", "{a}'s"), (r"\bme\b", "{a}"), (r"\bI\b", "{a}"),
]


@dataclass
class Chats:
    """Questions over several workspaces (each question carries its own)."""

    workspaces: list[Path]
    questions: list[Question]


def _third_person(question: str, name: str) -> str:
    import re  # noqa: PLC0415

    for pattern, repl in _PRONOUNS:
        question = re.sub(pattern, repl.format(a=name), question)
    return question


def load_chats(root: Path, path: Path = BENCH_DATA / "longmemeval_oracle.json", groups: int = 10) -> Chats:
    """LongMemEval's sessions as chats between two named people, the way a chat logger writes them.

    The 470 questions are split into `groups` workspaces (by a hash of the question id); each holds
    its questions' sessions as daily logs `memory/YYYY-MM-DD.md`, one `# Session N — date time
    (A & B)` heading per session, one line per paragraph of a turn, each tagged `[DN:i] Name:`
    (as a chat app sends a long answer in several messages), and a two-line MEMORY.md naming the
    two people. Questions speak of the user
    by name ("What is Jordan's cat called?"). Unlike `load_longmemeval`: short lines (median 128
    characters, as in chat logs), a speaker name on every line, turns that span lines, smaller
    workspaces with a near-empty MEMORY.md, and questions that name people. Evidence: the lines of the `has_answer`
    turns.
    """
    import hashlib  # noqa: PLC0415

    data = [item for item in json.loads(path.read_text(encoding="utf-8")) if not item["question_id"].endswith("_abs")]
    by_group: dict[int, list[dict]] = defaultdict(list)
    for item in data:
        by_group[int(hashlib.sha1(item["question_id"].encode()).hexdigest(), 16) % groups].append(item)
    workspaces, questions = [], []
    for g in sorted(by_group):
        a, b = PAIRS[g % len(PAIRS)]
        ws = root / "chats" / f"group-{g:02d}"
        workspaces.append(ws)
        sessions: dict[str, tuple[datetime, list[dict]]] = {}
        for item in by_group[g]:
            for sid, date, turns in zip(
                item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
            ):
                sessions.setdefault(sid, (_lme_date(date), turns))
        order = sorted(sessions, key=lambda sid: (sessions[sid][0], sid))
        files: dict[str, list[str]] = defaultdict(list)
        turn_lines: dict[tuple[str, int], tuple[str, tuple[int, ...]]] = {}
        spans: dict[str, tuple[str, int, int]] = {}
        for n, sid in enumerate(order, start=1):
            when, turns = sessions[sid]
            rel = f"memory/{when.strftime('%Y-%m-%d')}.md"
            lines = files[rel]
            if lines:
                lines.append("")
            lines.append(f"# Session {n} — {when.strftime('%Y-%m-%d %H:%M')} ({a} & {b})")
            heading = len(lines)
            for i, turn in enumerate(turns):
                speaker = a if turn.get("role") == "user" else b
                paras = [p.strip() for p in str(turn.get("content", "")).split("\n") if p.strip()] or [""]
                first = len(lines) + 1
                lines.extend(f"[D{n}:{i + 1}] {speaker}: {p}" for p in paras)  # a chat app's one message per line
                turn_lines[(sid, i)] = (rel, tuple(range(first, len(lines) + 1)))
            spans[sid] = (rel, heading, len(lines))
        for rel, lines in files.items():
            _write_if_changed(ws / rel, "\n".join(lines) + "\n")
        _write_if_changed(ws / "MEMORY.md", f"# Memory\n- {a} and {b} are long-term friends.\n")
        for item in by_group[g]:
            questions.append(
                Question(
                    qid=item["question_id"],
                    qtype=item["question_type"],
                    text=_third_person(item["question"], a),
                    now=_lme_date(item["question_date"]).timestamp(),
                    answer_sessions=list(item["answer_session_ids"]),
                    sessions=[spans[sid] for sid in item["answer_session_ids"] if sid in spans],
                    evidence=[
                        turn_lines[(sid, i)]
                        for sid, turns in zip(item["haystack_session_ids"], item["haystack_sessions"])
                        for i, turn in enumerate(turns)
                        if turn.get("has_answer")
                    ],
                    workspace=ws,
                )
            )
    return Chats(workspaces, questions)
