"""The pools a reader reranks: each dev-set question's top hits as the default search returns them.

For each question of a conversational dev set (contrib/bench/evidence.py, whose indexes it reads):
the default hybrid search (evidence ranker on, rerank stage off) asked for `--pool` hits at the
question's date, minScore 0, hidden lines dropped (RealMem), each hit kept with its path, lines,
score and snippet (what the rerank stage reads), and whether it shows an evidence turn.
Everything a reader is trained on and measured by comes from these files, so training, the
leave-one-set-out table and the blend search need no search at all.

    python contrib/reader/collect_pools.py --sets lme,chats,locomo,realmem,beam --work contrib/bench/out --out pools/
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import defaultdict
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bench"))

from evidence import _ask, load_set, warm  # noqa: E402
from quality import open_mode  # noqa: E402
from train_ranker import _shows_answer  # noqa: E402

POOL = 30


async def collect(name: str, work: Path, pool: int) -> list[dict]:
    questions = load_set(name, work / "data")
    state = work / "state" / f"evidence-{name}"
    await warm(questions, "hybrid", state)
    by_ws = defaultdict(list)
    for q in questions:
        by_ws[q.workspace].append(q)
    rows = []
    for ws, qs in by_ws.items():
        manager = open_mode("hybrid", ws, state / ws.name)
        try:
            await manager.search("warm up", max_results=1)
            pools = await _ask(manager, qs, [], k=pool)
        finally:
            await manager.aclose()
        for q in qs:
            rows.append({
                "set": name, "qid": q.qid, "query": q.text, "qtype": q.qtype,
                "evidence": q.evidence, "sessions": q.sessions,
                "hits": [{"path": h.path, "start": h.start_line, "end": h.end_line, "score": h.score,
                          "snippet": h.snippet, "label": bool(_shows_answer(q, h))} for h in pools[q.qid]],
            })
        print(f"  {name} {ws.name}: {len(qs)} questions", flush=True)
    return rows


async def _main(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.sets.split(","):
        rows = await collect(name, args.work, args.pool)
        with (args.out / f"{name}.pkl").open("wb") as fh:
            pickle.dump(rows, fh)
        print(f"{name}: {len(rows)} questions, {sum(len(r['hits']) for r in rows)} hits", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="lme,chats,locomo,realmem,beam")
    ap.add_argument("--work", type=Path, default=HERE.parent / "bench" / "out")
    ap.add_argument("--pool", type=int, default=POOL)
    ap.add_argument("--out", type=Path, required=True)
    anyio.run(_main, ap.parse_args())


if __name__ == "__main__":
    main()
