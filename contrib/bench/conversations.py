"""Three more conversational dev sets, written as daily notes by their README recipes.

Each conversation is one workspace: its sessions appended to `memory/<YYYY-MM-DD>.md` (the
session's date) under a heading naming the session, one line per turn `[<turn id>] <speaker>:
<text>` (newlines collapsed). A question carries, besides its evidence turns (`evidence`, as
LongMemEval's), its evidence sessions as line ranges (`sessions`) for session recall, its category
and the line ranges it may not see (`hidden`: RealMem's own and later sessions, which hold the
question and its reply verbatim).

- `locomo`: LoCoMo-10, two people over months, categories 1–4 (1,540 questions; adversarial ones
  have no answer to find). `locomo-audit`: the same with the audit's 57 corrected citations.
  CC BY-NC 4.0: evaluation only.
- `realmem`: RealMem, ten personas' assistant projects among distractor sessions (1,412 questions;
  turn metrics over the 908 with evidence turns). Apache-2.0.
- `beam`: BEAM 100K, twenty long synthetic chats; the retrieval categories (those with evidence).
  No licence: evaluation only.
- `molweni`: Molweni's 100 multiparty Ubuntu chats in one workspace (a daily note each), its 2,560
  answerable questions each asked against all of them. Apache-2.0.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterable

from bench_data import BENCH_DATA, Question, _write_if_changed

__all__ = ["load_locomo", "load_realmem", "load_beam", "load_molweni", "LOCOMO_CATEGORIES"]

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass
class Session:
    sid: str
    day: str  # YYYY-MM-DD
    heading: str
    turns: list[tuple[str, str, str]]  # (turn id, speaker, text)
    order: int = 0


@dataclass
class Written:
    """Where each session and turn landed: session id → (path, first, last line); turn id → (path, line)."""

    sessions: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    turns: dict[str, tuple[str, int]] = field(default_factory=dict)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def write_sessions(ws: Path, sessions: Iterable[Session], memory_md: str) -> Written:
    """Append each session (in the order given) to its day's note; record its lines."""
    files: dict[str, list[str]] = defaultdict(list)
    out = Written()
    for s in sessions:
        rel = f"memory/{s.day}.md"
        lines = files[rel]
        if lines:
            lines.append("")
        lines.append(s.heading)
        first = len(lines)
        for tid, speaker, text in s.turns:
            lines.append(f"[{tid}] {speaker}: {_one_line(text)}")
            out.turns[tid] = (rel, len(lines))
        out.sessions[s.sid] = (rel, first, len(lines))
    for rel, lines in files.items():
        _write_if_changed(ws / rel, "\n".join(lines) + "\n")
    _write_if_changed(ws / "MEMORY.md", memory_md)
    return out


def _evidence_lines(written: Written, turn_ids: Iterable[str]) -> list[tuple[str, tuple[int, ...]]]:
    return [(written.turns[t][0], (written.turns[t][1],)) for t in dict.fromkeys(turn_ids) if t in written.turns]


def _at_noon(day: str) -> float:
    return datetime.strptime(day, "%Y-%m-%d").replace(hour=12, tzinfo=timezone.utc).timestamp()


# --- LoCoMo ------------------------------------------------------------------------------------------


def _locomo_corrections(data: Path) -> dict[tuple[int, int], list[str]]:
    """(sample index, question index) → the audit's corrected evidence ids."""
    fixes = {}
    for e in json.loads((data / "audit-errors.json").read_text(encoding="utf-8")):
        m = re.fullmatch(r"locomo_(\d+)_qa(\d+)", e.get("question_id", ""))
        if m and e.get("error_type") == "WRONG_CITATION" and e.get("correct_evidence"):
            fixes[(int(m[1]), int(m[2]))] = e["correct_evidence"]
    return fixes


