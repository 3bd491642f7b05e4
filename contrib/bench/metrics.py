"""Retrieval metrics (binary or graded relevance) and latency percentiles."""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

__all__ = ["ndcg_at", "recall_at", "mrr_at", "recall_any_at", "percentile", "mean"]


def ndcg_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    """nDCG@k as BEIR/trec_eval compute it: gain = relevance, discount log2(rank + 1)."""
    dcg = sum(rels.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def recall_any_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    return 1.0 if any(rels.get(d, 0) > 0 for d in ranked[:k]) else 0.0


def mrr_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    for i, doc in enumerate(ranked[:k]):
        if rels.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 1]) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
