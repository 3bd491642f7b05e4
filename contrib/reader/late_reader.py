"""What late interaction costs a search that makes the hits' token vectors when it ranks: the
bundled int8 graph memsift embeds with, cut after its first `--layers` layers (a projection, when
given, as the graph's last MatMul), each text one run, side by side on one thread per core, then
MaxSim as late_interaction.py scores it (the question's pieces weighed by their idf over its own
hits: what a search knows). Prints p50 / p95 per question over the pools' top `--candidates`; with
`--out`, writes the vectors memsift's own graph made, for late_interaction.py to score the pools.

    python contrib/reader/late_reader.py --pools pools/ --sets locomo --layers 2 --projection W.npy
    python contrib/reader/late_reader.py --pools pools/ --sets locomo --layers 2 --out states-P2/

Why: at 6 layers this costs ~150 ms for 20 hits on two cores, past issue 62's 60 ms; the first
layers cost less (docs/performance.md, round 4, "A reader on two CPU cores").
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from late_interaction import hits_weights, maxsim, piece_tokenizer, unit  # noqa: E402
from leak import unleak  # noqa: E402

PIECES = 128  # a text's first word pieces, [CLS] and [SEP] included, as token_states.py cut them


def cut_after_layer(graph_file: Path, layers: int, projection: np.ndarray | None = None) -> bytes:
    """The BERT graph up to the output of its `layers`-th layer: a post-norm layer ends in its
    second LayerNormalization, after the embeddings' own (node 0), so layer k ends at the 2k-th.
    With `projection`, its MatMul is the graph's last node (onnxruntime's GEMM in the worker's one
    thread: numpy's, called from two workers at once, fought for the cores and cost 5 ms a text)."""
    import onnx  # noqa: PLC0415
    from onnx import helper, numpy_helper  # noqa: PLC0415
    from onnx.utils import Extractor  # noqa: PLC0415

    model = onnx.load(str(graph_file))
    norms = [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    if len(norms) < 2 * layers + 1:
        raise ValueError(f"{graph_file} has {len(norms)} LayerNormalization nodes: not a BERT graph of {layers} layers")
    cut = Extractor(model).extract_model([i.name for i in model.graph.input], [norms[2 * layers].output[0]])
    if projection is not None:
        hidden = cut.graph.output[0]
        cut.graph.initializer.append(numpy_helper.from_array(projection.astype(np.float32), "late_projection"))
        cut.graph.node.append(helper.make_node("MatMul", [hidden.name, "late_projection"], ["projected"]))
        cut.graph.ClearField("output")
        cut.graph.output.append(helper.make_tensor_value_info("projected", onnx.TensorProto.FLOAT, None))
    return cut.SerializeToString()


class LayerReader:
    """MaxSim over the first `layers` layers' token vectors of memsift's own graph."""

    def __init__(self, layers: int, projection: np.ndarray | None = None, threads: int | None = None) -> None:
        import onnxruntime as ort  # noqa: PLC0415
        from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

        embedder = LocalMiniLMProvider()
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.intra_op_num_threads = 1  # one text a run, one run per core, as the embedder's workers
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if embedder.quantised:  # stored optimised, as the embedder loads it
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        graph = cut_after_layer(embedder.graph_file, layers, projection)
        self.session = ort.InferenceSession(graph, sess_options=opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tok = piece_tokenizer()
        self.runners = ThreadPoolExecutor(threads or min(4, os.cpu_count() or 1))

    def encode(self, text: str) -> tuple[list[int], list[str]]:
        """Ids and word pieces, cut to PIECES with [SEP] kept."""
        enc = self.tok.encode(text)
        ids, words = enc.ids, enc.tokens
        if len(ids) > PIECES:
            ids, words = [*ids[: PIECES - 1], ids[-1]], [*words[: PIECES - 1], words[-1]]
        return ids, words

    def vectors(self, ids: list[int]) -> np.ndarray:
        """Unit vectors of the pieces between [CLS] and [SEP]."""
        x = np.asarray([ids], dtype=np.int64)
        feeds: dict[str, Any] = {"input_ids": x, "attention_mask": np.ones_like(x), "token_type_ids": np.zeros_like(x)}
        return unit(self.session.run(None, {k: v for k, v in feeds.items() if k in self.inputs})[0][0][1:-1])

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        (q_ids, q_words), docs = self.encode(query), [self.encode(d) for d in documents]
        vectors = list(self.runners.map(self.vectors, [q_ids] + [ids for ids, _ in docs]))
        weights = hits_weights(q_words[1:-1], list(documents), self.tok)
        return [maxsim(vectors[0], d, weights) for d in vectors[1:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", type=Path, required=True)
    ap.add_argument("--sets", default="locomo")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--projection", type=Path)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--questions", type=int, default=100, help="questions timed per set")
    ap.add_argument("--out", type=Path, help="write every pool text's vectors here (late_interaction.py --states)")
    args = ap.parse_args()
    reader = LayerReader(args.layers, np.load(args.projection) if args.projection else None)
    reader.score("warm up", ["a first text", "a second one"])
    for name in args.sets.split(","):
        rows = pickle.loads((args.pools / f"{name}.pkl").read_bytes())
        took = []
        for row in rows[: args.questions]:
            texts = [unleak(h["snippet"]) for h in row["hits"][: args.candidates]]
            started = time.perf_counter()
            reader.score(row["query"], texts)
            took.append((time.perf_counter() - started) * 1000)
        took.sort()
        print(f"{name}: {args.layers} layers, {args.candidates} hits: p50 {took[len(took) // 2]:.0f} ms, "
              f"p95 {took[int(len(took) * 0.95)]:.0f} ms over {len(took)} questions", flush=True)
        if args.out:
            texts = list(dict.fromkeys([r["query"] for r in rows] +
                                       [unleak(h["snippet"]) for r in rows for h in r["hits"][: args.candidates]]))
            states = reader.runners.map(lambda t: reader.vectors(reader.encode(t)[0]).astype(np.float16), texts)
            args.out.mkdir(parents=True, exist_ok=True)
            with (args.out / f"{name}.pkl").open("wb") as fh:
                pickle.dump(dict(zip(texts, states)), fh)


if __name__ == "__main__":
    main()
