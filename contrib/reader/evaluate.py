"""The reader measured on the pools collect_pools.py wrote, through the code that runs at search time.

Each question's pool is scored by memsift's own local cross-encoder (engine/rerank/local.py) and
reordered by the rerank stage's blend, `(1 - weight) * hybrid + weight * sigmoid(logit)`, over its
top `candidates` hits, then cut to 10 and measured as contrib/bench/evidence.py measures (evidence
recall @5/@10, session recall@10, MRR@10, multi-hop and each category). `--weights` lists blends to
try; 0 is the search without the reader. Scores are computed once per model and pool.

    python contrib/reader/evaluate.py --pools pools/ --model reader/ --sets locomo,beam --weights 0,0.3,0.5
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bench"))
sys.path.insert(0, str(HERE))

from evidence import K, evidence_metrics  # noqa: E402
from metrics import mean, percentile  # noqa: E402

from memsift.engine.compose.rerank_stage import blend  # noqa: E402
from memsift.engine.rerank.base import to_relevance  # noqa: E402
from memsift.engine.rerank.local import LocalCrossEncoder  # noqa: E402
from leak import unleak  # noqa: E402


def _hit(h: dict) -> SimpleNamespace:
    return SimpleNamespace(
        path=h["path"], start_line=h["start"], end_line=h["end"], snippet=h["snippet"], score=h["score"]
    )


def score_pools(rows: list[dict], reader: LocalCrossEncoder, candidates: int) -> tuple[list[list[float]], list[float]]:
    scores, took = [], []
    for row in rows:
        started = time.perf_counter()
        scores.append(reader.score_sync(row["query"], [unleak(h["snippet"]) for h in row["hits"][:candidates]]))
        took.append((time.perf_counter() - started) * 1000)
    return scores, took


def by_blend(row: dict, relevance: list[float], weight: float) -> list[SimpleNamespace]:
    """The pool's hits in the stage's order: its first len(relevance) by the blend, the rest after."""
    hits = [_hit(h) for h in row["hits"]]
    n = len(relevance)
    blended = [blend(h.score, r, weight) for h, r in zip(hits, relevance)]
    order = sorted(range(n), key=lambda i: (-blended[i], i))
    return [hits[i] for i in order] + hits[n:]


def reordered(row: dict, raw: list[float], weight: float) -> list[SimpleNamespace]:
    return by_blend(row, to_relevance(raw, LocalCrossEncoder.logits), weight)


def pool_arguments(ap: argparse.ArgumentParser, *, sets: str, weights: str) -> None:
    """The options every reader measurement shares: which pools, sets, blend weights and hits."""
    ap.add_argument("--pools", type=Path, required=True)
    ap.add_argument("--sets", default=sets)
    ap.add_argument("--weights", default=weights)
    ap.add_argument("--candidates", type=int, default=20)


def figures(rows: list[dict], ranked: list[list[SimpleNamespace]]) -> dict:
    per = []
    by_type = defaultdict(list)
    for row, hits in zip(rows, ranked):
        q = SimpleNamespace(evidence=row["evidence"], sessions=row["sessions"])
        m = evidence_metrics(q, hits[:K])
        per.append(m)
        if "turn_recall@10" in m:
            by_type[row["qtype"]].append(m["turn_recall@10"])
    names = ("turn_recall@5", "turn_recall@10", "session_recall@10", "mrr@10", "lines@10")
    out = {n: mean(m[n] for m in per if n in m) for n in names}
    out["by_type"] = {t: mean(v) for t, v in sorted(by_type.items())}
    return out


def line(label: str, f: dict) -> str:
    cats = "  ".join(f"{t} {v:.3f}" for t, v in f["by_type"].items())
    return (
        f"{label:28} R@5 {f['turn_recall@5']:.3f} R@10 {f['turn_recall@10']:.3f} session {f['session_recall@10']:.3f} "
        f"MRR {f['mrr@10']:.3f} lines {f['lines@10']:.1f} | {cats}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pool_arguments(ap, sets="lme,chats,locomo,realmem,beam", weights="0,0.3,0.5,0.7")
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    reader = LocalCrossEncoder(args.model, max_tokens=args.max_tokens, batch_size=args.candidates)
    for name in args.sets.split(","):
        path = args.pools / f"{name}.pkl"
        if not path.is_file():
            print(f"{name}: no pool file {path} (run collect_pools.py)")
            continue
        rows = pickle.loads(path.read_bytes())
        raw, took = score_pools(rows, reader, args.candidates)
        print(
            f"{name}: {len(rows)} questions, reader p50 {percentile(took, 0.5):.0f} ms p95 "
            f"{percentile(took, 0.95):.0f} ms "
            f"({args.candidates} hits, {args.max_tokens} tokens)",
            flush=True,
        )
        for w in (float(x) for x in args.weights.split(",")):
            print(
                "  " + line(f"weight {w:g}", figures(rows, [reordered(r, s, w) for r, s in zip(rows, raw)])), flush=True
            )


if __name__ == "__main__":
    main()
