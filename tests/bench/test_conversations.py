"""The conversational dev sets' recipe (contrib/bench/conversations.py) and their metrics: what the
figures in docs/performance.md are computed from. Small LoCoMo- and RealMem-shaped samples
are written here, so no benchmark data is needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

from conversations import load_locomo, load_realmem  # noqa: E402
from evidence import _overlaps, evidence_metrics  # noqa: E402


def _locomo_sample(folder: Path) -> Path:
    conv = {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
            {
                "speaker": "Melanie",
                "dia_id": "D1:2",
                "text": "I painted a lake\nsunrise last year.",
                "blip_caption": "a painting of a lake",
            },
        ],
        "session_2_date_time": "9:00 am on 20 May, 2023",
        "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "I went to the support group."}],
    }
    qa = [
        {"question": "When did Melanie paint a sunrise?", "answer": "2022", "evidence": ["D1:1"], "category": 2},
        {"question": "What did they both do?", "answer": "x", "evidence": ["D1:02; D:2:1"], "category": 1},
        {"question": "Unanswerable?", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
    ]
    folder.mkdir(parents=True)
    (folder / "locomo10.json").write_text(json.dumps([{"sample_id": "conv-1", "conversation": conv, "qa": qa}]))
    audit = [
        {
            "question_id": "locomo_0_qa0",
            "error_type": "WRONG_CITATION",
            "cited_evidence": ["D1:1"],
            "correct_evidence": ["D1:2"],
        }
    ]
    (folder / "audit-errors.json").write_text(json.dumps(audit))
    return folder


def test_locomo_is_written_one_turn_a_line_in_daily_notes_and_its_evidence_points_at_those_lines(tmp_path):
    data = _locomo_sample(tmp_path / "data")
    questions = load_locomo(tmp_path / "ws", data)
    ws = tmp_path / "ws" / "locomo" / "conv-1"
    day = (ws / "memory" / "2023-05-08.md").read_text().splitlines()
    assert day[0] == "# Session 1 — 1:56 pm on 8 May, 2023 (Caroline & Melanie)"
    assert day[2] == "[D1:2] Melanie: I painted a lake sunrise last year. [shares a photo: a painting of a lake]"
    assert (ws / "memory" / "2023-05-20.md").exists() and "Caroline" in (ws / "MEMORY.md").read_text()
    assert [q.qtype for q in questions] == ["temporal", "multi-hop"]  # the adversarial one has no answer to find
    assert questions[0].evidence == [("memory/2023-05-08.md", (2,))]
    # Malformed ids ("D1:02; D:2:1") are read as two turns of two sessions.
    assert questions[1].evidence == [("memory/2023-05-08.md", (3,)), ("memory/2023-05-20.md", (2,))]
    assert questions[1].sessions == [("memory/2023-05-08.md", 1, 3), ("memory/2023-05-20.md", 1, 2)]
    audited = load_locomo(tmp_path / "ws", data, audited=True)
    assert audited[0].evidence == [("memory/2023-05-08.md", (3,))]


def _hit(path: str, start: int, end: int) -> SimpleNamespace:
    return SimpleNamespace(path=path, start_line=start, end_line=end, snippet="x" * 200)


def test_session_recall_counts_the_evidence_sessions_a_top_10_hit_shows_lines_of(tmp_path):
    questions = load_locomo(tmp_path / "ws", _locomo_sample(tmp_path / "data"))
    multi = questions[1]
    one_session = evidence_metrics(multi, [_hit("memory/2023-05-08.md", 1, 2)])
    assert one_session["session_recall@10"] == 0.5 and one_session["turn_recall@10"] == 0.0
    both = evidence_metrics(multi, [_hit("memory/2023-05-08.md", 2, 3), _hit("memory/2023-05-20.md", 2, 2)])
    assert both["session_recall@10"] == 1.0 and both["turn_recall@10"] == 1.0 and both["mrr@10"] == 1.0
    assert both["lines@10"] == 1.5


def test_realmem_hides_the_question_s_own_and_later_sessions(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    sessions = [
        {"session_id": f"P:S1_0{i}", "order": i, "date_monotone": "2026-01-0" + str(i + 1),
         "turns": [{"turn_id": f"P:S1_0{i}#0", "speaker": "User", "text": f"turn {i}"},
                   {"turn_id": f"P:S1_0{i}#1", "speaker": "Assistant", "text": "ok\nsure"}]}
        for i in range(3)
    ]
    (data / "sessions.jsonl").write_text(json.dumps({"conversation_id": "Ann", "sessions": sessions}) + "\n")
    q = {
        "question_id": "Ann:Q-1",
        "conversation_id": "Ann",
        "question": "What next?",
        "category": "Dynamic Incremental",
        "question_date_monotone": "2026-01-02",
        "question_session_order": 1,
        "evidence_in_question_session": False,
        "evidence_turn_ids": ["P:S1_00#0"],
        "evidence_session_ids": ["P:S1_00"],
    }
    (data / "questions.jsonl").write_text(json.dumps(q) + "\n")
    [question] = load_realmem(tmp_path / "ws", data)
    assert question.evidence == [("memory/2026-01-01.md", (2,))]
    assert question.hidden == [("memory/2026-01-02.md", 1, 3), ("memory/2026-01-03.md", 1, 3)]
    assert _overlaps(_hit("memory/2026-01-02.md", 3, 3), question.hidden)
    assert not _overlaps(_hit("memory/2026-01-01.md", 1, 3), question.hidden)
    line = (tmp_path / "ws" / "realmem" / "Ann" / "memory" / "2026-01-01.md").read_text().splitlines()[2]
    assert line == "[P:S1_00#1] Assistant: ok sure"
