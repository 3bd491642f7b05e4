"""ONNX cross-encoder graphs built at test (and benchmark) time with the `onnx` helper API: no
weights are downloaded or vendored.

- `bert_cross_encoder`: the BERT cross-encoder architecture (embeddings, N encoder layers with
  masked multi-head attention, pooler, one-logit classifier) with random weights; at MiniLM-L6
  size (384 hidden, 6 layers, 12 heads, 1536 intermediate) it costs what ms-marco-MiniLM-L-6-v2 costs.
- `probe_graph`: a graph whose logit is a known function of its inputs (the number of real
  tokens, or how often one token id occurs), so the plumbing can be checked exactly.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["bert_cross_encoder", "probe_graph", "bundled_tokenizer", "model_folder", "quantize_int8"]

OPSET = 17
IR_VERSION = 8


def bundled_tokenizer() -> Path:
    """The BERT uncased WordPiece tokenizer shipped with memsift (the MiniLM cross-encoders' vocabulary)."""
    return Path(str(resources.files("memsift.engine.embeddings") / "data" / "tokenizer.json"))


def model_folder(folder: Path, build) -> Path:
    """`folder` with model.onnx (written by `build(path)`) and the bundled tokenizer.json."""
    folder.mkdir(parents=True, exist_ok=True)
    build(folder / "model.onnx")
    shutil.copyfile(bundled_tokenizer(), folder / "tokenizer.json")
    return folder


def _save(graph, path: Path) -> Path:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _inputs(token_types: bool):
    from onnx import TensorProto, helper

    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_types else [])
    return [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in names]


def probe_graph(path: Path, *, mode: str = "length", token_id: int = 0, token_types: bool = True,
                output: str = "b1") -> Path:
    """logit = real tokens in the pair (`length`: sum of attention_mask) or occurrences of
    `token_id` (`token`). `output`: "b1" ([batch, 1]), "b" ([batch]) or "b2" ([batch, 2], the
    logit as class 1 over a zero class 0)."""
    from onnx import TensorProto, helper

    nodes, inits = [], []
    if mode == "length":
        nodes.append(helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT))
    else:
        inits.append(helper.make_tensor("tok", TensorProto.INT64, [], [token_id]))
        nodes += [helper.make_node("Equal", ["input_ids", "tok"], ["eq"]),
                  helper.make_node("Cast", ["eq"], ["m"], to=TensorProto.FLOAT)]
    if token_types:  # read token_type_ids so the graph really needs the input (adds 0)
        nodes += [helper.make_node("Cast", ["token_type_ids"], ["tt"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["tt", "zero"], ["tt0"]),
                  helper.make_node("Add", ["m", "tt0"], ["m2"])]
        inits.append(helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]))
        summed = "m2"
    else:
        summed = "m"
    inits.append(helper.make_tensor("axis1", TensorProto.INT64, [1], [1]))
    nodes.append(helper.make_node("ReduceSum", [summed, "axis1"], ["s"], keepdims=1))  # [batch, 1]
    if output == "b1":
        nodes.append(helper.make_node("Identity", ["s"], ["logits"]))
        shape = ["batch", 1]
    elif output == "b":
        nodes.append(helper.make_node("Squeeze", ["s", "axis1"], ["logits"]))
        shape = ["batch"]
    else:
        nodes += [helper.make_node("Mul", ["s", "zero2"], ["z"]),
                  helper.make_node("Concat", ["z", "s"], ["logits"], axis=1)]
        inits.append(helper.make_tensor("zero2", TensorProto.FLOAT, [], [0.0]))
        shape = ["batch", 2]
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, shape)]
    return _save(helper.make_graph(nodes, "probe", _inputs(token_types), out, inits), path)


