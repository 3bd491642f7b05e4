"""Local-model indexing speed: characters/s on realistic chunks, today's code against a baseline
revision's `engine/embeddings/local.py`, interleaved in one process so both see the same load.

    python contrib/bench/embed_speed.py [--baseline REV|fp32] [--chunks 120] [--rounds 3]
    python contrib/bench/embed_speed.py --baseline fp32 --model student/ --int8-graph student-int8/model.onnx

`--baseline fp32`: today's code on the fp32 graph, as an install without the `onnx` package runs it
(the default install before onnx became a dependency), against the int8 graph a default install
builds now. `--baseline int8-v1`: the int8 graph as the previous recipe built it (no rewrites of
the exporter's attention and GELU: engine/embeddings/graph_rewrites.py), against today's.
`--model` (with `--int8-graph`): a candidate, such as a distilled student
(contrib/embedder/distil_embedder.py), in place of the bundled model. `--notes-model`: the bundled
model with `local.notesModelPath` set, so the notes are embedded as indexing does it then (the
student's int8 graph built by memsift itself).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_data import load_longmemeval  # noqa: E402
from synthetic import build_daily_logs  # noqa: E402

BASELINE_REV = "ad8f1e6"  # main before issue 20: fp32 graph, windows batched by padded tokens


def _baseline_provider(rev: str):
    """The provider class as it was at `rev`, loaded beside today's package (same relative imports)."""
    source = subprocess.run(["git", "show", f"{rev}:engine/embeddings/local.py"], capture_output=True, text=True,
                            cwd=HERE, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "local_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("memsift.engine.embeddings.local_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.LocalMiniLMProvider()


def _unfused_int8_provider(work: Path):
    """Today's provider on the int8 graph the previous recipe built (`_build(fused=False)`)."""
    from memsift.engine.embeddings.int8_graph import _build  # noqa: PLC0415
    from memsift.engine.embeddings.local import LocalMiniLMProvider, _bundled_model  # noqa: PLC0415

    graph = work / "int8-v1" / "model.onnx"
    if not graph.exists():
        graph.parent.mkdir(parents=True, exist_ok=True)
        _build(_bundled_model(), graph, fused=False)
    provider = LocalMiniLMProvider()
    provider._graph_file = graph  # the provider runs it as it runs its own int8 graph
    return provider


def realistic_chunks(work: Path, per_set: int) -> dict[str, list[str]]:
    """Chunks as the indexer cuts them (400 tokens, 80 overlap) from LongMemEval sessions and
    synthetic daily logs."""
    from memsift.engine.files.chunking import chunk_markdown  # noqa: PLC0415

    def cut(files: list[Path]) -> list[str]:
        out: list[str] = []
        for f in files:
            out += [c.text for c in chunk_markdown(f.read_text(encoding="utf-8"))]
            if len(out) >= per_set:
                break
        return out[:per_set]

    lme = load_longmemeval(work / "data").workspace
    logs = build_daily_logs(work / "embed-speed", 400)
    return {
        "longmemeval": cut(sorted((lme / "memory").glob("*.md"))),
        "daily logs": cut(sorted((logs / "memory").rglob("*.md"))),
    }


def _rate(embed: Callable[[list[str]], Any], texts: list[str]) -> float:
    start = time.perf_counter()
    embed(texts)
    return sum(map(len, texts)) / (time.perf_counter() - start)


def run_embed_speed(work: Path, *, baseline: str = BASELINE_REV, per_set: int = 120, rounds: int = 3,
                    model: str | None = None, int8_graph: str | None = None, notes_model: str | None = None,
                    say: Callable[[str], None] = print) -> dict[str, Any]:
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415
    from quality import local_provider  # noqa: PLC0415

    sets = realistic_chunks(work, per_set)
    if baseline == "fp32":
        before = LocalMiniLMProvider(int8=False)
    elif baseline == "int8-v1":
        before = _unfused_int8_provider(work)
    else:
        before = _baseline_provider(baseline)
    after = local_provider(model, int8_graph, notes_model) if model or notes_model else LocalMiniLMProvider()
    for p in (before, after):
        p.embed_sync(sets["longmemeval"][:16])  # load and warm both
    out: dict[str, Any] = {"baseline": baseline, "int8": after.quantised, "sets": {}}
    for name, texts in sets.items():
        rates: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(rounds):  # interleaved: a burst of load hits both sides alike
            rates["before"].append(_rate(before.embed_sync, texts))
            rates["after"].append(_rate(after.embed_sync, texts))
        b, a = statistics.median(rates["before"]), statistics.median(rates["after"])
        vb, va = before.embed_sync(texts[:40]), after.embed_sync(texts[:40])
        out["sets"][name] = {
            "chunks": len(texts), "mean_chars": round(sum(map(len, texts)) / len(texts)),
            "before_chars_s": round(b), "after_chars_s": round(a), "ratio": round(a / b, 2),
            "min_cosine": round(float((vb * va).sum(axis=1).min()), 4),
        }
        r = out["sets"][name]
        say(f"  {name:12} {r['chunks']} chunks of {r['mean_chars']} chars: {b:,.0f} → {a:,.0f} chars/s "
            f"({r['ratio']}×), cosine to before ≥ {r['min_cosine']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=BASELINE_REV)
    ap.add_argument("--chunks", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", help="measure this model (as local.modelPath) instead of the bundled one")
    ap.add_argument("--int8-graph", help="with --model: its int8 graph, run as the bundled one (each window alone)")
    ap.add_argument("--notes-model", help="as local.notesModelPath: notes embedded by this model (what indexing runs)")
    ap.add_argument("--work", type=Path, default=HERE / "out")
    args = ap.parse_args()
    run_embed_speed(args.work, baseline=args.baseline, per_set=args.chunks, rounds=args.rounds, model=args.model,
                    int8_graph=args.int8_graph, notes_model=args.notes_model)


if __name__ == "__main__":
    main()
