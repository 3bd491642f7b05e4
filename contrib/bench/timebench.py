"""Time-aware search: LongMemEval per question type and the chats' evidence with time features on
and off, decay formulas side by side, SciFact rankings with and without time (they must not
change), the time-expression parser's cost, and the time-only questions of `timeonly.py` ("what
did I do yesterday?": top-1 and top-5 in the window, empty answers, per template).

Variants (all hybrid, local model, each question at its own date):
- `time off`: no windows, no decay (memsift before time-aware search);
- `time on`: the question's time windows (the default);
- `time on + decay`: plus bounded temporal decay (the default formula);
- `decay (time off)`: bounded decay alone, against `time off`;
- `reference decay`: the reference's formula (score × 0.5^(age/30 days) from now), no windows.

    python contrib/bench/timebench.py            # about 15 min on 2 cores, indexes reused
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import load_longmemeval, load_scifact  # noqa: E402
from evidence import eval_evidence, load_set, warm  # noqa: E402
from metrics import percentile  # noqa: E402
from quality import eval_longmemeval, open_mode, warm_index  # noqa: E402
from timeonly import time_only  # noqa: E402

__all__ = ["VARIANTS", "time_aware"]

TIME_ONLY_PER_TEMPLATE = 40  # questions of each time-only template (timeonly.py)

_DECAY = {"enabled": True}
VARIANTS: dict[str, dict[str, Any]] = {
    "time off": {"query": {"time": {"enabled": False}}},
    "time on": {},
    "time on + decay": {"query": {"hybrid": {"temporalDecay": _DECAY}}},
    "decay (time off)": {"query": {"time": {"enabled": False}, "hybrid": {"temporalDecay": _DECAY}}},
    "reference decay": {
        "query": {"time": {"enabled": False}, "hybrid": {"temporalDecay": {**_DECAY, "formula": "reference"}}}
    },
}


def say(text: str) -> None:
    print(text, flush=True)


def parser_cost(questions: list[tuple[str, float]]) -> dict[str, Any]:
    """find_time_windows over real questions (p50/p95, warm), and its first call in a new process
    (imports dateparser and loads its English data)."""
    from memsift.engine.search.time_query import find_time_windows  # noqa: PLC0415

    cold = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time; t = time.perf_counter(); from memsift.engine.search.time_query import find_time_windows; "
            "find_time_windows('what did I buy two weeks ago?'); print((time.perf_counter() - t) * 1000)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    find_time_windows("what did I buy two weeks ago?")
    took, named = [], 0
    for _ in range(3):
        for q, n in questions:
            t0 = time.perf_counter()
            named += bool(find_time_windows(q, n))
            took.append((time.perf_counter() - t0) * 1000)
    return {"first_call_ms": round(float(cold.stdout), 1), "p50_ms": round(percentile(took, 0.5), 3),
            "p95_ms": round(percentile(took, 0.95), 3), "questions": len(questions), "naming_a_time": named // 3}


def _same_ranking(a: list[tuple], b: list[tuple]) -> bool:
    """The same hits with the same scores, position by position, to 1e-5: the model's query vector
    differs in its last float bits between two runs (the same variant twice differs there too),
    which can also swap two hits of equal score."""
    return (
        len(a) == len(b)
        and {x[:2] for x in a} == {y[:2] for y in b}
        and all(abs(x[2] - y[2]) <= 1e-5 for x, y in zip(a, b))
    )


async def _scifact_unchanged(work: Path) -> dict[str, Any]:
    """SciFact's test queries with time on and off: how many rankings differ (must be none)."""
    data = load_scifact(work / "data")
    state = work / "state" / "scifact"
    await warm_index("hybrid", data.workspace, state, say)
    queries = list(data.split("test")[0].items())
    from memsift.engine.search.time_query import find_time_windows  # noqa: PLC0415

    ranked: dict[str, dict[str, list]] = {}
    for name in ("time off", "time on"):
        manager = open_mode("hybrid", data.workspace, state, VARIANTS[name])
        try:
            ranked[name] = {
                qid: [
                    (h.path, h.start_line, h.score)
                    for h in (await manager.search(text, max_results=30, min_score=0.0)).results
                ]
                for qid, text in queries
            }
        finally:
            await manager.aclose()
    timed = {qid for qid, text in queries if find_time_windows(text)}
    changed = {qid for qid, _ in queries if not _same_ranking(ranked["time off"][qid], ranked["time on"][qid])}
    return {"queries": len(queries), "naming_a_time": len(timed), "rankings_changed": len(changed - timed),
            "timed_rankings_changed": len(changed & timed)}


async def time_aware(
    work: Path, parts: tuple[str, ...] = ("longmemeval", "evidence", "scifact", "parser", "timeonly")
) -> dict[str, Any]:
    out: dict[str, Any] = {"longmemeval": {}, "evidence": {}}
    lme = load_longmemeval(work / "data")
    if "longmemeval" in parts:
        say("Time-aware search: LongMemEval (one shared pool, each question at its own date)")
        await warm_index("hybrid", lme.workspace, work / "state" / "lme", say)
    for name, extra in VARIANTS.items() if "longmemeval" in parts else ():
        r = out["longmemeval"][name] = await eval_longmemeval(lme, "hybrid", work / "state" / "lme", extra)
        by = r["recall_any@10_by_type"]
        say(f"  {name:17} recall_any@10 {r['recall_any@10']:.3f}  temporal {by['temporal-reasoning']:.3f}  "
            f"knowledge-update {by['knowledge-update']:.3f}  multi-session {by['multi-session']:.3f}")
    for set_name in ("chats", "lme") if "evidence" in parts else ():
        say(f"Time-aware search: evidence shown ({set_name})")
        questions = load_set(set_name, work / "data")
        state = work / "state" / f"evidence-{set_name}"
        await warm(questions, "hybrid", state)
        out["evidence"][set_name] = {}
        for name, extra in VARIANTS.items():
            r = out["evidence"][set_name][name] = await eval_evidence(questions, "hybrid", state, extra=extra)
            say(
                f"  {name:17} turn_recall@10 {r['turn_recall@10']:.3f}  hit@10 {r['hit@10']:.3f}  near-empty first "
                f"{r['tiny_first']:.3f}"
            )
    if "scifact" in parts:
        say("Time-aware search: SciFact rankings with time on and off")
        out["scifact"] = await _scifact_unchanged(work)
        sf = out["scifact"]
        say(
            f"  rankings changed: {sf['rankings_changed']} of {sf['queries'] - sf['naming_a_time']} queries naming no "
            f"time, "
            f"{sf['timed_rankings_changed']} of {sf['naming_a_time']} naming one"
        )
    if "timeonly" in parts:
        out["time_only"] = await time_only(work, per_template=TIME_ONLY_PER_TEMPLATE, say=say)
    if "parser" not in parts:
        return out
    chats = load_set("chats", work / "data")
    out["parser"] = parser_cost([(q.text, q.now) for q in lme.questions] + [(q.text, q.now) for q in chats])
    p = out["parser"]
    say(f"  parser: p50 {p['p50_ms']:.3f} ms, p95 {p['p95_ms']:.3f} ms over {p['questions']} questions "
        f"({p['naming_a_time']} name a time); first call {p['first_call_ms']:.0f} ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--out", type=Path, help="write the figures as JSON")
    ap.add_argument(
        "--parts", default="longmemeval,evidence,scifact,parser,timeonly", help="which parts to run (comma-separated)"
    )
    args = ap.parse_args()
    figures = anyio.run(time_aware, args.work, tuple(args.parts.split(",")))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
