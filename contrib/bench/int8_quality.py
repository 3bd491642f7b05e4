"""The int8 graph against the fp32 graph on LongMemEval, same code, same run: recall_any@5/@10
and nDCG@10 in vector and hybrid mode, each graph with its own index.

    python contrib/bench/int8_quality.py      # about 10 minutes here (the fp32 index embeds from scratch)

Writes results/int8_quality.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import quality  # noqa: E402
from bench_data import load_longmemeval  # noqa: E402

KEYS = ("recall_any@5", "recall_any@10", "ndcg@10")


def run_int8_quality(work: Path, say=print) -> dict:
    from memsift.engine.embeddings.local import LocalMiniLMProvider  # noqa: PLC0415

    lme = load_longmemeval(work / "data")
    out: dict[str, dict] = {}
    for name, int8, state in (("fp32", False, work / "state" / "lme-fp32"), ("int8", True, work / "state" / "lme")):
        quality._PROVIDERS["local"] = LocalMiniLMProvider(int8=int8)  # every manager of the run uses it
        out[name] = {}
        started = time.time()
        # Searches here do not sync (the files are frozen): an index left by an earlier graph would
        # answer by keywords alone, so each index is brought up to date with its graph first.
        anyio.run(lambda: quality.warm_index("hybrid", lme.workspace, state, say))
        for mode in ("vector", "hybrid"):
            r = anyio.run(lambda: quality.eval_longmemeval(lme, mode, state))
            out[name][mode] = {k: r[k] for k in KEYS}
            say(f"  {name} {mode}: {out[name][mode]} ({time.time() - started:.0f} s)")
    quality._PROVIDERS.pop("local", None)
    out["change"] = {
        m: {k: round(out["int8"][m][k] - out["fp32"][m][k], 4) for k in KEYS} for m in ("vector", "hybrid")
    }
    return out


def main() -> None:
    out = run_int8_quality(HERE / "out")
    (HERE / "results" / "int8_quality.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out["change"], indent=1))


if __name__ == "__main__":
    main()
