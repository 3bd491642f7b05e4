"""A probe for the next ranking stage (issue 30): what reordering the hybrid top 40 by cheap
features would buy on the evidence dev sets, before any of it is built into memsift.

For each question of `lme` and `chats` (evidence.py), the hybrid search's top 40 (minScore 0,
with --explain) is collected once. Every hit gets backend-neutral features (its hybrid score, the
share of the question's words found in the lines it shows, its rank, the best other score in its
file; and layout-bound ones: keyword and vector parts, length, line count…). Then:

- `baseline`: the top 40 in memsift's order; `oracle`: the best order the pool allows;
- `linear`: a logistic model trained on one set and tested on the other (a gain that does not
  cross over is not a gain), for a few feature sets;
- `coverage`: the hybrid score plus α × the share of question words shown, α on a grid; with
  SciFact's nDCG@10 (test and train splits, documents ranked at their best chunk) as the guard.

turn_recall@10 and MRR@10 as evidence.py computes them. Nothing here changes memsift.

    python contrib/bench/ranker_probe.py            # collect (about 30 s) and print
"""

from __future__ import annotations

import argparse
import math
import pickle
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from datasets import load_scifact  # noqa: E402
from evidence import evidence_metrics, load_set  # noqa: E402
from metrics import ndcg_at  # noqa: E402
from quality import open_mode  # noqa: E402

POOL = 40
SETS = ("lme", "chats")
_WORD = re.compile(r"\w+")
_STOP = frozenset("the a an of to in on for and or is are was were be i me my we you your it that this what which who "
                  "how when did do does".split())
FEATURES = ("score", "keyword", "is_keyword", "vector", "time", "brevity", "log_length", "lines", "coverage",
            "reciprocal_rank", "file_hits", "file_best_other", "is_memory_md")
NEUTRAL = ("score", "coverage", "reciprocal_rank", "file_best_other")  # mean the same on any layout
FEATURE_SETS = {
    "all": FEATURES,
    "all but length and lines": tuple(f for f in FEATURES if f not in ("log_length", "lines")),
    "neutral": NEUTRAL,
    "score + coverage": ("score", "coverage"),
}


def _features(question: str, hits: list[Any]) -> np.ndarray:
    terms = [t for t in (w.lower() for w in _WORD.findall(question)) if t not in _STOP]
    by_file: dict[str, list[float]] = defaultdict(list)
    for h in hits:
        by_file[h.path].append(h.score)
    rows = []
    for rank, h in enumerate(hits):
        e, shown = h.explain, h.snippet.lower()
        other = next((s for s in sorted(by_file[h.path], reverse=True) if s != h.score), 0.0)
        rows.append([h.score, e.keyword_score or 0.0, float(e.keyword_score is not None), e.vector_score or 0.0,
                     e.time_factor, e.brevity, math.log1p(len(h.snippet)) / 8, (h.end_line - h.start_line + 1) / 10,
                     sum(t in shown for t in terms) / len(terms) if terms else 0.0, 1.0 / (rank + 1),
                     len(by_file[h.path]) / 10, other, float(h.path == "MEMORY.md")])
    return np.array(rows, dtype=float)


def _pool_coverage(question: str, shown: list[str]) -> np.ndarray:
    """Per hit: (plain coverage, coverage weighted by each word's rarity among the pool's hits:
    log(1 + n / (1 + hits holding it)), so a word most candidates hold counts little)."""
    terms = list(dict.fromkeys(t for t in (w.lower() for w in _WORD.findall(question)) if t not in _STOP))
    if not shown:
        return np.zeros((0, 2))
    has = np.array([[t in s.lower() for t in terms] for s in shown], dtype=float).reshape(len(shown), len(terms))
    if not terms:
        return np.zeros((len(shown), 2))
    idf = np.log1p(len(shown) / (1 + has.sum(0)))
    return np.stack([has.mean(1), has @ idf / idf.sum()], axis=1)


def _shows_answer(q: Any, h: Any) -> float:
    lines = range(h.start_line, h.end_line + 1)
    return float(any(p == h.path and any(n in lines for n in ns) for p, ns in q.evidence))


async def collect(name: str, work: Path) -> list[tuple]:
    questions = load_set(name, work / "data")
    state = work / "state" / f"evidence-{name}"
    by_ws: dict[Path, list] = defaultdict(list)
    for q in questions:
        by_ws[q.workspace].append(q)
    out = []
    for ws, group in by_ws.items():
        manager = open_mode("hybrid", ws, state / ws.name, None)
        try:
            for q in group:
                answer = await manager.search(q.text, max_results=POOL, min_score=0.0, now=q.now, explain=True)
                hits = [h for h in answer.results if h.explain is not None]
                if hits:
                    out.append((q, hits, _features(q.text, hits), np.array([_shows_answer(q, h) for h in hits])))
        finally:
            await manager.aclose()
    return out


def _score(data: list[tuple], key) -> tuple[float, float]:
    recall, mrr = [], []
    for q, hits, x, y in data:
        s = key(x, y)
        m = evidence_metrics(q, [hits[i] for i in sorted(range(len(hits)), key=lambda i: -s[i])])
        recall.append(m["turn_recall@10"])
        mrr.append(m["mrr@10"])
    return float(np.mean(recall)), float(np.mean(mrr))


