"""Texts and the shipped model's vectors for them, to distil a smaller embedder from (distil_embedder.py).

A student learns to give what memsift's bundled model (the int8 graph it ships) gives: the target of
a chunk is the vector already stored for it in an index `evidence.py` built, and the target of a
question is the shipped provider's vector for it, so the student is held to today's answers, not
to the fp32 weights'. Only sets whose licence lets weights trained on them ship are read: LongMemEval
(`lme`, `chats`), RealMem and Molweni. Runs in memsift's own environment:

    python contrib/bench/evidence.py --modes hybrid --work W      # builds the indexes, if not yet
    python contrib/embedder/distil_data.py --work W --out distil.npz

writes the texts (chunks first, then questions) and their unit vectors, with each text's set.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bench"))
sys.path.insert(0, str(HERE.parent / "reader"))

from late_interaction import PERMITTED  # noqa: E402  (the sets whose licences let what is learnt from them ship)


def index_chunks(state: Path, name: str) -> list[tuple[str, bytes]]:
    """Every chunk of the set's indexes with its stored vector, once per text."""
    rows: dict[str, bytes] = {}
    for db in sorted((state / f"evidence-{name}").rglob("*.sqlite")):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        for text, blob in con.execute("SELECT text, embedding FROM chunks WHERE embedding IS NOT NULL"):
            rows.setdefault(text, blob)
        con.close()
    return list(rows.items())


def questions(data: Path, name: str) -> list[str]:
    import bench_data  # noqa: PLC0415
    import conversations  # noqa: PLC0415

    if name == "lme":
        return [q.text for q in bench_data.load_longmemeval(data).questions]
    if name == "chats":
        return [q.text for q in bench_data.load_chats(data).questions]
    if name == "realmem":
        return [q.text for q in conversations.load_realmem(data)]
    return [q.text for q in conversations.load_molweni(data)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="evidence.py's work folder (data/ and state/)")
    ap.add_argument("--sets", default=",".join(PERMITTED))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

    refused = [name for name in args.sets.split(",") if name not in PERMITTED]
    if refused:  # before any work: a refused set must not cost an hour of embedding first
        raise SystemExit(f"{', '.join(refused)}: its licence does not let weights trained on it ship"
                         f" (permitted: {', '.join(PERMITTED)})")
    provider = LocalMiniLMProvider()
    texts: list[str] = []
    vectors: list[np.ndarray] = []
    sets: list[str] = []
    kinds: list[str] = []
    for name in args.sets.split(","):
        chunks = index_chunks(args.work / "state", name)
        asked = sorted(set(questions(args.work / "data", name)))
        texts += [t for t, _ in chunks] + asked
        vectors += [np.frombuffer(b, dtype=np.float32) for _, b in chunks]
        vectors += list(np.asarray(provider.embed_sync(asked), dtype=np.float32))
        sets += [name] * (len(chunks) + len(asked))
        kinds += ["chunk"] * len(chunks) + ["question"] * len(asked)
        print(f"{name}: {len(chunks)} chunks, {len(asked)} questions", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    matrix = np.stack(vectors)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    np.savez(args.out, texts=np.array(texts, dtype=object), vectors=matrix, sets=np.array(sets), kinds=np.array(kinds))
    print(f"wrote {args.out}: {len(texts)} texts", flush=True)


if __name__ == "__main__":
    main()
