"""contrib/bench/paired.py: two evidence runs compared question by question."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"
sys.path.insert(0, str(CONTRIB / "bench"))

import paired  # noqa: E402


def _run(recalls: list[float]) -> dict:
    per_question = {f"q{i}": {"turn_recall@5": r, "mrr@10": r / 2} for i, r in enumerate(recalls)}
    return {"locomo": {"hybrid": {"per_question": per_question}}}


def test_a_real_difference_is_told_from_no_difference() -> None:
    a = _run([0.0, 1.0] * 100)
    better = _run([1.0, 1.0] * 100)  # half the questions gain 1: +0.5
    rows = {(s, m): (n, d, lo, hi) for s, m, n, d, lo, hi in paired.compare(a, better, "hybrid", ("turn_recall@5",))}
    n, diff, low, high = rows["locomo", "turn_recall@5"]
    assert n == 200 and diff == pytest.approx(0.5)
    assert 0.35 < low < 0.5 < high < 0.65

    shuffled = _run([1.0, 0.0] * 100)  # as many gains as losses: the interval holds 0
    (_, _, _, diff, low, high), = paired.compare(a, shuffled, "hybrid", ("turn_recall@5",))
    assert diff == 0 and low < 0 < high


def test_runs_without_per_question_figures_or_other_questions_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="per-question"):
        paired.compare({"beam": {"hybrid": {"turn_recall@5": 0.5}}}, _run([1.0]) | {"beam": {"hybrid": {}}},
                       "hybrid", ("turn_recall@5",))
    with pytest.raises(SystemExit, match="different questions"):
        paired.compare(_run([1.0, 0.0]), _run([1.0]), "hybrid", ("turn_recall@5",))


def test_the_command_prints_each_sets_difference(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_run([0.0, 1.0] * 50)))
    (tmp_path / "b.json").write_text(json.dumps(_run([1.0] * 100)))
    out = subprocess.run([sys.executable, str(CONTRIB / "bench" / "paired.py"), str(tmp_path / "a.json"),
                          str(tmp_path / "b.json"), "--metrics", "turn_recall@5,mrr@10"],
                         capture_output=True, text=True, check=True).stdout
    assert "locomo   turn_recall@5" in out and "+0.500" in out and "+0.250" in out
    bad = subprocess.run([sys.executable, str(CONTRIB / "bench" / "paired.py"), str(tmp_path / "a.json"),
                          str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert bad.returncode != 0 and "cannot read a run" in bad.stderr and "Traceback" not in bad.stderr
