"""A real int8 copy of the shipped model, built once into a cache folder and verified at every load.

The shipped ONNX file stores int8 weights but dequantises them inside the graph (Cast → Mul by a
scale), so every MatMul runs in fp32. Folding those back to fp32 weights, rewriting the exporter's
attention, GELU and NaN guards into onnxruntime's fused kernels (graph_rewrites.py) and running
onnxruntime's dynamic quantisation (per-channel int8 weights, uint8 activations) gives integer
MatMuls: about 3× the characters/s of the fp32 graph on 2 cores with VNNI, cosine ≥ 0.98 to its vectors.

The same graph must give the same vectors on every CPU (a fleet shares one index; an index is
copied), and onnxruntime's integer kernels differ: with VNNI one instruction sums four uint8 × int8
products into 32 bits, while AVX2 (and AVX-512 without VNNI) first adds each pair of products into
16 bits with saturation (`vpmaddubsw`). 255 × 127 twice does not fit, so AVX2 machines computed
other numbers (cosine 0.986–0.990 to a VNNI machine's vectors of the same text, and further from
the fp32 model's). So each weight column gets a scale at which no two weights the kernels pair
(rows 2i and 2i + 1) sum past 128 in magnitude: every product pair then fits in 16 bits, and every
CPU computes the same integers (docs/performance.md, "The same vectors on every CPU").
The build needs the `onnx` package, a default dependency; where it is missing (an install that
left it out) the fp32 graph is used and nothing else changes.

Cache layout: `<source sha256[:16]>-<RECIPE>.onnx` plus a `.sha256` file holding its checksum. A
graph whose checksum does not match (damaged, truncated, edited) is rebuilt; files are written
to a temporary name and renamed, under a lock, so readers never see half a graph.

The build runs in a child process (`python -m memsift.engine.embeddings.int8_graph`): onnx's shape
inference holds the interpreter lock for a second at a time, which kept a signalled `memsift mcp`
from exiting (no thread of it could run), and the server never loads onnx itself. The caller waits
on the child with the lock released; a signal ends the child with the process.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..logging import get_logger
from .digests import sha256_of
from .graph_rewrites import UNFUSED, rewrite

__all__ = ["RECIPE", "default_model_cache_dir", "fallback_cache_dir", "int8_build_available", "int8_graph"]

RECIPE = "int8dyn-perchannel-ortext-v3-fused-pairsafe"  # part of the file name and of the provider's fingerprint

log = get_logger("memsift.embeddings")


def default_model_cache_dir(env: Mapping[str, str]) -> Path:
    """`$XDG_CACHE_HOME/memsift/models` (`~/.cache/memsift/models`): derived files, safe to delete.
    Where no home folder is known, the private runtime folder's (`fallback_cache_dir`)."""
    from ..private_dirs import user_cache_path  # noqa: PLC0415

    base = user_cache_path(env)
    if base is None:
        spare = fallback_cache_dir(env, create=True)
        return spare if spare is not None else Path(os.devnull) / "models"  # nowhere: the fp32 graph runs
    return Path(base) / "memsift" / "models"


def int8_build_available() -> bool:
    """Whether this install can build the int8 graph (the `onnx` package, a default dependency)."""
    return importlib.util.find_spec("onnx") is not None


def _sha256(path: Path) -> str:
    """The graph's checksum, remembered in its folder's digest book (digests.py)."""
    return sha256_of(path, path.parent)


def _verified(model: Path, checksum: Path) -> bool:
    """The graph matches the checksum written when it was built (its digest remembered while the
    file is unchanged: digests.py)."""
    try:
        return checksum.read_text().strip() == _sha256(model)
    except OSError:
        return False


def fallback_cache_dir(env: Mapping[str, str], *, create: bool = False) -> Path | None:
    """`<private runtime folder>/models` (`$XDG_RUNTIME_DIR/memsift` or `/tmp/memsift-<uid>`, ours
    alone): where the int8 graph goes when the model cache cannot be written (a read-only home in a
    container, a sandboxed service). Without it such a process ran the fp32 graph, whose vectors
    carry another fingerprint: an index built elsewhere with int8 ones fell to keywords only."""
    from ..private_dirs import private_runtime_path  # noqa: PLC0415

    folder = private_runtime_path(env, create=create)
    return Path(folder) / "models" if folder else None


