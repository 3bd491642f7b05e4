"""Training pairs for the conversation embedder, mined from the dev sets' own indexes.

For each question with evidence turns: the question, the indexed chunks that show an evidence
turn (positives), and the chunks the current local model ranks closest to the question that show
none (hard negatives, what today's vector side confuses). Chunks are read from the builtin index
the evidence bench built (`contrib/bench/evidence.py --sets S --modes hybrid`), so they are the
texts a search embeds, verbatim. A question's hidden lines (RealMem: its own and later sessions)
are never a positive or a negative.

Only sets whose licence allows training weights that ship may be mined (docs/performance.md):
LongMemEval (`lme`, `chats`: MIT) and RealMem (Apache-2.0). LoCoMo and BEAM stay held out.

    python contrib/embedder/mine_pairs.py --work contrib/bench/out --sets lme,chats,realmem --out pairs.jsonl
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bench"))

from evidence import load_set  # noqa: E402

TRAINABLE = ("lme", "chats", "realmem")
HARD_NEGATIVES = 8  # kept per question, from the closest non-evidence chunks
NEGATIVE_DEPTH = 30  # how deep in the current model's order negatives are taken from


def _index_file(state: Path) -> Path:
    found = sorted(state.glob("local/memory/main-*.sqlite"))
    if not found:
        raise SystemExit(f"no builtin index under {state}: run contrib/bench/evidence.py for this set first")
    return found[0]


def _chunks(db: Path) -> tuple[list[tuple[str, int, int, str]], np.ndarray]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT path, start_line, end_line, text, embedding FROM chunks"
                           " WHERE embedding IS NOT NULL ORDER BY rowid").fetchall()
    finally:
        con.close()
    vectors = np.stack([np.frombuffer(r[4], dtype=np.float32) for r in rows])
    return [(r[0], r[1], r[2], r[3]) for r in rows], vectors


def _overlaps(chunk: tuple[str, int, int, str], spans: list[tuple[str, int, int]]) -> bool:
    path, lo, hi, _ = chunk
    return any(p == path and a <= hi and lo <= b for p, a, b in spans)


def mine(name: str, work: Path, provider) -> list[dict]:
    questions = [q for q in load_set(name, work / "data") if q.evidence]
    by_ws = defaultdict(list)
    for q in questions:
        by_ws[q.workspace].append(q)
    out = []
    for ws, qs in by_ws.items():
        chunks, vectors = _chunks(_index_file(work / "state" / f"evidence-{name}" / ws.name))
        for q in qs:
            evidence = [(p, min(ns), max(ns)) for p, ns in q.evidence]
            pos = [i for i, c in enumerate(chunks) if _overlaps(c, evidence) and not _overlaps(c, q.hidden)]
            if not pos:
                continue
            sims = vectors @ provider.embed_query_sync(q.text)
            order = np.argsort(-sims)[:NEGATIVE_DEPTH + len(pos)]
            neg = [int(i) for i in order if i not in pos and not _overlaps(chunks[i], q.hidden)][:HARD_NEGATIVES]
            out.append({"set": name, "qid": q.qid, "query": q.text,
                        "pos": [chunks[i][3] for i in pos], "neg": [chunks[i][3] for i in neg]})
        print(f"  {name} {ws.name}: {len(qs)} questions", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=HERE.parent / "bench" / "out")
    ap.add_argument("--sets", default=",".join(TRAINABLE))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

    provider = LocalMiniLMProvider()
    with args.out.open("w", encoding="utf-8") as fh:
        for name in args.sets.split(","):
            if name not in TRAINABLE:
                raise SystemExit(f"{name!r} may not train weights that ship (trainable: {', '.join(TRAINABLE)})")
            rows = mine(name, args.work, provider)
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            print(f"{name}: {len(rows)} questions with positives", flush=True)


if __name__ == "__main__":
    main()
