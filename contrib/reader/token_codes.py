"""Late interaction on one bit a dimension: what a token store kept at index time would hold.

A hit's token vectors (token_states.py) are projected onto the top `--dims` principal directions of
the permitted sets' hit tokens (fitted here, LongMemEval, RealMem and Molweni only) and kept as
their signs: `--dims` bits a word piece (128 → 16 bytes). The question keeps its projected vectors
as they are (it is made at search time); MaxSim of a question piece against a hit piece is then
the projected question piece against the hit piece's signs. Writes states late_interaction.py
scores as it scores any (its `--states`), and the bytes a piece would take.

    python contrib/reader/token_codes.py --fit --states states/ --dims 128 --directions P128.npy
    python contrib/reader/token_codes.py --states states/ --directions P128.npy --sets locomo,beam --out codes128/
"""

from __future__ import annotations

import argparse
import pickle
import random
from pathlib import Path

import numpy as np
from leak import unleak

PERMITTED = ("lme", "chats", "realmem", "molweni")


def fit_directions(states: Path, pools: Path, dims: int, per_set: int = 2000, seed: int = 13,
                   sets: tuple[str, ...] = PERMITTED) -> np.ndarray:
    """The top `dims` principal directions (384 × dims) of hit tokens drawn from `sets` (permitted ones)."""
    rng = random.Random(seed)
    sample = []
    for name in sets:
        if name not in PERMITTED:
            raise SystemExit(f"{name!r} may not shape what ships (permitted: {', '.join(PERMITTED)})")
        rows = pickle.loads((pools / f"{name}.pkl").read_bytes())
        vectors = pickle.loads((states / f"{name}.pkl").read_bytes())
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


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)


def coded(states: dict, queries: set[str], directions: np.ndarray | None) -> dict:
    """Hits as signs, questions as projected vectors (both through `directions` when given)."""
    out = {}
    for text, x in states.items():
        y = x.astype(np.float32) @ directions if directions is not None else x.astype(np.float32)
        out[text] = (unit(y) if text in queries else signs(y)).astype(np.float16)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", type=Path, default=Path("pools"))
    ap.add_argument("--states", type=Path, required=True)
    ap.add_argument("--directions", type=Path, help="the principal directions (.npy); none: the 384 dimensions")
    ap.add_argument("--fit", action="store_true", help="fit --dims directions on the permitted sets into --directions")
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--fit-sets", default=",".join(PERMITTED), help="the sets --fit draws from (one left out)")
    ap.add_argument("--sets", default="lme,chats,locomo,realmem,beam,molweni")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
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
        pieces = sum(len(v) for t, v in states.items())
        print(f"{name}: {len(states)} texts, {pieces} pieces, {bits // 8} bytes a piece", flush=True)


if __name__ == "__main__":
    main()
