"""Late interaction on one bit a dimension: what a token store kept at index time would hold.

A hit's token vectors (token_states.py) are projected onto the top `--dims` principal directions of
the permitted sets' hit tokens (fitted here, LongMemEval, RealMem and Molweni only) and kept as
their signs: `--dims` bits a word piece (128 → 16 bytes). The question keeps its projected vectors
as they are (it is made at search time); MaxSim of a question piece against a hit piece is then
the projected question piece against the hit piece's signs. Writes states late_interaction.py
scores as it scores any (its `--states`), and the bytes a piece would take.

    python contrib/reader/token_codes.py --fit --states states/ --dims 128 --directions P128.npy
    python contrib/reader/token_codes.py --states states/ --directions P128.npy --sets locomo,beam --out codes128/
    python contrib/reader/token_codes.py --time 200 --directions P128.npy --sets locomo --out codes128/

`--time N` prints what a search would pay with such a store, on the first N questions: the
question's run of memsift's own int8 model (its token vectors through the directions), then the
idf over its 20 hits and MaxSim against their stored signs.
"""

from __future__ import annotations

import argparse
import pickle
import random
from pathlib import Path

import numpy as np
from late_interaction import PERMITTED, permitted_set, unit
from leak import unleak

def fit_directions(states: Path, pools: Path, dims: int, per_set: int = 2000, seed: int = 13,
                   sets: tuple[str, ...] = PERMITTED) -> np.ndarray:
    """The top `dims` principal directions (384 × dims) of hit tokens drawn from `sets` (permitted ones)."""
    rng = random.Random(seed)
    sample = []
    for name in sets:
        rows, vectors = permitted_set(name, pools, states)
        hits = sorted({unleak(h["snippet"]) for r in rows for h in r["hits"][:20]})
        for text in rng.sample(hits, min(per_set, len(hits))):
            sample.append(vectors[text].astype(np.float32))
        del vectors
    x = np.concatenate(sample)
    x -= x.mean(0)
    _, v = np.linalg.eigh(x.T @ x)  # the covariance's eigenvectors, smallest first
    return v[:, ::-1][:, :dims].astype(np.float32)


def signs(x: np.ndarray) -> np.ndarray:
    """The vector's signs as a unit vector (a zero counts as +): what one bit a dimension keeps."""
    s = np.where(x >= 0, 1.0, -1.0).astype(np.float32)
    return s / np.sqrt(s.shape[-1])


def coded(states: dict, queries: set[str], directions: np.ndarray | None) -> dict:
    """Hits as signs, questions as projected vectors (both through `directions` when given)."""
    out = {}
    for text, x in states.items():
        y = x.astype(np.float32) @ directions if directions is not None else x.astype(np.float32)
        out[text] = (unit(y) if text in queries else signs(y)).astype(np.float16)
    return out


def time_search(pools: Path, codes: Path, directions: np.ndarray, name: str, n: int) -> None:
    import time  # noqa: PLC0415

    from late_interaction import hits_weights, maxsim, piece_tokenizer, pieces  # noqa: PLC0415
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

    rows = pickle.loads((pools / f"{name}.pkl").read_bytes())[:n]
    stored = pickle.loads((codes / f"{name}.pkl").read_bytes())
    tok = piece_tokenizer()
    model = LocalMiniLMProvider()
    model.embed_sync(["warm up", "the optimised graph"])  # loads the session documents and questions share
    run, read = [], []
    for row in rows:
        started = time.perf_counter()
        ids = np.asarray([tok.encode(row["query"]).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        hidden = model._session.run(None, {k: v for k, v in feeds.items() if k in model._input_names})[0][0][1:-1]
        question = unit(hidden @ directions)
        between = time.perf_counter()
        texts = [unleak(h["snippet"]) for h in row["hits"][:20]]
        weights = hits_weights(pieces(row["query"], tok, 128), texts, tok)
        [maxsim(question, stored[t].astype(np.float32), weights) for t in texts]
        run.append((between - started) * 1000)
        read.append((time.perf_counter() - between) * 1000)
    for label, took in (("the question's run", run), ("idf over 20 hits + MaxSim on their signs", read)):
        took.sort()
        print(f"{name}: {label}: p50 {took[len(took) // 2]:.1f} ms, p95 {took[int(len(took) * 0.95)]:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", type=Path, default=Path("pools"))
    ap.add_argument("--states", type=Path, help="token_states.py's output (not needed with --time)")
    ap.add_argument("--directions", type=Path, help="the principal directions (.npy); none: the 384 dimensions")
    ap.add_argument("--fit", action="store_true", help="fit --dims directions on the permitted sets into --directions")
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--fit-sets", default=",".join(PERMITTED), help="the sets --fit draws from (one left out)")
    ap.add_argument("--sets", default="lme,chats,locomo,realmem,beam,molweni")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--time", type=int, default=0, help="time a search's share on this many questions of --out")
    args = ap.parse_args()
    if args.time:
        for name in args.sets.split(","):
            time_search(args.pools, args.out, np.load(args.directions), name, args.time)
        return
    if args.fit:
        sets = tuple(args.fit_sets.split(","))
        np.save(args.directions, fit_directions(args.states, args.pools, args.dims, sets=sets))
        print(f"wrote {args.directions} ({args.dims} directions from {', '.join(sets)})")
        return
    directions = np.load(args.directions) if args.directions else None
    bits = directions.shape[1] if directions is not None else 384
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.sets.split(","):
        rows = pickle.loads((args.pools / f"{name}.pkl").read_bytes())
        states = pickle.loads((args.states / f"{name}.pkl").read_bytes())
        out = coded(states, {r["query"] for r in rows}, directions)
        with (args.out / f"{name}.pkl").open("wb") as fh:
            pickle.dump(out, fh)
        pieces = sum(len(v) for v in states.values())
        print(f"{name}: {len(states)} texts, {pieces} pieces, {bits // 8} bytes a piece", flush=True)


if __name__ == "__main__":
    main()