def load_locomo(root: Path, data: Path = BENCH_DATA / "locomo", *, audited: bool = False) -> list[Question]:
    samples = json.loads((data / "locomo10.json").read_text(encoding="utf-8"))
    fixes = _locomo_corrections(data) if audited else {}
    questions: list[Question] = []
    for si, sample in enumerate(samples):
        conv = sample["conversation"]
        a, b = conv["speaker_a"], conv["speaker_b"]
        ws = root / "locomo" / sample["sample_id"]
        sessions = []
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            n = int(key.split("_")[1])
            when = datetime.strptime(conv[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
            turns = []
            for t in conv[key]:
                text = t.get("text", "")
                if t.get("blip_caption"):
                    text = f"{text} [shares a photo: {t['blip_caption']}]"
                turns.append((t["dia_id"], t["speaker"], text))
            sessions.append(Session(f"S{n}", when.strftime("%Y-%m-%d"),
                                    f"# Session {n} — {conv[f'{key}_date_time']} ({a} & {b})", turns))
        written = write_sessions(ws, sessions, f"# Memory\n- {a} and {b} are friends who chat now and then.\n")
        now = _at_noon(max(s.day for s in sessions)) + 86400
        for qi, qa in enumerate(sample["qa"]):
            if qa.get("category") not in LOCOMO_CATEGORIES:
                continue
            cited = fixes.get((si, qi), qa.get("evidence") or [])
            ids = [f"D{int(m[1])}:{int(m[2])}" for e in cited for m in _EVIDENCE_ID.finditer(str(e))]
            evidence = _evidence_lines(written, ids)
            if not evidence:
                continue
            spans = [
                written.sessions[sid] for sid in (f"S{i[1:].split(':')[0]}" for i in ids) if sid in written.sessions
            ]
            questions.append(
                Question(
                    qid=f"{sample['sample_id']}:{qi}",
                    qtype=LOCOMO_CATEGORIES[qa["category"]],
                    text=qa["question"],
                    now=now,
                    answer_sessions=[],
                    evidence=evidence,
                    workspace=ws,
                    sessions=list(dict.fromkeys(spans)),
                )
            )
    return questions


# --- RealMem -----------------------------------------------------------------------------------------


def load_realmem(root: Path, data: Path = BENCH_DATA / "realmem") -> list[Question]:
    by_conv: dict[str, list[Session]] = {}
    with open(data / "sessions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            conv = json.loads(line)
            by_conv[conv["conversation_id"]] = [
                Session(s["session_id"], s["date_monotone"], f"## {s['session_id']}",
                        [(t["turn_id"], t["speaker"], t["text"]) for t in s["turns"]], s["order"])
                for s in sorted(conv["sessions"], key=lambda s: s["order"])
            ]
    written = {
        cid: write_sessions(
            root / "realmem" / cid,
            ss,
            f"# Memory\n- {cid.replace('_', ' ')} works with an assistant on several projects.\n",
        )
        for cid, ss in by_conv.items()
    }
    questions: list[Question] = []
    with open(data / "questions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if q["evidence_in_question_session"]:
                continue
            cid, w = q["conversation_id"], written[q["conversation_id"]]
            hidden = [w.sessions[s.sid] for s in by_conv[cid] if s.order >= q["question_session_order"]]
            questions.append(
                Question(
                    qid=q["question_id"],
                    qtype=q["category"],
                    text=q["question"],
                    now=_at_noon(q["question_date_monotone"]),
                    answer_sessions=[],
                    evidence=_evidence_lines(w, q["evidence_turn_ids"]),
                    workspace=root / "realmem" / cid,
                    sessions=[w.sessions[s] for s in dict.fromkeys(q["evidence_session_ids"])],
                    hidden=hidden,
                )
            )
    return questions


# --- BEAM --------------------------------------------------------------------------------------------


def load_beam(root: Path, data: Path = BENCH_DATA / "beam_100k") -> list[Question]:
    written: dict[str, Written] = {}
    last_day: dict[str, str] = {}
    with open(data / "sessions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            conv = json.loads(line)
            cid = conv["conversation_id"]
            sessions = [Session(s["session_id"], s["date"], f"## Conversation {s['session_id']}",
                                [(f"{cid}#{t['turn_id']}", t["speaker"], t["text"]) for t in s["turns"]])
                        for s in conv["sessions"]]
            written[cid] = write_sessions(
                root / "beam" / cid, sessions, f"# Memory\n- Chats with an assistant about {conv['topic_title']}.\n"
            )
            last_day[cid] = max(s.day for s in sessions)
    questions: list[Question] = []
    with open(data / "questions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            cid, w = q["conversation_id"], written[q["conversation_id"]]
            evidence = _evidence_lines(w, (f"{cid}#{t}" for t in q["evidence_turn_ids"]))
            if not evidence:
                continue  # abstention, and the few questions the source gives no evidence
            questions.append(
                Question(
                    qid=q["question_id"],
                    qtype=q["category"],
                    text=q["question"],
                    now=(datetime.strptime(last_day[cid], "%Y-%m-%d") + timedelta(days=1))
                    .replace(tzinfo=timezone.utc)
                    .timestamp(),
                    answer_sessions=[],
                    evidence=evidence,
                    workspace=root / "beam" / cid,
                    sessions=[w.sessions[s] for s in dict.fromkeys(q["evidence_session_ids"])],
                )
            )
    return questions


# --- Molweni -----------------------------------------------------------------------------------------


def load_molweni(root: Path, data: Path = BENCH_DATA / "molweni") -> list[Question]:
    """One workspace of all 100 chats (their README's recipe): each a session of its own day."""
    sessions: list[Session] = []
    with open(data / "sessions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            conv = json.loads(line)
            sessions += [Session(s["session_id"], s["date"], f"## Chat {conv['conversation_id']}",
                                 [(t["turn_id"], t["speaker"], t["text"]) for t in s["turns"]])
                         for s in conv["sessions"]]
    ws = root / "molweni" / "all"
    written = write_sessions(ws, sessions, "# Memory\n- Chats from the Ubuntu IRC channel.\n")
    session_of = {t: s.sid for s in sessions for t, _speaker, _text in s.turns}
    now = (datetime.strptime(max(s.day for s in sessions), "%Y-%m-%d") + timedelta(days=1)).replace(
        tzinfo=timezone.utc).timestamp()
    questions: list[Question] = []
    with open(data / "questions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            evidence = _evidence_lines(written, q["evidence_turn_ids"])
            if not q["answerable"] or not evidence:
                continue
            questions.append(
                Question(
                    qid=q["question_id"],
                    qtype="answerable",
                    text=q["question"],
                    now=now,
                    answer_sessions=[],
                    evidence=evidence,
                    workspace=ws,
                    sessions=[written.sessions[session_of[t]] for t in dict.fromkeys(q["evidence_turn_ids"])],
                )
            )
    return questions
