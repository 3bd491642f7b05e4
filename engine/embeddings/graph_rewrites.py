"""Rewrites of the exported fp32 graph before it is quantised: the same maths in fewer, faster kernels.

The shipped all-MiniLM-L6-v2 was exported by PyTorch's dynamo exporter, whose attention is a
dozen small ops per layer, and onnxruntime's own fusions miss it. Measured one window at a time on
one thread (onnxruntime 1.32, AVX-512 VNNI; onnxruntime's profiler), the int8 graph spent:

- ~12% in a NaN guard after each softmax (`Where(IsNaN(p), 0, p)`): it only acts on a row whose
  keys are all masked, and memsift never runs a window without its [CLS] and [SEP];
- ~15% in `SkipLayerNormalization`, the fusion onnxruntime makes of residual + layer norm: its CPU
  kernel is scalar, 5.5× slower than `Add` + `LayerNormalization` on the same 256 × 384 input;
- the transposes, reshapes and scaling around each attention, which `MultiHeadAttention` does in
  one kernel, and GELU spelled out in five ops (one `Gelu` kernel).

Each rewrite matches its pattern exactly or leaves the graph alone, and the rewritten graph must
give the original's output within float rounding on fixed inputs, or none is used (`rewrite`).
The quantiser then sees plain MatMuls as before; the int8 vectors keep their quality (cosine to
the fp32 ones as before), but they differ from the previous recipe's by quantisation noise, so
the recipe's name, and with it the index's fingerprint, changes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

__all__ = ["rewrite", "UNFUSED"]

# onnxruntime fusions the stored graph must not get when it is optimised (see the module's doc).
UNFUSED = ["SkipLayerNormFusion"]

MS_DOMAIN = "com.microsoft"


class _NoMatch(Exception):
    """The graph does not have the pattern a rewrite expects: the rewrite is skipped."""


class _Graph:
    """Producers, consumers and constant values of a graph's tensors, for pattern matching."""

    def __init__(self, model: Any) -> None:
        from onnx import numpy_helper  # noqa: PLC0415

        self.graph = model.graph
        self.producer = {out: n for n in self.graph.node for out in n.output}
        self.consumers: dict[str, list[Any]] = defaultdict(list)
        for n in self.graph.node:
            for name in n.input:
                self.consumers[name].append(n)
        self.constants = {i.name: numpy_helper.to_array(i) for i in self.graph.initializer}

    def made_by(self, tensor: str, op: str) -> Any:
        node = self.producer.get(tensor)
        if node is None or node.op_type != op:
            raise _NoMatch(f"{tensor} is not made by {op}")
        return node

    def only_user(self, tensor: str, op: str) -> Any:
        users = self.consumers.get(tensor, [])
        if len(users) != 1 or users[0].op_type != op:
            raise _NoMatch(f"{tensor} is not used by one {op}")
        return users[0]

    def scalar(self, node: Any, expected: float | None = None) -> float:
        """The one constant input of a binary op (a one-element initializer)."""
        values = [self.constants[i] for i in node.input if i in self.constants and self.constants[i].size == 1]
        if len(values) != 1:
            raise _NoMatch(f"{node.name} has no single constant")
        value = float(values[0].reshape(()))
        if expected is not None and abs(value - expected) > 1e-5 * max(1.0, abs(expected)):
            raise _NoMatch(f"{node.name}'s constant is {value}, not {expected}")
        return value

    def other_input(self, node: Any, known: str) -> str:
        (other,) = [i for i in node.input if i != known]
        return other


def _drop_nan_guards(g: _Graph) -> int:
    """`Where(IsNaN(softmax), 0, softmax)` → softmax."""
    renamed: dict[str, str] = {}
    for isnan in [n for n in g.graph.node if n.op_type == "IsNaN"]:
        g.made_by(isnan.input[0], "Softmax")
        where = g.only_user(isnan.output[0], "Where")
        if where.input[0] != isnan.output[0] or where.input[2] != isnan.input[0]:
            raise _NoMatch("the guard is not Where(IsNaN(p), _, p)")
        renamed[where.output[0]] = isnan.input[0]
    for n in g.graph.node:
        for k, name in enumerate(n.input):
            if name in renamed:
                n.input[k] = renamed[name]  # the guards are left unused, and _tidy drops them
    return len(renamed)


def _upstream(g: _Graph, tensor: str, *ops: str) -> str:
    """The tensor a chain of single-input ops (`ops`, nearest first) starts from."""
    for op in ops:
        tensor = g.made_by(tensor, op).input[0]
    return tensor