def int8_graph(source: Path, source_sha256: str, cache_dir: Path) -> Path | None:
    """The verified int8 graph for `source`, built now if missing or damaged: in `cache_dir`, else
    in `fallback_cache_dir`; None when it cannot be built (no `onnx`, no writable folder), in which
    case the caller keeps the fp32 graph."""
    stem = f"{source_sha256[:16]}-{RECIPE}"
    spare = fallback_cache_dir(os.environ)
    for folder in (cache_dir, spare):
        if folder is not None and _verified(folder / f"{stem}.onnx", folder / f"{stem}.sha256"):
            return folder / f"{stem}.onnx"
    if not int8_build_available():
        return None
    try:
        return _built(source, cache_dir, stem)
    except Exception as exc:  # a cache that cannot be built must not stop embeddings
        failure = f"{cache_dir}: {exc}"
    spare = fallback_cache_dir(os.environ, create=True)
    if spare is not None and spare != cache_dir:
        try:
            model = _built(source, spare, stem)
            log.info("the model cache cannot be written; the int8 graph is kept in the private runtime folder",
                     cache=str(cache_dir), folder=str(spare))
            return model
        except Exception as exc:  # the same: the fp32 graph then
            failure += f"; {spare}: {exc}"
    log.warning("cannot build the int8 model graph; using the fp32 graph", error=failure)
    return None


