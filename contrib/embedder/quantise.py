"""Quantise an exported embedder the way memsift quantises its bundled model, so it is compared like for like.

memsift runs the bundled all-MiniLM-L6-v2 as a per-channel dynamic int8 graph (engine/embeddings/
int8_graph.py) and a graph at `local.modelPath` as it is; a fine-tuned model measured in fp32
against the bundled one in int8 would gain or lose by the format alone. Runs in memsift's own
environment (onnx, onnxruntime), not the training one:

    python contrib/embedder/quantise.py model/ model-int8/

writes `model-int8/model.onnx` and copies `tokenizer.json` beside it.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from memsift.engine.embeddings.int8_graph import _build


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", type=Path, help="a folder with model.onnx (fp32) and tokenizer.json")
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    _build(args.source / "model.onnx", args.out / "model.onnx")
    shutil.copy(args.source / "tokenizer.json", args.out / "tokenizer.json")
    print(f"wrote {args.out / 'model.onnx'} ({(args.out / 'model.onnx').stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
