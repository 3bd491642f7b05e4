"""Train the evidence ranker (memsift/engine/rerank/evidence.py) and write its shipped weights.

For each question of the conversational dev sets `lme` and `chats` (evidence.py), the hybrid
search's top 40 is collected once with the ranker off, as the stage asks for it (80 candidates a
side; minScore 0, as evidence.py asks), and each
hit gets the shipped features (`evidence_features`: the very code that runs at search time). Then:

- a linear model (numpy; pairwise RankNet loss by default, `--loss pointwise` for a class-balanced
  logistic one) is trained on one set and tested on the other, both ways: a gain that does not
  cross over is not a gain;
- the documents guard, SciFact (test and train splits, documents ranked at their best chunk), is
  scored under the same model; it is never trained on;
- the shipped model is trained on both sets together, turned into weights on the raw features
  with the backend's score weighing 1, and written to engine/rerank/evidence_ranker.json with the
  figures above.

    python contrib/bench/train_ranker.py            # collect (about a minute), train, print
    python contrib/bench/train_ranker.py --write    # and write the weights file
    python contrib/bench/train_ranker.py --check locomo,realmem,beam,molweni --drop asker_coverage
                                                    # each set left out, without one feature
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import load_scifact  # noqa: E402
from evidence import ALL_SETS, HIDDEN_SLACK, _overlaps, evidence_metrics, load_set  # noqa: E402
from metrics import ndcg_at  # noqa: E402
from quality import _deep_merge, open_mode, run_candidate_as_bundled, warm_index  # noqa: E402

from memsift.engine.rerank import evidence as ranker  # noqa: E402
from memsift.engine.compose.evidence_stage import CANDIDATES_PER_HIT, pool_features  # noqa: E402

POOL = 40
CANDIDATES = CANDIDATES_PER_HIT * POOL  # a side's candidates, as the stage asks the backend for its pool
SETS = ("lme", "chats")  # what the shipped weights are trained on (licences: LongMemEval is MIT)
RANKER_OFF = {"query": {"ranker": {"enabled": False}}}
FEATURES = ("score",) + ranker.FEATURES
WEIGHTS_FILE = Path(ranker.__file__).with_name(ranker.MODEL_FILE)


def _matrix(query: str, hits: list[Any]) -> np.ndarray:
    feats = pool_features(query, hits)  # the stage's own call, with query.expansion's default
    return np.array([[h.score] + [f[name] for name in FEATURES[1:]] for h, f in zip(hits, feats)], dtype=float)


def _shows_answer(q: Any, h: Any) -> float:
    lines = range(h.start_line, h.end_line + 1)
    return float(any(p == h.path and any(n in lines for n in ns) for p, ns in q.evidence))


async def collect(name: str, work: Path, extra: dict | None = None, tag: str = "") -> list[tuple]:
    questions = load_set(name, work / "data")
    by_ws: dict[Path, list] = defaultdict(list)
    for q in questions:
        by_ws[q.workspace].append(q)
    out = []
    for ws, group in by_ws.items():
        state = work / "state" / f"evidence-{name}{tag}" / ws.name
        # a pool from a half-built index would mislead
        await warm_index("hybrid", ws, state, lambda s: print(s, flush=True), extra)
        manager = open_mode("hybrid", ws, state, _deep_merge(extra or {}, RANKER_OFF))
        try:
            for q in group:
                wanted = POOL + HIDDEN_SLACK if q.hidden else POOL
                hits = (
                    await manager.search(q.text, max_results=wanted, min_score=0.0, now=q.now, candidates=CANDIDATES)
                ).results
                hits = [h for h in hits if not _overlaps(h, q.hidden)][:POOL]
                if hits and q.evidence:
                    out.append((q, hits, _matrix(q.text, hits), np.array([_shows_answer(q, h) for h in hits])))
        finally:
            await manager.aclose()
    return out


async def collect_scifact(work: Path, extra: dict | None = None, tag: str = "") -> dict[str, list[tuple]]:
    data = load_scifact(work / "data")
    state = work / "state" / f"scifact{tag}"
    await warm_index("hybrid", data.workspace, state, lambda s: print(s, flush=True), extra)
    manager = open_mode("hybrid", data.workspace, state, _deep_merge(extra or {}, RANKER_OFF))
    out: dict[str, list[tuple]] = {}
    try:
        for split in ("test", "train"):
            queries, rels = data.split(split)
            out[split] = []
            for qid, text in queries.items():
                hits = (await manager.search(text, max_results=POOL, min_score=0.0, candidates=CANDIDATES)).results
                if hits:
                    out[split].append((text, hits, rels[qid]))
    finally:
        await manager.aclose()
    return out


def _evidence(data: list[tuple], weights: np.ndarray | None) -> tuple[float, float]:
    """turn_recall@10 and MRR@10 when each pool is ordered by x @ weights (None: the backend's order)."""
    recall, mrr = [], []
    for q, hits, x, _y in data:
        order = range(len(hits)) if weights is None else sorted(range(len(hits)), key=lambda i: (-(x[i] @ weights), i))
        m = evidence_metrics(q, [hits[i] for i in order])
        recall.append(m["turn_recall@10"])
        mrr.append(m["mrr@10"])
    return float(np.mean(recall)), float(np.mean(mrr))


def _scifact(rows: list[tuple], weights: np.ndarray | None) -> float:
    scores = []
    for docs, x, rels in rows:  # see _with_features
        order = range(len(docs)) if weights is None else sorted(range(len(docs)), key=lambda i: (-(x[i] @ weights), i))
        scores.append(ndcg_at(list(dict.fromkeys(docs[i] for i in order)), rels, 10))
    return float(np.mean(scores))


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(0), x.std(0) + 1e-9


def _to_raw(w: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Weights on the raw features, scaled so the backend's score weighs 1 (a bias does not change an order)."""
    raw = w / sd
    if raw[0] <= 0:
        raise SystemExit("the trained model does not rank by the backend's score: refusing to ship it")
    return raw / raw[0]


def train_pointwise(data: list[tuple], l2: float = 1e-2, steps: int = 3000, lr: float = 0.5) -> np.ndarray:
    """Class-balanced logistic regression on standardised features: is this hit an answer?"""
    x = np.vstack([d[2] for d in data])
    y = np.concatenate([d[3] for d in data])
    mu, sd = _standardise(x)
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    balance = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ w))
        w -= lr * (z.T @ ((p - y) * balance) / len(y) + l2 * w)
    return _to_raw(w[:-1], sd)


