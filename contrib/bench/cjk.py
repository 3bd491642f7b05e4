"""Chinese and Japanese questions (../shared/bench-data/cjk-dev): keyword, hybrid, both tokenizers.

Recipe (cjk-dev/README.md): one Markdown file per paragraph, `memory/docs/<_id>.md` = `# <title>`,
a blank line, the text; every query against the whole corpus; a paragraph ranks at its best chunk.
Reports hit@1, hit@5, hit@10 and MRR@10 per set and mode. Development sets: the reserved splits
(CMRC 2018 dev, DRCD test, JSQuAD valid) are not here and must not be used for tuning.

    python contrib/bench/cjk.py                       # the three sets, four modes
    python contrib/bench/cjk.py --sets drcd_dev --modes bm25,hybrid --limit 500
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import BENCH_DATA, _write_if_changed  # noqa: E402
from metrics import mean, percentile  # noqa: E402
from quality import open_mode, warm_index  # noqa: E402

from memsift.engine.compose.wrapped import backend_of  # noqa: E402

__all__ = ["CJK_SETS", "CJK_MODES", "load_cjk", "eval_cjk"]

CJK_SETS = ("cmrc2018_trial", "drcd_dev", "jsquad_test_sample")
# mode name → (quality mode, memorySearch settings)
CJK_MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "bm25": ("bm25", {}),
    "hybrid": ("hybrid", {}),
    "bm25-trigram": ("bm25", {"store": {"fts": {"tokenizer": "trigram"}}}),
    "hybrid-trigram": ("hybrid", {"store": {"fts": {"tokenizer": "trigram"}}}),
    # The vector side kept whatever the query's script (before providers declared their scripts).
    "hybrid-unaware": ("hybrid", {}),
}
HITS = 30  # chunks per query: enough for 10 distinct paragraphs


def load_cjk(name: str, root: Path, data: Path = BENCH_DATA / "cjk-dev") -> tuple[Path, dict[str, str], dict[str, str]]:
    """(workspace, query id → text, query id → its paragraph id)."""
    src = data / name
    ws = root / "cjk" / name
    with open(src / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            _write_if_changed(
                ws / "memory" / "docs" / f"{d['_id']}.md", f"# {d['title'].strip()}\n\n{d['text'].strip()}\n"
            )
    with open(src / "queries.jsonl", encoding="utf-8") as fh:
        queries = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    with open(src / "qrels" / "dev.tsv", encoding="utf-8") as fh:
        rels = {
            row["query-id"]: row["corpus-id"] for row in csv.DictReader(fh, delimiter="\t") if int(row["score"]) > 0
        }
    return ws, {q: t for q, t in queries.items() if q in rels}, rels


async def eval_cjk(name: str, mode: str, root: Path, state: Path, limit: int | None = None) -> dict[str, Any]:
    ws, queries, rels = load_cjk(name, root)
    base, extra = CJK_MODES[mode]
    state = state / ("trigram" if "trigram" in mode else "unicode61")
    await warm_index(base, ws, state, lambda s: print(s, flush=True), extra)
    manager = open_mode(base, ws, state, extra)
    provider = backend_of(manager).provider  # under the stages (the evidence ranker) that wrap it
    scripts = getattr(provider, "scripts", None)
    if mode.endswith("-unaware"):
        provider.scripts = None
    per_query, took, set_aside = [], [], 0
    try:
        await manager.search("warm up", max_results=1)
        for qid in list(queries)[:limit]:
            t0 = time.perf_counter()
            answer = await manager.search(queries[qid], max_results=HITS, min_score=0.0)
            took.append((time.perf_counter() - t0) * 1000)
            set_aside += bool(answer.degraded.vector)
            docs = list(dict.fromkeys(Path(h.path).stem for h in answer.results))
            rank = docs.index(rels[qid]) + 1 if rels[qid] in docs else None
            per_query.append(rank)
    finally:
        if mode.endswith("-unaware"):
            provider.scripts = scripts
        await manager.aclose()
    out = {f"hit@{k}": round(mean(1.0 if r and r <= k else 0.0 for r in per_query), 4) for k in (1, 5, 10)}
    out["mrr@10"] = round(mean(1.0 / r if r and r <= 10 else 0.0 for r in per_query), 4)
    out["queries"] = len(per_query)
    out["vector_set_aside"] = set_aside
    out["latency_ms"] = {"p50": round(percentile(took, 0.5), 2), "p95": round(percentile(took, 0.95), 2)}
    return out


async def _main(args: argparse.Namespace) -> None:
    results: dict[str, Any] = {}
    for name in args.sets.split(","):
        results[name] = {}
        for mode in args.modes.split(","):
            r = await eval_cjk(
                name, mode, args.work / "data", args.work / "state" / f"cjk-{name}{args.tag}", args.limit
            )
            results[name][mode] = r
            print(f"{name:20} {mode:15} hit@1 {r['hit@1']:.3f}  hit@5 {r['hit@5']:.3f}  hit@10 {r['hit@10']:.3f}  "
                  f"MRR@10 {r['mrr@10']:.3f}  vector set aside {r['vector_set_aside']}/{r['queries']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(CJK_SETS))
    ap.add_argument("--modes", default=",".join(CJK_MODES))
    ap.add_argument("--limit", type=int, help="only the first N queries of each set")
    ap.add_argument("--tag", default="")
    ap.add_argument("--work", type=Path, default=HERE / "out")
    ap.add_argument("--out", type=Path)
    anyio.run(_main, ap.parse_args())


if __name__ == "__main__":
    main()
