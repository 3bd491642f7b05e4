"""Would other chunks show more of the right lines? Two chunkings measured as `evidence.py` measures.

- `overlap`: the reference chunker at the snippet's size with half of it overlapping (175 tokens,
  88 overlap), so every turn is also in a chunk with the turns around it. Hits then repeat lines,
  so besides the ranking as it comes, the top 10 after dropping a hit whose lines a better hit
  already shows (`any` line, or more than `half` of them).
- `small`: the evidence chunker at half the size (90 tokens, about two lines), each hit then widened
  to the 700 characters of lines around it (never over a heading, never onto lines a better hit
  shows), and a hit whose lines are all shown already dropped ("small to big").

Each variant indexes into its own folder (`evidence-<set>-chunks-<variant>` under --work/state) and
asks every question through the public `SearchManager.search` with today's defaults (ranker on).

    python contrib/bench/chunk_study.py --work W --sets locomo --variants overlap,small
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from evidence import K, _overlaps, evidence_metrics, load_set, warm  # noqa: E402
from metrics import mean  # noqa: E402
from quality import open_mode  # noqa: E402

from memsift.engine.config.sizes import SNIPPET_MAX_CHARS  # noqa: E402

VARIANTS = {
    "overlap": {"chunking": {"strategy": "reference", "tokens": 175, "overlap": 88}},
    "small": {"chunking": {"strategy": "evidence", "tokens": 90}},
}
FETCH = 30  # hits asked for, so that 10 are left after dropping repeats


def drop_repeats(hits: list[Any], share: float) -> list[Any]:
    """Hits in order, without one whose lines a better hit shows (over `share` of them; 0: any)."""
    kept: list[Any] = []
    shown: dict[str, set[int]] = defaultdict(set)
    for h in hits:
        lines = set(range(h.start_line, h.end_line + 1))
        if len(lines & shown[h.path]) > share * len(lines):
            continue
        kept.append(h)
        shown[h.path] |= lines
    return kept


class Widener:
    """Small to big: each hit grows by whole neighbouring lines, before and after in turn."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.files: dict[str, list[str]] = {}

    def _lines(self, path: str) -> list[str]:
        if path not in self.files:
            self.files[path] = (self.workspace / path).read_text(encoding="utf-8").split("\n")
        return self.files[path]

    def widen(self, hits: list[Any]) -> list[Any]:
        out: list[Any] = []
        shown: dict[str, set[int]] = defaultdict(set)
        for h in hits:
            if set(range(h.start_line, h.end_line + 1)) <= shown[h.path]:
                continue
            lines = self._lines(h.path)
            lo, hi = h.start_line, h.end_line
            used = sum(len(lines[n - 1]) + 1 for n in range(lo, hi + 1))
            grew = True
            while grew:
                grew = False
                for n in (lo - 1, hi + 1):
                    fits = 1 <= n <= len(lines) and used + len(lines[n - 1]) + 1 <= SNIPPET_MAX_CHARS
                    if fits and n not in shown[h.path] and not lines[n - 1].lstrip().startswith("#"):
                        used += len(lines[n - 1]) + 1
                        lo, hi = min(lo, n), max(hi, n)
                        grew = True
            wide = copy.copy(h)
            wide.start_line, wide.end_line = lo, hi
            wide.snippet = "\n".join(lines[lo - 1 : hi])
            out.append(wide)
            shown[h.path] |= set(range(lo, hi + 1))
        return out


async def study(name: str, variant: str, work: Path) -> dict[str, list[dict[str, float]]]:
    questions = load_set(name, work / "data")
    state = work / "state" / f"evidence-{name}-chunks-{variant}"
    extra = VARIANTS[variant]
    await warm(questions, "hybrid", state, extra)
    by_ws: dict[Any, list] = defaultdict(list)
    for q in questions:
        by_ws[q.workspace].append(q)
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for ws, group in by_ws.items():
        manager = open_mode("hybrid", ws, state / ws.name, extra)
        widener = Widener(ws)
        try:
            for q in group:
                wanted = FETCH + (FETCH if q.hidden else 0)
                answer = await manager.search(q.text, max_results=wanted, min_score=0.0, now=q.now)
                if answer.fallback or answer.unavailable:
                    why = answer.fallback or answer.unavailable
                    raise SystemExit(f"chunk_study: the backend did not answer {q.qid!r} itself: {why}")
                hits = [h for h in answer.results if not _overlaps(h, q.hidden)]
                if not q.evidence:
                    continue
                orders = {"as ranked": hits}
                if variant == "overlap":
                    orders.update({"repeats dropped (any line)": drop_repeats(hits, 0.0),
                                   "repeats dropped (over half)": drop_repeats(hits, 0.5)})
                else:
                    orders["widened to 700 characters"] = widener.widen(hits)
                for label, order in orders.items():
                    m = evidence_metrics(q, order[:K])
                    if q.qtype == "multi-hop":
                        m["multi-hop"] = m["turn_recall@10"]
                    rows[label].append(m)
        finally:
            await manager.aclose()
    return rows


async def _main(args: argparse.Namespace) -> None:
    for name in args.sets.split(","):
        for variant in args.variants.split(","):
            rows = await study(name, variant, args.work)
            for label, ms in rows.items():
                keys = ("turn_recall@10", "session_recall@10", "mrr@10", "lines@10")
                cell = {k: mean(m[k] for m in ms if k in m) for k in keys}
                multi = [m["multi-hop"] for m in ms if "multi-hop" in m]
                print(f"{name:7} {variant:8} {label:28} evidence R@10 {cell['turn_recall@10']:.3f}  "
                      f"session R@10 {cell['session_recall@10']:.3f}  MRR@10 {cell['mrr@10']:.3f}  "
                      f"lines/hit {cell['lines@10']:.1f}" + (f"  multi-hop {mean(multi):.3f}" if multi else ""),
                      flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--sets", default="locomo")
    ap.add_argument("--variants", default="overlap,small")
    args = ap.parse_args()
    unknown = set(args.variants.split(",")) - set(VARIANTS)
    if unknown:
        sys.exit(f"chunk_study: unknown variant(s) {', '.join(sorted(unknown))}; choose from {', '.join(VARIANTS)}")
    anyio.run(_main, args)


if __name__ == "__main__":
    main()
