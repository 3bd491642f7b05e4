"""Would the evidence ranker gain from more features? Candidate features added to the cached pools.

Reads the pools `train_ranker.py` cached (each question's hybrid top 40, ranker off), appends
candidate features to the shipped ones, and trains the pairwise ranker as `train_ranker.py` does:
on `lme` + `chats` (the permitted sets), then leaving each set out in turn. A feature is worth
shipping only when it lifts the sets it was not trained on, on each of them.

- `prf`: pseudo-relevance feedback within the pool. The words (not the question's) of the top
  `--prf-top` hits, weighted by rank and by rarity in the pool; a hit's share of the best
  `--prf-terms` of them.
- `neighbour`: the best score of another pool hit of the same file within 10 lines (context that
  scored too); `file_share`: the share of the pool from the hit's file.
- `line_sim`: the best cosine between the question and one line of the hit (the shipped local
  model; a chunk's vector blurs its four lines, the answer is usually one). Embeds every distinct
  pool line once (a few minutes a set) and caches it beside the pools.
- `file_sim`: the cosine between the question and the mean vector of the chunks of the hit's whole
  file (a day or a session: what systems that index a session as one chunk rank by). Embeds every
  file a pool holds (minutes a set); cached beside the pools. On RealMem the file may hold the
  question's own, hidden, session.
- `--products`: a ranker that is not linear in its features: the score's distance from the pool's
  best and its z-score within the pool are added, then every product of two columns.

    python contrib/bench/train_ranker.py --check locomo,realmem,beam   # collect the pools first
    python contrib/bench/feature_study.py --work W --features prf,neighbour,file_share
    python contrib/bench/feature_study.py --work W --features line_sim
    python contrib/bench/feature_study.py --work W --features "" --products
"""

from __future__ import annotations

import argparse
import math
import pickle
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from evidence import evidence_metrics  # noqa: E402
from train_ranker import _with_features, train_pairwise  # noqa: E402

from memsift.engine.rerank import evidence as ranker  # noqa: E402
from memsift.engine.search.fts_query import query_terms  # noqa: E402

FEATURES = ("prf", "neighbour", "file_share", "line_sim", "file_sim")
NEIGHBOUR_LINES = 10
_SPEAKER = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*[^\s:]{1,24}(?:\s[^\s:]{1,24})?:\s", re.M)


def _words(snippet: str) -> set[str]:
    return set(query_terms(_SPEAKER.sub("", snippet)))


def prf(question: str, hits: list[Any], top: int, n_terms: int) -> np.ndarray:
    asked = set(ranker.ranker_terms(question))
    words = [_words(h.snippet) - asked for h in hits]
    df = Counter(t for w in words for t in w)
    weight: dict[str, float] = defaultdict(float)
    for rank, w in enumerate(words[:top]):
        for t in w:
            weight[t] += 1.0 / (rank + 1)
    scored = {t: v * math.log1p(len(hits) / df[t]) for t, v in weight.items()}
    best = dict(sorted(scored.items(), key=lambda kv: -kv[1])[:n_terms])
    total = sum(best.values()) or 1.0
    return np.array([sum(v for t, v in best.items() if t in w) / total for w in words])


def neighbour(hits: list[Any]) -> np.ndarray:
    return np.array([max((g.score for j, g in enumerate(hits) if j != i and g.path == h.path
                          and abs(g.start_line - h.start_line) <= NEIGHBOUR_LINES), default=0.0)
                     for i, h in enumerate(hits)])


def file_share(hits: list[Any]) -> np.ndarray:
    per_file = Counter(h.path for h in hits)
    return np.array([(per_file[h.path] - 1) / len(hits) for h in hits])


def _similarities(kind: str, name: str, pools: list[tuple], work: Path, key_of: Callable[[Any, Any], Any],
                  texts_of: Callable[[Any], list[str]], score: Callable[[np.ndarray, np.ndarray], float]
                  ) -> dict[str, list[float]]:
    """Per question id, each hit's `score(vectors of its key's texts, question vector)`; every
    distinct text is embedded once with the shipped local model, and the result is cached beside the
    pools (embedding takes minutes a set)."""
    cache = work / f"feature_study-{kind}-{name}.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    provider = LocalMiniLMProvider()
    keys = {key: texts_of(key) for key in dict.fromkeys(key_of(q, h) for q, hits, *_ in pools for h in hits)}
    index: dict[str, int] = {}
    for texts in keys.values():
        for text in texts:
            index.setdefault(text, len(index))
    print(f"  {name}: embedding {len(index):,} texts for {kind}", flush=True)
    unique = list(index)
    vectors = np.vstack([provider.embed_sync(unique[i : i + 256]) for i in range(0, len(unique), 256)])
    per_key = {key: vectors[[index[t] for t in texts]] for key, texts in keys.items()}
    out = {}
    for q, hits, *_ in pools:
        asked = provider.embed_query_sync(q.text)
        out[q.qid] = [score(per_key[key_of(q, h)], asked) for h in hits]
    cache.write_bytes(pickle.dumps(out))
    return out


def line_similarities(name: str, pools: list[tuple], work: Path) -> dict[str, list[float]]:
    """Each hit's best cosine between the question and one of its lines."""
    return _similarities("line_sim", name, pools, work, key_of=lambda _q, h: h.snippet,
                         texts_of=lambda snippet: [ln for ln in snippet.split("\n") if ln.strip()],
                         score=lambda m, asked: float((m @ asked).max()) if len(m) else 0.0)


