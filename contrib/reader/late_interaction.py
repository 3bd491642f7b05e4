"""Late interaction measured on the reader's pools: MaxSim between the question's and each hit's
token vectors (token_states.py), blended with the search's own score over the top `--candidates`.

MaxSim(q, d) = mean over the question's word pieces of the best cosine with any of the hit's.
`--projection W.npy` maps every token vector through W first (train_late.py learns one); without
it the vectors are all-MiniLM-L6-v2's as they are. Figures as contrib/bench/evidence.py counts them.

    python contrib/reader/late_interaction.py --pools pools/ --states states/ --sets locomo,beam --weights 0,0.2,0.4
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bench"))
sys.path.insert(0, str(HERE))

from leak import unleak  # noqa: E402


PERMITTED = ("lme", "chats", "realmem", "molweni")  # whose licences let what is learnt from them ship


def permitted_set(name: str, pools: Path, states: Path) -> tuple[list[dict], dict]:
    """A set's pools and token vectors, refused unless its licence lets what it shapes ship."""
    if name not in PERMITTED:
        raise SystemExit(f"{name!r} may not shape what ships (permitted: {', '.join(PERMITTED)})")
    return pickle.loads((pools / f"{name}.pkl").read_bytes()), pickle.loads((states / f"{name}.pkl").read_bytes())


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)


STOP = set(
    "a an the and or but if of at by for with about to from in on into over under again further then once here "
    "there when where why how what which who whom whose this that these those am is are was were be been being have "
    "has had having do does did doing i me my myself we our ours you your yours he him his she her hers it its they "
    "them their theirs s t can will just don should now any some all both each few more most other such no nor "
    "not only own same so than too very would could ever".split()
)
TOKENIZER = HERE.parent.parent / "engine" / "embeddings" / "data" / "tokenizer.json"


def piece_tokenizer():
    """The bundled model's tokenizer, neither cutting nor padding (pieces() cuts as token_states.py did)."""
    from tokenizers import Tokenizer  # noqa: PLC0415

    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.no_truncation()
    return tok


def pieces(text: str, tok, max_tokens: int) -> list[str]:
    """The word pieces token_states.py kept for a text (no [CLS], [SEP] or padding)."""
    return tok.encode(text).tokens[1:-1][: max_tokens - 2]


def question_weights(words: list[str], how: str, idf: dict[str, float]) -> np.ndarray:
    if how == "stop":
        return np.array([0.0 if (w in STOP or not w.strip("#").isalnum()) else 1.0 for w in words])
    if how == "idf":
        unseen = max(idf.values(), default=1.0)  # a piece no hit has: as rare as the rarest
        return np.array([idf.get(w, unseen) for w in words])
    return np.ones(len(words))


def maxsim(q: np.ndarray, d: np.ndarray, weights: np.ndarray | None = None) -> float:
    if len(q) == 0 or len(d) == 0:
        return 0.0
    best = (q @ d.T).max(axis=1)
    if weights is None or weights.sum() <= 0:
        return float(best.mean())
    return float((best * weights).sum() / weights.sum())


def pool_idf(rows: list[dict], tok, candidates: int) -> dict[str, float]:
    """Each word piece's idf over the distinct hits of a set's pools (its top `candidates`)."""
    return hits_idf(list({unleak(h["snippet"]) for r in rows for h in r["hits"][:candidates]}), tok)


def hits_idf(texts: list[str], tok) -> dict[str, float]:
    """Each word piece's idf over `texts` (one question's own hits: what a search knows when it ranks)."""
    df: dict[str, int] = {}
    for t in texts:
        for w in set(pieces(t, tok, 128)):
            df[w] = df.get(w, 0) + 1
    n = len(texts)
    return {w: float(np.log((n + 1) / (c + 0.5))) for w, c in df.items()}


def hits_weights(words: list[str], texts: list[str], tok) -> np.ndarray:
    """The question's pieces weighed by their idf over its own hits `texts` (the `hits` weighting)."""
    return question_weights(words, "idf", hits_idf(texts, tok))


def row_weights(row: dict, words: list[str], tok, weighting: str, idf: dict[str, float],
                candidates: int) -> np.ndarray:
    """The question's piece weights: `hits` takes the idf over its own top `candidates`, `idf` the set's."""
    if weighting == "hits":
        return hits_weights(words, [unleak(h["snippet"]) for h in row["hits"][:candidates]], tok)
    return question_weights(words, weighting, idf)


def pool_scores(rows: list[dict], states: dict, candidates: int, projection: np.ndarray | None,
                weighting: str = "none", doc_tokens: int = 126) -> list[list[float]]:
    def vec(text: str, keep: int = 126) -> np.ndarray:
        x = states[text][:keep].astype(np.float32)
        return unit(x @ projection) if projection is not None else x

    tok = None
    idf: dict[str, float] = {}
    if weighting != "none":
        tok = piece_tokenizer()
        if weighting == "idf":
            idf = pool_idf(rows, tok, candidates)
    cache: dict[str, np.ndarray] = {}
    out = []
    for row in rows:
        q = vec(row["query"])
        weights = None
        if tok is not None:
            words = pieces(row["query"], tok, 128)
            assert len(words) == len(q), (row["query"], len(words), len(q))
            weights = row_weights(row, words, tok, weighting, idf, candidates)
        scores = []
        for h in row["hits"][:candidates]:
            text = unleak(h["snippet"])
            if text not in cache:
                cache[text] = vec(text, doc_tokens)
            scores.append(maxsim(q, cache[text], weights))
        out.append(scores)
    return out


def reordered(row: dict, late: list[float], weight: float) -> list:
    from evaluate import by_blend  # noqa: PLC0415  (memsift's own code: not needed to train)

    return by_blend(row, late, weight)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from evaluate import figures, line, pool_arguments  # noqa: PLC0415

    pool_arguments(ap, sets="lme,chats,locomo,realmem,beam,molweni", weights="0,0.1,0.2,0.3,0.5,1")
    ap.add_argument("--states", type=Path, required=True)
    ap.add_argument("--projection", type=Path)
    ap.add_argument("--doc-tokens", type=int, default=126, help="a hit's first word pieces that count")
    ap.add_argument("--weighting", choices=("none", "stop", "idf", "hits"), default="idf",
                    help="how the question's word pieces count: alike, stopwords out, by idf over the set's "
                    "pools or over the question's own hits")
    args = ap.parse_args()
    projection = np.load(args.projection) if args.projection else None
    for name in args.sets.split(","):
        rows = pickle.loads((args.pools / f"{name}.pkl").read_bytes())
        states = pickle.loads((args.states / f"{name}.pkl").read_bytes())
        late = pool_scores(rows, states, args.candidates, projection, args.weighting, args.doc_tokens)
        print(f"{name}: {len(rows)} questions", flush=True)
        for w in (float(x) for x in args.weights.split(",")):
            ranked = [reordered(r, s, w) for r, s in zip(rows, late)]
            print("  " + line(f"weight {w:g}", figures(rows, ranked)), flush=True)


if __name__ == "__main__":
    main()
