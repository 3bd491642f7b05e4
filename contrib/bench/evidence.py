"""Evidence shown: do the lines a search *shows* contain the answer, on conversational memory?

LongMemEval marks the turns that hold a question's answer (`has_answer`). A hit shows the lines of
its range (`startLine`–`endLine`, the snippet an agent reads). Per question, over the top k hits:

- `turn_recall@k`: the share of answer turns shown (a turn spanning several lines counts when
  any of its lines is shown);
- `hit@k`: 1 when at least one answer turn is shown;
- `mrr@10`: 1 / the rank of the first hit that shows an answer turn;
- `chars@10`: the characters shown by the top 10 hits (UTF-16 units, as snippets are counted), so
  a system cannot win by showing more text;
- `tiny@10` / `tiny_first`: near-empty hits (under 120 characters) in the top 10, and the share
  of questions whose first hit is one;
- `session_recall@10`: the share of the question's evidence sessions that a top-10 hit shows lines
  of (what published LoCoMo retrieval figures measure); `lines@10`: the lines a hit shows;
- `whole` runs report each hit's whole chunk instead of its snippet: what the same ranking would
  show if the snippet were the ranked unit.

Six dev sets. Two share LongMemEval's sessions in different layouts (bench_data.py): `lme`, the
940 sessions in one workspace, one whole turn per line (long lines, `## Session` headings under a
`# date`); `chats`, the sessions as chats between two named people in 10 workspaces, one message
per line (a turn's paragraphs, median 128 characters, each tagged with the speaker), `# Session
N — date time (A & B)` headings, a near-empty MEMORY.md, questions naming people. Four come from
elsewhere (conversations.py, by the recipes in ../shared/bench-data): `locomo` (two people over
months; `locomo-audit` scores the audit's corrected citations), `realmem` (assistant projects
among distractor sessions; a question's own and later sessions are hidden: the hits overlapping
them are dropped before the cut), `beam` (long synthetic chats) and `molweni` (100 short multiparty
Ubuntu chats in one workspace, questions reusing the chat's words). Turn figures are over the
questions that have evidence turns, by category (`turn_recall@10_by_type`).

    python contrib/bench/evidence.py --modes hybrid      # all six sets (RealMem indexes for ~20 min)
    python contrib/bench/evidence.py --sets chats --modes hybrid --whole
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import Question, load_chats, load_longmemeval  # noqa: E402
from conversations import load_beam, load_locomo, load_molweni, load_realmem  # noqa: E402
from metrics import mean, percentile  # noqa: E402
from quality import open_mode, run_candidate_as_bundled, warm_index  # noqa: E402

__all__ = ["EVIDENCE_SETS", "ALL_SETS", "eval_evidence", "evidence_metrics"]

K = 10
TINY_CHARS = 120  # a hit showing less than this is "near-empty"
EVIDENCE_SETS = ("lme", "chats")  # what run.py measures every time (built in minutes)
# every conversational dev set (RealMem indexes for ~20 min)
ALL_SETS = ("lme", "chats", "locomo", "realmem", "beam", "molweni")
HIDDEN_SLACK = 30  # extra hits asked for when some of a question's lines are hidden (RealMem)


def _utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _overlaps(h: Any, spans: list[tuple[str, int, int]]) -> bool:
    return any(p == h.path and lo <= h.end_line and h.start_line <= hi for p, lo, hi in spans)


def evidence_metrics(q: Question, hits: list[Any]) -> dict[str, float]:
    """Turn recall, hit and MRR of the answer turns among the lines the hits show; session recall
    (the share of evidence sessions a top-10 hit shows lines of) and lines a hit. Turn metrics are
    left out (absent) for a question without evidence turns, session recall for one without sessions."""
    out: dict[str, float] = {}
    if q.sessions:
        out["session_recall@10"] = sum(any(_overlaps(h, [s]) for h in hits[:K]) for s in q.sessions) / len(q.sessions)
    out["lines@10"] = mean(h.end_line - h.start_line + 1 for h in hits[:K])
    if not q.evidence:
        return out
    first = None
    shown: set[tuple[str, int]] = set()
    per_rank: list[set[tuple[str, int]]] = []
    for rank, h in enumerate(hits[:K], start=1):
        lines = {(h.path, n) for n in range(h.start_line, h.end_line + 1)}
        per_rank.append(lines)
        if first is None and any(any((p, n) in lines for n in ns) for p, ns in q.evidence):
            first = rank
    for k in (5, 10):
        shown = set().union(*per_rank[:k]) if per_rank else set()
        seen = [any((p, n) in shown for n in ns) for p, ns in q.evidence]
        out[f"turn_recall@{k}"] = sum(seen) / len(seen) if seen else 0.0
        out[f"hit@{k}"] = 1.0 if any(seen) else 0.0
    out["mrr@10"] = 1.0 / first if first else 0.0
    out["chars@10"] = float(sum(_utf16(h.snippet) for h in hits[:K]))
    # Near-empty hits (a two-line MEMORY.md naming the people): slots taken by almost no text.
    tiny = [_utf16(h.snippet) < TINY_CHARS for h in hits[:K]]
    out["tiny@10"] = float(sum(tiny))
    out["tiny_first"] = 1.0 if tiny and tiny[0] else 0.0
    return out


async def _ask(manager, questions: list[Question], took: list[float], k: int = K) -> dict[str, list]:
    out = {}
    for q in questions:
        t0 = time.perf_counter()
        # Hidden lines (a later session holding the question verbatim) are dropped before the cut.
        wanted = k + HIDDEN_SLACK if q.hidden else k
        answer = await manager.search(q.text, max_results=wanted, min_score=0.0, now=q.now)
        took.append((time.perf_counter() - t0) * 1000)
        if answer.fallback or answer.unavailable:
            raise RuntimeError(
                f"{answer.backend} did not answer {q.qid!r} itself: {answer.fallback or answer.unavailable}"
            )
        out[q.qid] = [h for h in answer.results if not _overlaps(h, q.hidden)][:k]
    return out


async def eval_evidence(
    questions: list[Question], mode: str, state: Path, *, extra: dict | None = None, whole: bool = False,
    per_question: bool = False,
) -> dict[str, Any]:
    """Evidence metrics of `mode` over questions that may span several workspaces."""
    by_ws: dict[Path, list[Question]] = defaultdict(list)
    for q in questions:
        by_ws[q.workspace].append(q)
    per_query: dict[str, dict[str, float]] = {}
    took: list[float] = []
    types = {q.qid: q.qtype for q in questions}
    for ws, qs in by_ws.items():
        manager = open_mode(mode, ws, state / ws.name, extra)
        if whole:
            manager.snippet_chars = 10**9
        try:
            await manager.search("warm up", max_results=1)
            hits = await _ask(manager, qs, took)
        finally:
            await manager.aclose()
        for q in qs:
            per_query[q.qid] = evidence_metrics(q, hits[q.qid])
    names = dict.fromkeys(n for m in per_query.values() for n in m)
    out: dict[str, Any] = {n: round(mean(m[n] for m in per_query.values() if n in m), 4) for n in names}
    out["queries"] = len(per_query)
    out["turn_queries"] = sum("turn_recall@10" in m for m in per_query.values())
    out["latency_ms"] = {"p50": round(percentile(took, 0.5), 2), "p95": round(percentile(took, 0.95), 2)}
    by_type: dict[str, list[float]] = defaultdict(list)
    for qid, m in per_query.items():
        if "turn_recall@10" in m:
            by_type[types[qid]].append(m["turn_recall@10"])
    out["turn_recall@10_by_type"] = {t: round(mean(v), 4) for t, v in sorted(by_type.items())}
    if per_question:  # for a paired comparison of two runs (paired.py)
        out["per_question"] = per_query
    return out


def load_set(name: str, root: Path) -> list[Question]:
    if name == "lme":
        data = load_longmemeval(root)
        for q in data.questions:
            q.workspace = data.workspace
        return data.questions
    if name == "chats":
        return load_chats(root).questions
    loaders = {"locomo": load_locomo, "locomo-audit": lambda r: load_locomo(r, audited=True),
               "realmem": load_realmem, "beam": load_beam, "molweni": load_molweni}
    if name in loaders:
        return loaders[name](root)
    raise SystemExit(f"unknown evidence set {name!r} (known: {', '.join(ALL_SETS)}, locomo-audit)")


async def warm(questions: list[Question], mode: str, state: Path, extra: dict | None = None) -> None:
    kind = {"bm25": "bm25", "qmd": "qmd"}.get(mode, "hybrid")
    for ws in dict.fromkeys(q.workspace for q in questions):
        await warm_index(kind, ws, state / ws.name, lambda s: print(s, flush=True), extra)


async def _main(args: argparse.Namespace) -> None:
    extra = json.loads(args.extra) if args.extra else None
    if args.int8_graph:
        run_candidate_as_bundled(extra, args.int8_graph)
    results: dict[str, Any] = {}
    for name in args.sets.split(","):
        questions = load_set(name, args.work / "data")
        state = args.work / "state" / f"evidence-{name.removesuffix('-audit')}{args.tag}"
        results[name] = {}
        for mode in args.modes.split(","):
            await warm(questions, mode, state, extra)
            for whole in ([False, True] if args.whole else [False]):
                r = await eval_evidence(questions, mode, state, extra=extra, whole=whole, per_question=bool(args.out))
                label = mode + (" (whole chunks)" if whole else "")
                results[name][label] = r
                session = f"session@10 {r['session_recall@10']:.3f}  " if "session_recall@10" in r else ""
                print(
                    f"{name:6} {label:24} turn_recall@5 {r['turn_recall@5']:.3f} @10 {r['turn_recall@10']:.3f}  "
                    f"{session}"
                    f"hit@5 {r['hit@5']:.3f} @10 {r['hit@10']:.3f}  MRR@10 {r['mrr@10']:.3f}  lines/hit "
                    f"{r['lines@10']:.1f}  "
                    f"chars@10 {r['chars@10']:.0f}  tiny@10 {r['tiny@10']:.2f} first {r['tiny_first']:.3f}  "
                    f"p50 {r['latency_ms']['p50']:.0f} ms",
                    flush=True,
                )
                print(
                    "       by category: " + "  ".join(f"{t} {v:.3f}" for t, v in r["turn_recall@10_by_type"].items()),
                    flush=True,
                )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(ALL_SETS))
    ap.add_argument("--modes", default="bm25,vector,hybrid")
    ap.add_argument("--whole", action="store_true", help="also report whole chunks for the same ranking")
    ap.add_argument("--extra", help="memorySearch settings (JSON) merged into every mode")
    ap.add_argument("--tag", default="", help="suffix of the index folder (one per settings variant)")
    ap.add_argument("--int8-graph", help="with --extra's local.modelPath: its int8 graph, run as the bundled one")
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--out", type=Path, help="write the figures as JSON")
    anyio.run(_main, ap.parse_args())


if __name__ == "__main__":
    main()