def _fuse_attention(g: _Graph) -> int:
    """softmax(Q·Kᵀ·scale + mask)·V with its reshapes and transposes → one `MultiHeadAttention`."""
    from onnx import TensorProto, helper  # noqa: PLC0415

    fused: list[Any] = []
    for softmax in [n for n in g.graph.node if n.op_type == "Softmax"]:
        weigh = g.only_user(softmax.output[0], "MatMul")
        merge = g.only_user(g.only_user(weigh.output[0], "Transpose").output[0], "Reshape")
        masked = g.made_by(softmax.input[0], "Add")  # + the key padding mask (an added bias or a causal
        # mask would change the function on unpadded windows: `rewrite`'s check refuses it)
        scores = g.made_by(masked.input[0], "MatMul")
        q_scale, k_scale = g.made_by(scores.input[0], "Mul"), g.made_by(scores.input[1], "Mul")
        q = _upstream(g, q_scale.input[0], "Transpose", "Reshape")
        k = _upstream(g, k_scale.input[0], "Reshape", "Transpose", "Reshape", "Transpose", "Reshape")
        v = _upstream(g, weigh.input[1], "Transpose", "Reshape")
        projected = g.made_by(v, "Add")  # the value projection plus its bias, the model's width
        width = next((g.constants[i].size for i in projected.input if i in g.constants), 0)
        head_size = _head_size(g, q_scale)
        if not width or width % head_size:
            raise _NoMatch("cannot tell the number of heads")
        scale = g.scalar(q_scale) * g.scalar(k_scale)
        fused.append(helper.make_node(
            "MultiHeadAttention", [q, k, v, "", "memsift_key_mask"], [merge.output[0]],
            domain=MS_DOMAIN, num_heads=width // head_size, scale=scale, name=f"memsift_attention_{len(fused)}",
        ))
        merge.output[0] += "_replaced"
    if not fused:
        return 0
    mask = next((i.name for i in g.graph.input if i.name == "attention_mask"), None)
    if mask is None:
        raise _NoMatch("no attention_mask input")
    g.graph.node.extend([helper.make_node("Cast", [mask], ["memsift_key_mask"], to=TensorProto.INT32), *fused])
    return len(fused)


def _head_size(g: _Graph, q_scale: Any) -> int:
    """The last dimension of the reshape that splits Q into heads (a constant of its shape)."""
    reshape = g.made_by(g.made_by(q_scale.input[0], "Transpose").input[0], "Reshape")
    shape = g.made_by(reshape.input[1], "Concat")
    last = shape.input[-1]
    if last not in g.constants or g.constants[last].size != 1:
        raise _NoMatch("the head size is not a constant")
    return int(g.constants[last].reshape(()))


def _fuse_gelu(g: _Graph) -> int:
    """x · 0.5 · (1 + erf(x / √2)) in five ops → one `Gelu`."""
    from onnx import helper  # noqa: PLC0415

    fused: list[Any] = []
    for erf in [n for n in g.graph.node if n.op_type == "Erf"]:
        div = g.made_by(erf.input[0], "Div")
        g.scalar(div, 2**0.5)
        x = div.input[0]
        plus_one = g.only_user(erf.output[0], "Add")
        g.scalar(plus_one, 1.0)
        half = g.only_user(plus_one.output[0], "Mul")
        g.scalar(half, 0.5)
        times_x = g.only_user(half.output[0], "Mul")
        if g.other_input(times_x, half.output[0]) != x:
            raise _NoMatch("GELU's last product is not with its input")
        name = f"memsift_gelu_{len(fused)}"
        fused.append(helper.make_node("Gelu", [x], [times_x.output[0]], domain=MS_DOMAIN, name=name))
        times_x.output[0] += "_replaced"
    g.graph.node.extend(fused)
    return len(fused)


def _tidy(model: Any) -> None:
    """Drop nodes nothing uses any more, put the rest in dependency order, declare the ms domain."""
    from onnx import helper  # noqa: PLC0415

    graph = model.graph
    outputs = {o.name for o in graph.output}
    while True:
        used = {name for n in graph.node for name in n.input} | outputs
        kept = [n for n in graph.node if any(o in used for o in n.output)]
        if len(kept) == len(graph.node):
            break
        del graph.node[:]
        graph.node.extend(kept)
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    ordered, waiting = [], list(graph.node)
    while waiting:
        runnable = [n for n in waiting if all(name in ready for name in n.input)]
        if not runnable:
            raise _NoMatch("the rewritten graph has a cycle")
        for n in runnable:
            ready.update(n.output)
        ordered += runnable
        waiting = [n for n in waiting if all(name not in ready for name in n.output)]
    del graph.node[:]
    graph.node.extend(ordered)
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))


REWRITES = (("nan guards", _drop_nan_guards), ("attention", _fuse_attention), ("gelu", _fuse_gelu))


def rewrite(model: Any) -> tuple[Any, dict[str, int]]:
    """The model with every rewrite whose pattern it has, and how many places each changed; the
    model as it was (and nothing done) when the result is not the same function."""
    done: dict[str, int] = {}
    rewritten = type(model)()
    rewritten.CopyFrom(model)
    for name, apply in REWRITES:
        candidate = type(model)()
        candidate.CopyFrom(rewritten)
        try:
            count = apply(_Graph(candidate))
            if count:
                _tidy(candidate)
        except (_NoMatch, KeyError, ValueError, IndexError):
            continue  # a rewrite that does not match changes nothing
        if count:
            rewritten, done[name] = candidate, count
    if not done or not _same_function(model, rewritten):
        return model, {}
    return rewritten, done


def _same_function(before: Any, after: Any) -> bool:
    """Both graphs give the same last hidden state, within float rounding, on two fixed windows (a
    rewritten graph this onnxruntime cannot run is not the same function)."""
    import numpy as np  # noqa: PLC0415

    expected = _outputs(before)
    try:
        got = _outputs(after)
    except Exception:  # onnxruntime raises its own untyped errors
        return False
    return all(a.shape == b.shape and np.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in zip(expected, got))


_PROBES = ([101, 7592, 2088, 1012, 102], [101, *range(2000, 2250), 102])


def _outputs(model: Any) -> list[Any]:
    """The model's last hidden state for each probe window, from one session."""
    import numpy as np  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    out = []
    for ids in _PROBES:
        tokens = np.array([ids], dtype=np.int64)
        feeds = {"input_ids": tokens, "attention_mask": np.ones_like(tokens), "token_type_ids": np.zeros_like(tokens)}
        out.append(session.run(None, {k: v for k, v in feeds.items() if k in names})[0])
    return out
