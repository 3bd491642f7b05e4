"""What helps questions that need several turns? Reorderings of the ranked pools, measured on every set.

Reads the pools `train_ranker.py` cached (the hybrid top 40 of each question, ranker off), orders
each by the shipped evidence ranker, then tries a spread over files (daily notes: a session or a
day) before cutting to 10: each hit loses `penalty` × the number of hits of its file already taken.
Prints turn recall@10, session recall@10 and MRR@10 per set and per category, so a reordering that
helps multi-hop questions on one set and hurts elsewhere is seen at once.

    python contrib/bench/train_ranker.py --check locomo,realmem,beam   # collect the pools first
    python contrib/bench/pool_study.py --sets lme,chats,locomo,realmem,beam
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from evidence import K, evidence_metrics, load_set  # noqa: E402
from metrics import mean  # noqa: E402

from train_ranker import _with_features  # noqa: E402

from memsift.engine.rerank import evidence as ranker  # noqa: E402

Order = Callable[[list[Any], np.ndarray], list[int]]


def shipped_weights() -> np.ndarray:
    model = ranker.load_model()
    return np.array([1.0] + [model.weights.get(f, 0.0) for f in ranker.FEATURES])


def by_score(weights: np.ndarray) -> Order:
    return lambda hits, x: sorted(range(len(hits)), key=lambda i: (-(x[i] @ weights), i))


def spread(weights: np.ndarray, penalty: float) -> Order:
    """Greedy: the best hit next, each hit's score lowered by `penalty` per hit of its file taken."""
    def order(hits: list[Any], x: np.ndarray) -> list[int]:
        scores = x @ weights
        left, taken, per_file = list(range(len(hits))), [], defaultdict(int)
        while left and len(taken) < K:
            best = max(left, key=lambda i: (scores[i] - penalty * per_file[hits[i].path], -i))
            taken.append(best)
            left.remove(best)
            per_file[hits[best].path] += 1
        return taken + sorted(left, key=lambda i: -scores[i])
    return order


def measure(pools: list[tuple], order: Order) -> dict[str, Any]:
    rows = []
    for q, hits, x, _y in pools:
        m = evidence_metrics(q, [hits[i] for i in order(hits, x)])
        rows.append((q.qtype, m))
    out: dict[str, Any] = {
        k: mean(m[k] for _t, m in rows if k in m) for k in ("turn_recall@10", "mrr@10", "session_recall@10", "lines@10")
    }
    cats: dict[str, list[float]] = defaultdict(list)
    for t, m in rows:
        cats[t].append(m["turn_recall@10"])
    out["by_category"] = {t: mean(v) for t, v in sorted(cats.items())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--sets", default="lme,chats,locomo")
    ap.add_argument("--penalties", default="0.02,0.05,0.1,0.2")
    ap.add_argument("--categories", action="store_true", help="print turn recall by category too")
    args = ap.parse_args()
    sets = {}
    for n in args.sets.split(","):
        current = {q.qid: q for q in load_set(n, args.work / "data")}  # the questions as loaded today (session spans)
        pools = _with_features(pickle.loads((args.work / f"train_ranker-{n}.pkl").read_bytes()))  # today's features
        sets[n] = [(current[q.qid], *rest) for q, *rest in pools if q.qid in current]
    w = shipped_weights()
    variants: dict[str, Order] = {"ranker": by_score(w)}
    variants.update({f"spread {p}": spread(w, float(p)) for p in args.penalties.split(",")})
    print("turn_recall@10 / session_recall@10 / MRR@10 (the pools of train_ranker.py, ordered by the shipped ranker)")
    for label, order in variants.items():
        cells = {n: measure(d, order) for n, d in sets.items()}
        print(
            f"  {label:14} "
            + "   ".join(
                f"{n} {c['turn_recall@10']:.3f} / {c['session_recall@10']:.3f} / {c['mrr@10']:.3f}"
                for n, c in cells.items()
            )
        )
        if args.categories:
            for n, c in cells.items():
                print(f"      {n:8} " + "  ".join(f"{t} {v:.3f}" for t, v in c["by_category"].items()))


if __name__ == "__main__":
    main()