def file_similarities(name: str, pools: list[tuple], work: Path) -> dict[str, list[float]]:
    """Each hit's cosine between the question and the mean vector of its whole file's chunks."""
    from memsift.engine.files.chunking import chunk_evidence

    def chunks(key: tuple[Path, str]) -> list[str]:
        return [c.text for c in chunk_evidence((key[0] / key[1]).read_text(encoding="utf-8"))]

    def mean_cosine(m: np.ndarray, asked: np.ndarray) -> float:
        mean = m.sum(axis=0)
        return float(mean @ asked / (np.linalg.norm(mean) or 1.0))

    return _similarities("file_sim", name, pools, work, key_of=lambda q, h: (q.workspace, h.path),
                         texts_of=chunks, score=mean_cosine)


def with_candidates(name: str, pools: list[tuple], wanted: list[str], args: argparse.Namespace) -> list[tuple]:
    sims = line_similarities(name, pools, args.work) if "line_sim" in wanted else {}
    whole = file_similarities(name, pools, args.work) if "file_sim" in wanted else {}
    out = []
    for q, hits, x, y in pools:
        cols = {"prf": lambda: prf(q.text, hits, args.prf_top, args.prf_terms), "neighbour": lambda: neighbour(hits),
                "file_share": lambda: file_share(hits), "line_sim": lambda: np.array(sims[q.qid]),
                "file_sim": lambda: np.array(whole[q.qid])}
        out.append((q, hits, np.column_stack([x] + [cols[f]() for f in wanted]), y))
    return out


def with_products(x: np.ndarray) -> np.ndarray:
    score = x[:, :1]
    base = np.hstack([x, score - score.max(), (score - score.mean()) / (score.std() + 1e-6)])
    k = base.shape[1]
    return np.column_stack([base] + [base[:, i] * base[:, j] for i in range(k) for j in range(i, k)])


def figures(pools: list[tuple], weights: np.ndarray) -> str:
    recall, session, multi = [], [], []
    for q, hits, x, _y in pools:
        order = sorted(range(len(hits)), key=lambda i: (-(x[i] @ weights), i))
        m = evidence_metrics(q, [hits[i] for i in order])
        recall.append(m["turn_recall@10"])
        if "session_recall@10" in m:
            session.append(m["session_recall@10"])
        if q.qtype == "multi-hop":
            multi.append(m["turn_recall@10"])
    cell = f"{np.mean(recall):.3f} / {np.mean(session):.3f}" if session else f"{np.mean(recall):.3f}"
    return cell + (f" (multi-hop {np.mean(multi):.3f})" if multi else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--sets", default="lme,chats,locomo,beam,realmem")
    ap.add_argument("--train", default="lme,chats", help="the sets the first row trains on (permitted data)")
    ap.add_argument("--features", default="prf,neighbour,file_share", help=f"any of {', '.join(FEATURES)}")
    ap.add_argument("--products", action="store_true", help="also every product of two features")
    ap.add_argument("--prf-top", type=int, default=5)
    ap.add_argument("--prf-terms", type=int, default=20)
    args = ap.parse_args()
    wanted = [f for f in args.features.split(",") if f]
    unknown = set(wanted) - set(FEATURES)
    if unknown:
        sys.exit(f"feature_study: unknown feature(s) {', '.join(sorted(unknown))}; choose from {', '.join(FEATURES)}")
    missing = set(args.train.split(",")) - set(args.sets.split(","))
    if missing:
        sys.exit(f"feature_study: --train names {', '.join(sorted(missing))}, not in --sets {args.sets}")
    shipped = len(ranker.FEATURES) + 1
    sets = {}
    for name in args.sets.split(","):
        cache = args.work / f"train_ranker-{name}.pkl"
        if not cache.exists():
            sys.exit(f"feature_study: no pools at {cache}; collect them with train_ranker.py --work {args.work} first")
        sets[name] = with_candidates(name, _with_features(pickle.loads(cache.read_bytes())), wanted, args)
    print("evidence R@10 / session R@10 over each question's top 40, ordered by a ranker trained as stated")
    width = shipped + len(wanted)
    candidate = (lambda x: with_products(x[:, :width])) if args.products else (lambda x: x[:, :width])
    variants = (("shipped features", lambda x: x[:, :shipped]),
                ("+ " + ", ".join(wanted + (["products"] if args.products else [])), candidate))
    for label, columns in variants:
        cut = {n: [(q, h, columns(x), y) for q, h, x, y in d] for n, d in sets.items()}
        trained = train_pairwise([r for n in args.train.split(",") for r in cut[n]])
        cells = "   ".join(f"{n} {figures(d, trained)}" for n, d in cut.items())
        print(f"{label}\n  trained on {args.train}: {cells}")
        if len(trained) <= width:
            names = ("score",) + ranker.FEATURES + tuple(wanted)
            print("  weights: " + ", ".join(f"{f} {w:.3f}" for f, w in zip(names, trained)))
        if len(cut) < 2:
            continue  # leaving one set out needs another to train on
        held = {n: figures(cut[n], train_pairwise([r for m, d in cut.items() if m != n for r in d])) for n in cut}
        print("  leave one set out: " + "   ".join(f"{n} {cell}" for n, cell in held.items()), flush=True)

if __name__ == "__main__":
    main()
