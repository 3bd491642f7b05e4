"""Learn late interaction's projection: W maps all-MiniLM-L6-v2's token vectors (token_states.py) to
`--dim` dimensions so that MaxSim orders each pool's evidence first.

Per question of the training sets' pools: MaxSim (the question's pieces weighed as
late_interaction.py weighs them) over the top `--candidates` hits, softmax over the pool at a
learned temperature, the loss the negative log of the mass on the hits that show evidence. W
starts at the identity (or the top `--dim` principal directions of the hits' tokens) and is pulled
back towards it (`--anchor`), so a few thousand questions cannot drag it far. Only sets whose
licence lets weights ship may train (LongMemEval, RealMem, Molweni).

    python contrib/reader/train_late.py --pools pools/ --states states/ --sets lme,chats,realmem,molweni --out W.npy
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np
import torch
from late_interaction import PERMITTED, permitted_set, piece_tokenizer, pieces, pool_idf, row_weights
from leak import unleak


def examples(pools: Path, states: Path, sets: list[str], candidates: int, weighting: str) -> list[tuple]:
    tok = piece_tokenizer()
    out = []
    for name in sets:
        rows, vectors = permitted_set(name, pools, states)
        idf = pool_idf(rows, tok, candidates)
        tensors: dict[str, torch.Tensor] = {}  # one tensor per text: hits recur across a set's questions

        def tensor(text: str) -> torch.Tensor:
            if text not in tensors:
                tensors[text] = torch.from_numpy(vectors[text].astype(np.float32))
            return tensors[text]
        for row in rows:
            hits = row["hits"][:candidates]
            labels = [h["label"] for h in hits]
            if not any(labels) or all(labels):
                continue
            weights = row_weights(row, pieces(row["query"], tok, 128), tok, weighting, idf, candidates)
            docs = [tensor(unleak(h["snippet"])) for h in hits]
            out.append((tensor(row["query"]),
                        torch.tensor(weights, dtype=torch.float32), docs, torch.tensor(labels, dtype=torch.bool)))
    return out


def start(data: list[tuple], dim: int) -> torch.Tensor:
    if dim == 384:
        return torch.eye(384)
    sample = torch.cat([d for _, _, docs, _ in data[:500] for d in docs[:3]])
    _, _, v = torch.linalg.svd(sample - sample.mean(0), full_matrices=False)
    return v[:dim].T.contiguous()


def score(q: torch.Tensor, w: torch.Tensor, docs: list[torch.Tensor], proj: torch.Tensor) -> torch.Tensor:
    qp = torch.nn.functional.normalize(q @ proj, dim=-1)
    sizes = [len(d) for d in docs]
    dp = torch.nn.functional.normalize(torch.cat(docs) @ proj, dim=-1)
    sims = qp @ dp.T  # question pieces x every hit's pieces
    best = torch.stack([part.max(dim=1).values for part in torch.split(sims, sizes, dim=1)], dim=1)
    weights = w if w.sum() > 0 else torch.ones_like(w)
    return (best * weights[:, None]).sum(0) / weights.sum()


def train(data: list[tuple], *, dim: int, epochs: int, lr: float, anchor: float, batch: int, seed: int):
    rng = random.Random(seed)
    origin = start(data, dim)
    proj = torch.nn.Parameter(origin.clone())
    log_scale = torch.nn.Parameter(torch.tensor(np.log(20.0), dtype=torch.float32))
    opt = torch.optim.Adam([proj, log_scale], lr=lr)
    started = time.time()
    for epoch in range(epochs):
        rng.shuffle(data)
        total, n = 0.0, 0
        for at in range(0, len(data), batch):
            losses = []
            for q, w, docs, labels in data[at : at + batch]:
                logits = score(q, w, docs, proj) * log_scale.exp()
                losses.append(torch.logsumexp(logits, 0) - torch.logsumexp(logits[labels], 0))
            loss = torch.stack(losses).mean() + anchor * ((proj - origin) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + loss.item() * len(losses), n + len(losses)
        print(f"  epoch {epoch + 1}: loss {total / max(n, 1):.4f}, scale {log_scale.exp().item():.1f} "
              f"({time.time() - started:.0f} s)", flush=True)
    return proj.detach().numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", type=Path, required=True)
    ap.add_argument("--states", type=Path, required=True)
    ap.add_argument("--sets", default=",".join(PERMITTED))
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--weighting", choices=("none", "stop", "idf", "hits"), default="idf")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--anchor", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.manual_seed(13)
    torch.set_num_threads(args.threads)
    data = examples(args.pools, args.states, args.sets.split(","), args.candidates, args.weighting)
    print(f"{len(data)} questions from {args.sets}", flush=True)
    proj = train(data, dim=args.dim, epochs=args.epochs, lr=args.lr, anchor=args.anchor, batch=args.batch, seed=13)
    np.save(args.out, proj.astype(np.float16))  # what ships: half the size, the same figures
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