def train_pairwise(data: list[tuple], l2: float = 1e-2, steps: int = 2000, lr: float = 0.5) -> np.ndarray:
    """A linear RankNet: logistic loss on (answer hit − other hit) pairs of the same question, each
    question weighing the same. It learns the order inside a pool, which is what the stage changes;
    on the dev sets it keeps the pointwise model's recall@10 and raises MRR@10 (0.53 → 0.58 on lme)."""
    mu, sd = _standardise(np.vstack([d[2] for d in data]))
    pairs, weight = [], []
    for _q, _hits, x, y in data:
        z = (x - mu) / sd
        pos, neg = z[y > 0], z[y == 0]
        if len(pos) and len(neg):
            diff = (pos[:, None, :] - neg[None, :, :]).reshape(-1, z.shape[1])
            pairs.append(diff)
            weight.append(np.full(len(diff), 1.0 / len(diff)))
    d, wq = np.vstack(pairs), np.concatenate(weight)
    wq /= wq.sum()
    w = np.zeros(d.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-d @ w))
        w -= lr * (d.T @ ((p - 1) * wq) + l2 * w)
    return _to_raw(w, sd)


TRAINERS = {"pairwise": train_pairwise, "pointwise": train_pointwise}


async def _pools(name: str, args: argparse.Namespace) -> Any:
    """A set's pools, collected once and cached in --work (one file a set, so sets can be added)."""
    cache = args.work / f"train_ranker-{name}{args.tag}.pkl"
    extra = json.loads(args.extra) if args.extra else None
    if cache.exists() and not args.fresh:
        pools = pickle.loads(cache.read_bytes())
    else:
        pools = await (collect_scifact(args.work, extra, args.tag) if name == "scifact"
                       else collect(name, args.work, extra, args.tag))
        cache.write_bytes(pickle.dumps(pools))
    return _with_features(pools)


def _with_features(pools: Any) -> Any:
    """The feature matrices, computed afresh from the cached hits: a feature added to the ranker
    needs no new collection."""
    if isinstance(pools, dict):  # SciFact: split → (claim, hits, qrels), scored as documents
        return {split: [([Path(h.path).stem for h in hits], _matrix(text, hits), rels) for text, hits, rels in rows]
                for split, rows in pools.items()}
    return [(q, hits, _matrix(q.text, hits), y) for q, hits, _x, y in pools]


def leave_one_set_out(sets: dict[str, list[tuple]], train: Any, l2: float, shipped: np.ndarray) -> dict[str, Any]:
    """For each set: the backend's order, the shipped weights, and weights trained on every other set."""
    table: dict[str, Any] = {}
    print(
        "leave one set out: turn_recall@10 / MRR@10 of each set (backend's order | the shipped weights | trained on "
        "the other sets)"
    )
    for held in sets:
        rest = [d for n, d in sets.items() if n != held]
        w = train([row for d in rest for row in d], l2=l2)
        cells = {
            "backend": _evidence(sets[held], None),
            "shipped": _evidence(sets[held], shipped),
            "without": _evidence(sets[held], w),
        }
        table[held] = {k: {"recall@10": round(r, 3), "mrr@10": round(m, 3)} for k, (r, m) in cells.items()}
        print(f"  {held:8} " + "   ".join(f"{k} {r:.3f} / {m:.3f}" for k, (r, m) in cells.items()))
    return table