def bert_cross_encoder(path: Path, *, vocab: int = 30522, hidden: int = 16, layers: int = 2, heads: int = 2,
                       intermediate: int = 32, max_positions: int = 512, seed: int = 0) -> Path:
    """A BERT-style cross-encoder with random weights (float32); logits [batch, 1]."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = []
    nodes = []
    head_dim = hidden // heads

    def w(name: str, *shape: int, scale: float = 0.05) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name: str, values, dtype=np.int64) -> str:
        inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def node(op: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def layer_norm(x: str, name: str) -> str:
        g = const(f"{name}.g", np.ones(hidden), np.float32)
        b = const(f"{name}.b", np.zeros(hidden), np.float32)
        return node("LayerNormalization", [x, g, b], f"{name}.out", axis=-1, epsilon=1e-12)

    def dense(x: str, name: str, n_in: int, n_out: int) -> str:
        y = node("MatMul", [x, w(f"{name}.w", n_in, n_out)], f"{name}.mm")
        return node("Add", [y, const(f"{name}.bias", np.zeros(n_out), np.float32)], f"{name}.out")

    # Embeddings: word + position + token type, then LayerNorm.
    word = node("Gather", [w("emb.word", vocab, hidden), "input_ids"], "emb.w")
    shape = node("Shape", ["input_ids"], "ids.shape")
    seq = node("Gather", [shape, const("one_idx", 1)], "seq.len")
    positions = node("Range", [const("zero_i", 0), seq, const("one_i", 1)], "positions")
    pos = node("Gather", [w("emb.pos", max_positions, hidden), positions], "emb.p")
    typ = node("Gather", [w("emb.type", 2, hidden), "token_type_ids"], "emb.t")
    x = layer_norm(node("Add", [node("Add", [word, pos], "emb.wp"), typ], "emb.sum"), "emb.ln")

    # Attention mask → additive bias [batch, 1, 1, seq].
    maskf = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    mask4 = node("Unsqueeze", [maskf, const("axes12", [1, 2])], "mask.4")
    inv = node("Sub", [const("one_f", 1.0, np.float32), mask4], "mask.inv")
    bias = node("Mul", [inv, const("neg", -10000.0, np.float32)], "mask.bias")

    split = const("split.shape", [0, 0, heads, head_dim])
    merge = const("merge.shape", [0, 0, hidden])
    scale = const("att.scale", 1.0 / np.sqrt(head_dim), np.float32)
    for i in range(layers):
        p = f"l{i}"

        def heads_of(t: str, name: str) -> str:
            return node("Transpose", [node("Reshape", [t, split], f"{name}.r")], f"{name}.t", perm=[0, 2, 1, 3])

        q = heads_of(dense(x, f"{p}.q", hidden, hidden), f"{p}.qh")
        k = heads_of(dense(x, f"{p}.k", hidden, hidden), f"{p}.kh")
        v = heads_of(dense(x, f"{p}.v", hidden, hidden), f"{p}.vh")
        kt = node("Transpose", [k], f"{p}.kt", perm=[0, 1, 3, 2])
        scores = node("Add", [node("Mul", [node("MatMul", [q, kt], f"{p}.qk"), scale], f"{p}.qks"), bias], f"{p}.qkm")
        probs = node("Softmax", [scores], f"{p}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}.ctx")], f"{p}.ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge], f"{p}.ctxm")
        x = layer_norm(node("Add", [dense(ctx, f"{p}.o", hidden, hidden), x], f"{p}.res1"), f"{p}.ln1")
        h = dense(x, f"{p}.ff1", hidden, intermediate)
        # GELU (erf form), as BERT.
        erf = node("Erf", [node("Div", [h, const(f"{p}.sqrt2", np.sqrt(2.0), np.float32)], f"{p}.hs")], f"{p}.erf")
        gelu = node("Mul", [node("Mul", [h, const(f"{p}.half", 0.5, np.float32)], f"{p}.hh"),
                            node("Add", [erf, const(f"{p}.one", 1.0, np.float32)], f"{p}.erf1")], f"{p}.gelu")
        x = layer_norm(node("Add", [dense(gelu, f"{p}.ff2", intermediate, hidden), x], f"{p}.res2"), f"{p}.ln2")

    cls = node("Gather", [x, const("cls_idx", 0)], "cls", axis=1)  # [batch, hidden]
    pooled = node("Tanh", [dense(cls, "pool", hidden, hidden)], "pooled")
    logits = dense(pooled, "classifier", hidden, 1)
    nodes.append(helper.make_node("Identity", [logits], ["logits"]))
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]
    return _save(helper.make_graph(nodes, "cross_encoder", _inputs(True), out, inits), path)


def quantize_int8(src: Path, dst: Path) -> Path:
    """Dynamic int8 quantisation (weights int8, activations quantised at run time), as the int8
    exports of ms-marco-MiniLM are made."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    return dst
