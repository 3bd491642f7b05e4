"""Write a distilled student (distil_embedder.py) into the bundled model's own ONNX graph.

memsift's int8 build (engine/embeddings/int8_graph.py) rewrites the bundled graph's attention and
GELU into fused operators by matching the exporter's exact patterns; a graph exported by another
version of transformers or torch does not match them and runs unfused, slower, so its speed would
not be the student's. Here the student's weights go into the bundled graph itself: the layers the
student dropped are cut out (each kept layer reads the previous kept layer's output), and every
kept weight is replaced by the student's, quantised as the bundled file stores them (symmetric
int8: a scale per output column for the linear layers, per row for the embedding tables). Runs in
memsift's own environment:

    python contrib/embedder/student_graph.py student/ --layers 0,3,5 student-graph/
    python contrib/embedder/quantise.py student-graph/ student-int8/

writes `student-graph/model.onnx` and copies `tokenizer.json` beside it.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

LINEAR = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
          "intermediate.dense", "output.dense")
NORMS = ("attention.output.LayerNorm", "output.LayerNorm")


class Graph:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.inits = {i.name: i for i in model.graph.initializer}
        self.producer = {o: n for n in model.graph.node for o in n.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for n in model.graph.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    def array(self, name: str) -> np.ndarray:
        return numpy_helper.to_array(self.inits[name])

    def put(self, name: str, value: np.ndarray) -> None:
        old = self.inits[name]
        if tuple(old.dims) != value.shape:
            raise SystemExit(f"{name}: the student's shape {value.shape} is not the graph's {tuple(old.dims)}")
        old.CopyFrom(numpy_helper.from_array(value.astype(numpy_helper.to_array(old).dtype), name))

    def weight_of(self, bias: str) -> str:
        """The weight tensor of the MatMul whose output the bias is added to ((in, out), as ONNX keeps it)."""
        (add,) = self.consumers[bias]
        product = next(i for i in add.input if i != bias)
        return self.producer[product].input[1]

    def norm_output(self, weight: str) -> str:
        (norm,) = self.consumers[weight]
        return norm.output[0]


def student_weights(student: Path, prefix: str = "model.") -> dict[str, np.ndarray]:
    """The student's parameters by their transformers names, linear weights as (in, out)."""
    g = Graph(onnx.load(str(student)))
    out: dict[str, np.ndarray] = {}
    for name in g.inits:
        if not name.startswith(prefix):
            continue
        key = name.removeprefix(prefix)
        out[key] = g.array(name)
        if key.endswith(".bias") and any(key.startswith(f"encoder.layer.{k}.{s}.") for s in LINEAR for k in range(6)):
            out[key.removesuffix(".bias") + ".weight"] = g.array(g.weight_of(name))
    return out


def symmetric_int8(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(w).max(axis=axis, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale.astype(np.float32)


def build(student: Path, layers: list[int], out: Path) -> None:
    from memsift.engine.embeddings.local import _bundled_model  # noqa: PLC0415  (student_weights runs without memsift)

    weights = student_weights(student)
    g = Graph(onnx.load(str(_bundled_model())))
    if sorted(set(layers)) != layers or layers[-1] != 5:
        raise SystemExit("--layers: increasing layer numbers ending with 5 (the layer whose output is the graph's)")
    for k, layer in enumerate(layers):
        mine, theirs = f"encoder.layer.{k}.", f"inner.encoder.layer.{layer}."
        for sub in LINEAR:
            bias = f"{theirs}{sub}.bias"
            g.put(bias, weights[f"{mine}{sub}.bias"])
            mul = g.producer[g.weight_of(bias)]  # the weight is dequantised in the graph: Mul(Cast(q), scale)
            q, scale = symmetric_int8(weights[f"{mine}{sub}.weight"], axis=0)
            g.put(g.producer[mul.input[0]].input[0], q)
            g.put(mul.input[1], scale)
        for norm in NORMS:
            for part in ("weight", "bias"):
                g.put(f"{theirs}{norm}.{part}", weights[f"{mine}{norm}.{part}"])
    for table in ("word_embeddings", "position_embeddings"):
        q, scale = symmetric_int8(weights[f"embeddings.{table}.weight"], axis=1)
        g.put(f"inner.embeddings.{table}.weight_q", q)
        g.put(f"inner.embeddings.{table}.weight_scale", scale)
    g.put("inner.embeddings.token_type_embeddings.weight", weights["embeddings.token_type_embeddings.weight"])
    for part in ("weight", "bias"):
        g.put(f"inner.embeddings.LayerNorm.{part}", weights[f"embeddings.LayerNorm.{part}"])

    # Cut the dropped layers out: each kept layer reads what the previous kept layer wrote.
    output_of = {-1: g.norm_output("inner.embeddings.LayerNorm.weight")}
    output_of.update({i: g.norm_output(f"inner.encoder.layer.{i}.output.LayerNorm.weight") for i in range(6)})
    previous = -1
    for layer in layers:
        if previous != layer - 1:
            for node in g.consumers[output_of[layer - 1]]:
                node.input[:] = [output_of[previous] if i == output_of[layer - 1] else i for i in node.input]
        previous = layer
    _drop_unreachable(g.model)
    onnx.checker.check_model(g.model)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(g.model, str(out / "model.onnx"))
    shutil.copy(student.with_name("tokenizer.json"), out / "tokenizer.json")
    agreement = _same_vectors(student, out / "model.onnx")
    if agreement < MIN_AGREEMENT:
        raise SystemExit(f"the written graph gives other vectors than the student (cosine {agreement:.4f})")
    print(f"the written graph agrees with the student: cosine ≥ {agreement:.4f}")


MIN_AGREEMENT = 0.999  # only the weights' int8 rounding may differ


def _same_vectors(student: Path, written: Path) -> float:
    """The lowest cosine between the two graphs' mean-pooled outputs on fixed windows, padded in a batch."""
    import onnxruntime as ort  # noqa: PLC0415

    rng = np.random.default_rng(7)
    ids = rng.integers(1000, 30000, size=(3, 64))
    ids[:, 0], ids[:, -1] = 101, 102
    mask = np.ones_like(ids)
    mask[1, 40:] = 0  # a shorter window beside full ones
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    pooled = []
    for graph in (student, written):
        hidden = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        v = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        pooled.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    return float((pooled[0] * pooled[1]).sum(1).min())


def _drop_unreachable(model: onnx.ModelProto) -> None:
    producer = {o: n for n in model.graph.node for o in n.output}
    needed, stack = set(), [o.name for o in model.graph.output]
    while stack:
        name = stack.pop()
        node = producer.get(name)
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            stack += list(node.input)
    kept = [n for n in model.graph.node if id(n) in needed]
    used = {i for n in kept for i in n.input}
    del model.graph.node[:]
    model.graph.node.extend(kept)
    inits = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("student", type=Path, help="distil_embedder.py's folder (model.onnx, tokenizer.json)")
    ap.add_argument("--layers", required=True, help="the bundled model's layers the student kept, as trained")
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    build(args.student / "model.onnx", [int(x) for x in args.layers.split(",")], args.out)
    print(f"wrote {args.out / 'model.onnx'} ({(args.out / 'model.onnx').stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