async def _main(args: argparse.Namespace) -> None:
    names = list(dict.fromkeys([*SETS, *args.check.split(",")])) if args.check else list(SETS)
    sets = {name: await _pools(name, args) for name in names}
    scifact = await _pools("scifact", args)
    figures: dict[str, Any] = {}
    trained_on = args.train_on.split(",")

    def row(label: str, weights: np.ndarray | None, key: str) -> None:
        cells = {n: _evidence(sets[n], weights) for n in SETS}
        sci = {s: _scifact(scifact[s], weights) for s in ("test", "train")}
        figures[key] = {**{f"{n}_recall@10": round(r, 3) for n, (r, _m) in cells.items()},
                        **{f"{n}_mrr@10": round(m, 3) for n, (_r, m) in cells.items()},
                        **{f"scifact_{s}_ndcg@10": round(v, 3) for s, v in sci.items()}}
        print(f"  {label:28} " + "   ".join(f"{n} {r:.3f} / {m:.3f}" for n, (r, m) in cells.items())
              + f"   SciFact nDCG@10 test {sci['test']:.3f} train {sci['train']:.3f}")

    train = TRAINERS[args.loss]
    print(
        f"turn_recall@10 / MRR@10 over the hybrid top {POOL} (minScore 0); SciFact nDCG@10 (never trained on); "
        f"{args.loss} loss"
    )
    row("backend's order", None, "baseline")
    for tr, te in (("lme", "chats"), ("chats", "lme")):
        w = train(sets[tr], l2=args.l2)
        r, m = _evidence(sets[te], w)
        own = _evidence(sets[tr], w)
        figures[f"{tr}_to_{te}"] = {f"{te}_recall@10": round(r, 3), f"{te}_mrr@10": round(m, 3)}
        print(f"  trained on {tr}, tested on {te}: {r:.3f} / {m:.3f} (on {tr} itself {own[0]:.3f} / {own[1]:.3f})")
    shipped = train([row_ for n in trained_on for row_ in sets[n]], l2=args.l2)
    row(f"trained on {'+'.join(trained_on)} (shipped)", shipped, "shipped")
    weights = {name: round(float(v), 4) for name, v in zip(FEATURES[1:], shipped[1:])}
    print("  weights (the backend's score weighs 1): " + ", ".join(f"{k} {v:+.4f}" for k, v in weights.items()))
    if len(sets) > len(SETS):
        # The weights as they ship (written with --write), or those just trained when writing them now.
        model = ranker.load_model()
        in_file = np.array([1.0] + [model.weights.get(f, 0.0) for f in FEATURES[1:]])
        figures["leaveOneSetOut"] = leave_one_set_out(sets, train, args.l2, shipped if args.write else in_file)
    if args.write:
        doc = {"format": ranker.MODEL_FORMAT, "version": f"{date.today().isoformat()}.{args.revision}",
               "weights": weights, "trainedOn": trained_on, "pool": POOL, "loss": args.loss, "l2": args.l2,
               "figures": figures, "trainer": "contrib/bench/train_ranker.py"}
        WEIGHTS_FILE.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {WEIGHTS_FILE}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--fresh", action="store_true", help="collect again (the pools are cached in --work)")
    ap.add_argument("--write", action="store_true", help="write the shipped weights file")
    ap.add_argument(
        "--check", default="", help=f"also check on these sets, one left out at a time (all: {','.join(ALL_SETS)})"
    )
    ap.add_argument(
        "--train-on",
        default=",".join(SETS),
        help="the sets the shipped weights learn from (only sets whose licence allows it: lme, chats, realmem)",
    )
    ap.add_argument(
        "--extra", help="memorySearch settings (JSON) the pools are searched with, e.g. another local.modelPath"
    )
    ap.add_argument(
        "--tag", default="", help="suffix of the index folders and pool files (one per --extra), as evidence.py's"
    )
    ap.add_argument("--int8-graph", help="with --extra's local.modelPath: its int8 graph, run as the bundled one")
    ap.add_argument("--l2", type=float, default=1e-2)
    ap.add_argument("--loss", choices=sorted(TRAINERS), default="pairwise",
                    help="pairwise (the shipped weights) or pointwise (a hit at a time, the first ranker's)")
    ap.add_argument("--revision", type=int, default=1, help="the weights' revision of the day, in their version")
    ap.add_argument("--drop", default="",
                    help=f"features left out, to measure what one adds (of {', '.join(ranker.FEATURES)})")
    args = ap.parse_args()
    global FEATURES  # what _matrix computes and the weights are named by
    dropped = set(filter(None, args.drop.split(",")))
    if dropped - set(ranker.FEATURES):
        ap.error(f"--drop: unknown feature(s) {', '.join(sorted(dropped - set(ranker.FEATURES)))}")
    FEATURES = tuple(f for f in FEATURES if f not in dropped)
    if args.int8_graph:
        run_candidate_as_bundled(json.loads(args.extra or "{}"), args.int8_graph)
    anyio.run(_main, args)


if __name__ == "__main__":
    main()
