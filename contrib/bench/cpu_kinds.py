"""Does the local model give the same vectors on every kind of CPU? The default install's int8 graph,
run with this CPU's kernels and, in a child process, with its AVX2 kernels (as_avx2.py: AVX-512
and VNNI masked), on the same texts; the fp32 graph beside them as the reference.

    python contrib/bench/cpu_kinds.py [--graph int8.onnx] [--texts 120]

Prints the mean and least cosine between the two CPUs' vectors of each text, and of each to the
fp32 graph's. An index shared by a fleet (one PostgreSQL) or copied to another machine holds
vectors made on one CPU and is asked with question vectors made on another: where the kernels
compute different numbers, the two sides no longer agree. `--graph` runs another int8 graph
(one `int8_graph._build` wrote, say with another quantisation) in place of the install's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def texts(count: int) -> list[str]:
    """Chunk-sized pieces of the example workspace and the docs: fixed, in the clone."""
    out: list[str] = []
    for path in sorted((REPO / "contrib" / "example-workspace").rglob("*.md")) + sorted((REPO / "docs").rglob("*.md")):
        body = path.read_text(encoding="utf-8")
        out += [body[i : i + 900] for i in range(0, len(body), 900)]
    step = max(1, len(out) // count)
    return out[::step][:count]


def embed(folder: Path, count: int, graph: str | None) -> None:
    """(child) this CPU's vectors, int8 and fp32, saved in `folder`."""
    from memsift.engine.embeddings.cpu import cpu_kind
    from memsift.engine.embeddings.local import LocalMiniLMProvider

    chosen = texts(count)
    int8 = LocalMiniLMProvider()
    if graph:
        int8._graph_file = Path(graph)
    np.save(folder / "int8.npy", np.asarray(int8.embed_sync(chosen)))
    np.save(folder / "fp32.npy", np.asarray(LocalMiniLMProvider(int8=False).embed_sync(chosen)))
    (folder / "kind.txt").write_text(cpu_kind())


def cosines(a: np.ndarray, b: np.ndarray) -> str:
    c = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return f"{c.mean():.5f} (least {c.min():.5f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", help="an int8 graph to run in place of the install's")
    ap.add_argument("--texts", type=int, default=120)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        embed(args.child, args.texts, args.graph)
        return
    sys.path.insert(0, str(HERE))
    import as_avx2

    reason = as_avx2.why_not()
    if reason:
        raise SystemExit(f"cpu_kinds: cannot mask this CPU: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        here, masked = Path(tmp) / "here", Path(tmp) / "avx2"
        child = [sys.executable, __file__, "--texts", str(args.texts), *(["--graph", args.graph] if args.graph else [])]
        for folder, env in ((here, None), (masked, as_avx2.masked_env())):
            folder.mkdir()
            subprocess.run([*child, "--child", str(folder)], check=True, env=env)
        v = {(side, kind): np.load(folder / f"{kind}.npy") for side, folder in (("here", here), ("avx2", masked))
             for kind in ("int8", "fp32")}
        kinds = ((here / "kind.txt").read_text(), (masked / "kind.txt").read_text())
    print(f"{len(v['here', 'int8'])} texts; this CPU: {kinds[0]}; masked: its AVX2 kernels "
          f"(status would still say {kinds[1]}: it reads /proc/cpuinfo)")
    print(f"  int8 graph, this CPU against AVX2 kernels: {cosines(v['here', 'int8'], v['avx2', 'int8'])}")
    print(f"  fp32 graph, this CPU against AVX2 kernels: {cosines(v['here', 'fp32'], v['avx2', 'fp32'])}")
    print(f"  int8 against fp32, this CPU:               {cosines(v['here', 'int8'], v['here', 'fp32'])}")
    print(f"  int8 against fp32, AVX2 kernels:           {cosines(v['avx2', 'int8'], v['here', 'fp32'])}")


if __name__ == "__main__":
    main()