def _score_with(data: list[tuple], keys: list[np.ndarray]) -> tuple[float, float]:
    recall, mrr = [], []
    for (q, hits, _x, _y), s in zip(data, keys):
        m = evidence_metrics(q, [hits[i] for i in sorted(range(len(hits)), key=lambda i: -s[i])])
        recall.append(m["turn_recall@10"])
        mrr.append(m["mrr@10"])
    return float(np.mean(recall)), float(np.mean(mrr))


def _train(data: list[tuple], cols: list[int], l2: float = 1e-2, steps: int = 3000, lr: float = 0.5):
    """Class-balanced logistic regression on standardised features (numpy, no dependency)."""
    x = np.vstack([d[2][:, cols] for d in data])
    y = np.concatenate([d[3] for d in data])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    weight = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ w))
        w -= lr * (z.T @ ((p - y) * weight) / len(y) + l2 * w)
    return lambda feats, _y: np.hstack([(feats[:, cols] - mu) / sd, np.ones((len(feats), 1))]) @ w


async def collect_scifact(work: Path) -> dict[str, list[tuple]]:
    """SciFact's hybrid top 40 per claim, with the coverage feature and the relevant documents."""
    data = load_scifact(work / "data")
    manager = open_mode("hybrid", data.workspace, work / "state" / "scifact", None)
    out: dict[str, list[tuple]] = {}
    try:
        for split in ("test", "train"):
            queries, rels = data.split(split)
            out[split] = []
            for qid, text in queries.items():
                answer = await manager.search(text, max_results=POOL, min_score=0.0, explain=True)
                hits = [(Path(h.path).stem, h.score) for h in answer.results]
                out[split].append((hits, _pool_coverage(text, [h.snippet for h in answer.results]), rels[qid]))
    finally:
        await manager.aclose()
    return out


def _scifact_ndcg(rows: list[tuple], alpha: float, column: int = 0) -> float:
    scores = []
    for hits, cover, rels in rows:
        order = sorted(range(len(hits)), key=lambda i: -(hits[i][1] + alpha * cover[i, column]))
        docs = list(dict.fromkeys(hits[i][0] for i in order))
        scores.append(ndcg_at(docs, rels, 10))
    return float(np.mean(scores)) if scores else 0.0


async def _main(args: argparse.Namespace) -> None:
    cache = args.work / "ranker_probe.pkl"
    if cache.exists() and not args.fresh:
        sets = pickle.loads(cache.read_bytes())
    else:
        sets = {name: await collect(name, args.work) for name in SETS}
        sets["scifact"] = await collect_scifact(args.work)
        cache.write_bytes(pickle.dumps(sets))
    scifact = sets.pop("scifact")
    print(f"turn_recall@10 / MRR@10 over memsift's hybrid top {POOL} (minScore 0)")
    for name, data in sets.items():
        base = _score(data, lambda x, _y: -np.arange(len(x)))
        best = _score(data, lambda _x, y: y)
        print(f"  {name:6} baseline {base[0]:.3f} / {base[1]:.3f}   oracle {best[0]:.3f} / {best[1]:.3f}")
    print("linear model, trained on one set, tested on the other (train figure in brackets)")
    for label, names in FEATURE_SETS.items():
        cols = [FEATURES.index(n) for n in names]
        cells = []
        for train, test in (("lme", "chats"), ("chats", "lme")):
            model = _train(sets[train], cols)
            got, own = _score(sets[test], model), _score(sets[train], model)
            cells.append(f"{train}→{test} {got[0]:.3f} / {got[1]:.3f} ({own[0]:.3f})")
        print(f"  {label:26} " + "   ".join(cells))
    print("hybrid score + α × coverage (the share of the question's words in the lines shown)")
    cov = FEATURES.index("coverage")
    for alpha in (0.0, 0.1, 0.3, 0.5, 0.7, 1.0, 1.5):
        cells = [f"{name} {r[0]:.3f} / {r[1]:.3f}" for name, r in
                 ((n, _score(d, lambda x, _y: x[:, 0] + alpha * x[:, cov])) for n, d in sets.items())]
        cells += [f"SciFact nDCG@10 test {_scifact_ndcg(scifact['test'], alpha):.3f} train {_scifact_ndcg(scifact['train'], alpha):.3f}"]
        print(f"  α={alpha:<4} " + "   ".join(cells))
    print("hybrid score + α × rarity-weighted coverage (a word weighs log(1 + n / (1 + pool hits holding it)))")
    pooled = {n: [_pool_coverage(q.text, [h.snippet for h in hits])[:, 1] for q, hits, _x, _y in d] for n, d in sets.items()}
    for alpha in (0.1, 0.3, 0.5, 0.7, 1.0):
        cells = []
        for n, d in sets.items():
            r = _score_with(d, [x[:, 0] + alpha * c for (_q, _h, x, _y), c in zip(d, pooled[n])])
            cells.append(f"{n} {r[0]:.3f} / {r[1]:.3f}")
        cells += [f"SciFact nDCG@10 test {_scifact_ndcg(scifact['test'], alpha, 1):.3f} train {_scifact_ndcg(scifact['train'], alpha, 1):.3f}"]
        print(f"  α={alpha:<4} " + "   ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--fresh", action="store_true", help="collect again (the pool is cached in --work)")
    anyio.run(_main, ap.parse_args())


if __name__ == "__main__":
    main()
