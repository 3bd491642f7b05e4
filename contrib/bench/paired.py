"""Two `evidence.py --out` runs compared question by question: each figure's difference (B − A)
with a 95% paired bootstrap interval, so a difference can be told from the noise of which
questions a set happens to hold.

    python contrib/bench/paired.py shipped.json candidate.json [--mode hybrid] [--metrics turn_recall@5,turn_recall@10]

Both runs must have been written by `evidence.py --out` (which keeps each question's figures) on
the same questions. An interval that holds 0 is a difference the set cannot tell from chance.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

METRICS = ("turn_recall@5", "turn_recall@10", "session_recall@10", "mrr@10")
ROUNDS = 2000
SEED = 7


def paired_interval(diffs: list[float], rounds: int = ROUNDS, seed: int = SEED) -> tuple[float, float, float]:
    """The mean difference and its 95% bootstrap interval (questions resampled with replacement)."""
    d = np.asarray(diffs, dtype=np.float64)
    means = d[np.random.default_rng(seed).integers(0, len(d), (rounds, len(d)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(d.mean()), float(low), float(high)


def compare(a: dict, b: dict, mode: str, metrics: tuple[str, ...]) -> list[tuple[str, str, int, float, float, float]]:
    """Rows (set, metric, questions, difference, low, high) for every set both runs hold."""
    rows = []
    for name in a:
        if name not in b or mode not in a[name] or mode not in b[name]:
            continue
        qa, qb = a[name][mode].get("per_question"), b[name][mode].get("per_question")
        if qa is None or qb is None:
            raise SystemExit(f"paired: {name} {mode}: a run without per-question figures (see evidence.py --out)")
        if set(qa) != set(qb):
            raise SystemExit(f"paired: {name}: the two runs asked different questions")
        for metric in metrics:
            asked = [q for q in qa if metric in qa[q] and metric in qb[q]]
            if asked:
                diff, low, high = paired_interval([qb[q][metric] - qa[q][metric] for q in asked])
                rows.append((name, metric, len(asked), diff, low, high))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path, help="the reference run (evidence.py --out)")
    ap.add_argument("b", type=Path, help="the run compared with it")
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--metrics", default=",".join(METRICS))
    args = ap.parse_args()
    try:
        a, b = (json.loads(p.read_text()) for p in (args.a, args.b))
    except (OSError, ValueError) as exc:
        sys.exit(f"paired: cannot read a run: {exc}")
    print(f"{'set':8} {'figure':18} {'questions':>9}  B − A   95% interval")
    for name, metric, n, diff, low, high in compare(a, b, args.mode, tuple(args.metrics.split(","))):
        print(f"{name:8} {metric:18} {n:9d}  {diff:+.3f}  [{low:+.3f}, {high:+.3f}]")


if __name__ == "__main__":
    main()