def _built(source: Path, cache_dir: Path, stem: str) -> Path:
    """The graph in `cache_dir`, built there under a lock unless another process just did."""
    from ..private_dirs import make_private_dir  # noqa: PLC0415

    model, checksum = cache_dir / f"{stem}.onnx", cache_dir / f"{stem}.sha256"
    make_private_dir(cache_dir)
    with open(cache_dir / f"{stem}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others then find it built
        if _verified(model, checksum):
            return model
        if model.exists():
            log.warning("int8 model graph failed its checksum; rebuilding", path=str(model))
        _remove_stale_builds(cache_dir)
        _build_in_child(source, model, checksum)  # its checksum remembered there: no process hashes it again
    return model


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


BUILD_TIMEOUT_S = 600.0  # a build takes ~3 s on two idle cores; far past that it is stuck


def _build_in_child(source: Path, target: Path, checksum: Path) -> None:
    """`_build` and the checksum, in a child process; RuntimeError (with its last words) when it fails."""
    done = subprocess.run([sys.executable, "-m", __name__, str(source), str(target), str(checksum)],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=BUILD_TIMEOUT_S, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(
            f"the build exited with status {done.returncode}: {said[-1][:300] if said else 'no message'}"
        )


def _remove_stale_builds(cache_dir: Path) -> None:
    """Temporary folders of builds that were killed midway (~90 MB each), an hour old or more."""
    for folder in cache_dir.glob("tmp*"):
        try:
            if folder.is_dir() and not folder.is_symlink() and time.time() - folder.stat().st_mtime > 3600:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass


def _build(source: Path, target: Path, *, fused: bool = True) -> None:
    """`fused=False` builds the previous recipe (v1: no rewrites, onnxruntime's own fusions), for
    benchmarks that compare the two."""
    import onnx  # noqa: PLC0415  (a default dependency; imported only to build)
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    folded = _fold_dequantised_weights(onnx.load(str(source)))
    if fused:
        folded, _done = rewrite(folded)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(folded, str(fp32))
        with _quantiser_advice_silenced():
            quantize_dynamic(str(fp32), str(int8), per_channel=True, weight_type=QuantType.QInt8)
        quantised = onnx.load(str(int8))
        _keep_pairs_from_saturating(quantised, {i.name: i for i in folded.graph.initializer})
        onnx.save(quantised, str(int8))
        optimised = Path(tmp) / "int8-optimised.onnx"
        _save_optimised(int8, optimised, unfused=UNFUSED if fused else [])
        with open(optimised, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(optimised, target)


PAIR_LIMIT = 128  # |w[2i] + w[2i+1]| ≤ 128 keeps 255 × (their sum) within int16 (32,767)


def _keep_pairs_from_saturating(model, fp32_weights: dict) -> None:
    """Re-quantise every integer MatMul's weights (K × N, int8, per column) from their fp32 values at
    a scale where no pair of rows the kernels add in 16 bits (2i, 2i + 1) sums past PAIR_LIMIT; the
    few pairs rounding still pushes over are shrunk to it. Costs most columns a little resolution
    (their largest pair sum, not their largest weight, sets the scale). Raises when the quantiser's
    output is not laid out as expected (the build fails and the fp32 graph is used)."""
    import numpy as np  # noqa: PLC0415
    from onnx import numpy_helper  # noqa: PLC0415

    inits = {i.name: i for i in model.graph.initializer}
    seen = 0
    for node in model.graph.node:
        if node.op_type != "MatMulInteger" or node.input[1] not in inits:
            continue
        base = node.input[1].removesuffix("_quantized")
        scale_name, zero_name = f"{base}_scale", node.input[3] if len(node.input) > 3 else ""
        if base not in fp32_weights or scale_name not in inits or zero_name not in inits:
            raise RuntimeError(f"the quantiser's weight {node.input[1]} is not laid out as expected")
        w = numpy_helper.to_array(fp32_weights[base]).astype(np.float64)
        zero = numpy_helper.to_array(inits[zero_name])
        if w.ndim != 2 or zero.any() or numpy_helper.to_array(inits[scale_name]).shape != (w.shape[1],):
            raise RuntimeError(f"{base}: expected symmetric per-column int8 weights")
        even = w.shape[0] - w.shape[0] % 2
        pair = np.abs(w[0:even:2] + w[1:even:2]).max(0) if even else np.zeros(w.shape[1])
        scale = np.maximum(np.abs(w).max(0) / 127, pair / (PAIR_LIMIT - 1))
        scale[scale == 0] = 1.0
        q = np.clip(np.round(w / scale), -127, 127)
        sums = q[0:even:2] + q[1:even:2]
        over = np.abs(sums) > PAIR_LIMIT
        if over.any():  # rounding up both of a pair: trim the pair to the limit
            shrink = np.where(over, PAIR_LIMIT / np.maximum(np.abs(sums), 1), 1.0)
            q[0:even:2], q[1:even:2] = np.trunc(q[0:even:2] * shrink), np.trunc(q[1:even:2] * shrink)
        inits[node.input[1]].CopyFrom(numpy_helper.from_array(q.astype(np.int8), node.input[1]))
        inits[scale_name].CopyFrom(numpy_helper.from_array(scale.astype(np.float32), scale_name))
        seen += 1
    if not seen:
        raise RuntimeError("the quantiser made no integer MatMul")


_ADVICE = "pre-processing before quantization"


@contextmanager
def _quantiser_advice_silenced() -> Iterator[None]:
    """onnxruntime's quantiser gives advice through the root logger ("Please consider to run
    pre-processing before quantization…"): it printed on a user's terminal on the first search, and
    `logging.warning`'s implicit basicConfig left a handler on the root logger. Neither stays. Its
    INFO lines (one per tensor) are dropped too: under `memsift mcp` the MCP SDK sets the root
    logger to INFO, and a first search there printed some 200 of them."""
    root = logging.getLogger()
    handlers = list(root.handlers)

    def not_advice(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING and _ADVICE not in record.getMessage()

    root.addFilter(not_advice)
    try:
        yield
    finally:
        root.removeFilter(not_advice)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)


def _save_optimised(source: Path, target: Path, *, unfused: list[str]) -> None:
    """Store the graph as onnxruntime optimises it (fused integer MatMuls), so a session loads it
    with optimisation off (median 87 ms against 417 ms for the fp32 graph on a loaded 2-core
    machine), and every session (a CLI call's, a server's) runs the very same kernels. EXTENDED,
    not ALL: no CPU-specific layouts; `unfused`: fusions whose kernels are slower (graph_rewrites)."""
    import onnxruntime as ort  # noqa: PLC0415

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(target)
    ort.InferenceSession(
        str(source), sess_options=opts, providers=["CPUExecutionProvider"], disabled_optimizers=unfused
    )


def _fold_dequantised_weights(model):
    """Replace each `Mul(Cast(int8 initializer), scale initializer)` by its fp32 result, so the
    quantiser sees plain fp32 weights on the MatMuls (it leaves computed weights alone)."""
    import numpy as np  # noqa: PLC0415
    from onnx import numpy_helper  # noqa: PLC0415

    graph = model.graph
    all_nodes = list(graph.node)  # positions, not id(): protobuf hands out fresh wrappers
    inits = {i.name: i for i in graph.initializer}
    casts = {n.output[0]: k for k, n in enumerate(all_nodes) if n.op_type == "Cast" and n.input[0] in inits}
    dropped: set[int] = set()
    weights = []
    for k, n in enumerate(all_nodes):
        if n.op_type == "Mul" and n.input[0] in casts and n.input[1] in inits:
            cast = casts[n.input[0]]
            q = numpy_helper.to_array(inits[all_nodes[cast].input[0]]).astype(np.float32)
            scale = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
            weights.append(numpy_helper.from_array((q * scale).astype(np.float32), n.output[0]))
            dropped.update((k, cast))
    nodes = [n for k, n in enumerate(all_nodes) if k not in dropped]
    used = {name for n in nodes for name in n.input} | {o.name for o in graph.output}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + weights)
    return model


if __name__ == "__main__":  # the child of `_build_in_child`: SOURCE TARGET CHECKSUM
    _source, _target, _checksum = (Path(a) for a in sys.argv[1:4])
    _build(_source, _target)
    _write_atomic(_checksum, (_sha256(_target) + "\n").encode())
