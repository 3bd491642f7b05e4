"""Why the int8 graph is (or is not) faster on this CPU: onnxruntime's kernels measured one by one.

    python contrib/bench/int8_kernels.py [--rounds 6] [--variants pc_s8,pt_s8,pt_u8,pc_u8]
    python contrib/bench/int8_kernels.py --profile 256,160     # where memsift's graph spends its time

Prints, on one intra-op thread (what each of the side-by-side embedding workers runs):

1. one MatMul of the model's FFN shape (256 × 384 × 1536): fp32 `MatMul` against the integer
   `DynamicQuantizeMatMul` (activations quantised per run, as the shipped graph does) and a bare
   `MatMulInteger` (uint8 × int8), in ms and GOP/s;
2. the whole model on one 256-token window: the fp32 graph against int8 graphs quantised other
   ways (per-channel or per-tensor weights, signed or unsigned) on the graph as exported, and
   `memsift`, the graph memsift builds (per-channel int8 on the rewritten graph:
   engine/embeddings/graph_rewrites.py), each with the cosine of its mean-pooled output to fp32.

The CPU's kind (`status` shows it too) heads the output: VNNI multiplies int8 in one instruction,
AVX2 alone needs three, and that decides whether integer MatMuls pay.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _session(model, threads: int = 1, *, optimise: bool = True):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if not optimise:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])


def _timed(run, rounds: int) -> float:
    run()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def kernels(rounds: int) -> None:
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = 256, 384, 1536
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    wq = np.clip(np.round(w / 0.002), -127, 127).astype(np.int8)
    x_f = helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])
    x_u = helper.make_tensor_value_info("x", TensorProto.UINT8, [m, k])
    y_f = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
    y_i = helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]

    def model(node, x, y, inits):
        return helper.make_model(helper.make_graph([node], "g", [x], [y], inits), opset_imports=opsets)

    cases = [
        (
            "fp32 MatMul",
            model(helper.make_node("MatMul", ["x", "W"], ["y"]), x_f, y_f, [numpy_helper.from_array(w, "W")]),
            rng.standard_normal((m, k)).astype(np.float32),
        ),
        (
            "int8 DynamicQuantizeMatMul",
            model(
                helper.make_node("DynamicQuantizeMatMul", ["x", "W", "s", "z"], ["y"], domain="com.microsoft"),
                x_f,
                y_f,
                [
                    numpy_helper.from_array(wq, "W"),
                    numpy_helper.from_array(np.array(0.002, np.float32), "s"),
                    numpy_helper.from_array(np.array(0, np.int8), "z"),
                ],
            ),
            rng.standard_normal((m, k)).astype(np.float32),
        ),
        (
            "uint8 × int8 MatMulInteger",
            model(helper.make_node("MatMulInteger", ["x", "W"], ["y"]), x_u, y_i, [numpy_helper.from_array(wq, "W")]),
            rng.integers(0, 255, (m, k)).astype(np.uint8),
        ),
    ]
    print(f"one MatMul {m} × {k} × {n}, one thread, median of {rounds * 20}:")
    base = None
    for name, graph, x in cases:
        s = _session(graph)
        seconds = _timed(lambda s=s, x=x: s.run(None, {"x": x}), rounds * 20)
        base = base or seconds
        print(
            f"  {name:28s} {seconds * 1e3:7.2f} ms  {2 * m * k * n / seconds / 1e9:6.1f} GOP/s  "
            f"({base / seconds:.2f}× fp32)"
        )


VARIANTS = {
    "pc_s8": {"per_channel": True, "weight_type": "QInt8"},  # memsift's quantisation, on the graph as exported
    "pt_s8": {"per_channel": False, "weight_type": "QInt8"},
    "pt_u8": {"per_channel": False, "weight_type": "QUInt8"},
    "pc_u8": {"per_channel": True, "weight_type": "QUInt8"},
}


def whole_model(rounds: int, names: list[str]) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from memsift.engine.embeddings.int8_graph import (
        _build,
        _fold_dequantised_weights,
        _quantiser_advice_silenced,
        _save_optimised,
    )
    from memsift.engine.embeddings.local import _bundled_model

    work = Path(tempfile.mkdtemp(prefix="int8-kernels-"))
    fp32 = work / "fp32.onnx"
    onnx.save(_fold_dequantised_weights(onnx.load(str(_bundled_model()))), str(fp32))
    graphs = {"fp32": (str(fp32), True)}
    for name in names:
        kw = dict(VARIANTS[name])
        kw["weight_type"] = getattr(QuantType, kw["weight_type"])
        raw, opt = work / f"{name}.raw.onnx", work / f"{name}.onnx"
        with _quantiser_advice_silenced():
            quantize_dynamic(str(fp32), str(raw), **kw)
        _save_optimised(raw, opt, unfused=[])
        graphs[name] = (str(opt), False)
    _build(_bundled_model(), work / "memsift.onnx")  # what memsift builds: pc_s8 on the rewritten graph
    graphs["memsift"] = (str(work / "memsift.onnx"), False)
    length = 256
    ids = np.random.default_rng(0).integers(1000, 20000, (1, length)).astype(np.int64)
    sessions = {name: _session(path, optimise=optimise) for name, (path, optimise) in graphs.items()}

    def feeds(s):
        return {i.name: (np.ones_like(ids) if "mask" in i.name else np.zeros_like(ids) if "type" in i.name else ids)
                for i in s.get_inputs()}

    pooled = {name: s.run(None, feeds(s))[0][0].mean(0) for name, s in sessions.items()}
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(rounds):  # interleaved: every graph sees the same load
        for name, s in sessions.items():
            f = feeds(s)
            t = time.perf_counter()
            s.run(None, f)
            times[name].append(time.perf_counter() - t)
    print(f"the whole model on one {length}-token window, one thread, median of {rounds} interleaved:")
    ref = pooled["fp32"]
    fp32_s = statistics.median(times["fp32"])
    for name in sessions:
        v = pooled[name]
        cos = float(v @ ref / np.linalg.norm(v) / np.linalg.norm(ref))
        seconds = statistics.median(times[name])
        print(f"  {name:7s} {seconds * 1e3:7.1f} ms  ({fp32_s / seconds:.2f}× fp32)  cosine to fp32 {cos:.4f}")


def profile(lengths: list[int], rounds: int) -> None:
    """Where memsift's int8 graph spends one window's time, by operator, as onnxruntime's profiler
    sums its kernels (one thread, the graph loaded as memsift loads it: stored optimised)."""
    import json
    from collections import Counter

    import onnxruntime as ort

    from memsift.engine.embeddings.int8_graph import _build
    from memsift.engine.embeddings.local import _bundled_model

    work = Path(tempfile.mkdtemp(prefix="int8-profile-"))
    _build(_bundled_model(), work / "memsift.onnx")
    for length in lengths:
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = 1, 1, 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.enable_profiling, so.profile_file_prefix = True, str(work / f"profile-{length}")
        s = ort.InferenceSession(str(work / "memsift.onnx"), so, providers=["CPUExecutionProvider"])
        ids = np.random.default_rng(0).integers(1000, 20000, (1, length)).astype(np.int64)
        f = {i.name: (np.ones_like(ids) if "mask" in i.name else np.zeros_like(ids) if "type" in i.name else ids)
             for i in s.get_inputs()}
        for _ in range(rounds * 4):
            s.run(None, f)
        events = json.loads(Path(s.end_profiling()).read_text())
        by_op: Counter[str] = Counter()
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                by_op[e["args"]["op_name"]] += e["dur"]
        total = sum(by_op.values())
        per_run = total / rounds / 4 / 1e3
        print(f"memsift's int8 graph, one {length}-token window, one thread: {per_run:.1f} ms of kernels")
        for op, us in by_op.most_common(6):
            print(f"  {op:24s} {us / total:6.1%}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--profile", help="only where memsift's graph spends its time, at these lengths (256,160)")
    args = ap.parse_args(argv)
    from memsift.engine.embeddings.cpu import cpu_kind

    import onnxruntime

    print(f"CPU: {cpu_kind()} · onnxruntime {onnxruntime.__version__}")
    if args.profile:
        profile([int(n) for n in args.profile.split(",")], args.rounds)
        return 0
    kernels(args.rounds)
    whole_model(args.rounds, [v for v in args.variants.split(",") if v])
    return 0


if __name__ == "__main__":
    sys.exit(main())
