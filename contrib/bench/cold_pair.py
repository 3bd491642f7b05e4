"""A cold `memsift search` against `qmd search` on one LoCoMo conversation, in pairs (A B A B …).

    python contrib/bench/cold_pair.py [--pairs 7] [--conversation conv-26] [--memsift PATH]

The conversation's sessions are written as daily logs (`conversations.load_locomo`), indexed
keyword-only (provider none: `qmd search` is BM25 too) by memsift and by QMD in a private XDG
home; then each pair runs the same question through both, as new processes, memsift with no
resident helper (MEMSIFT_NO_RESIDENT=1). Printed: each side's median and range, and the ratio
pair by pair (the figure to quote: it holds when the machine's speed drifts). Python may write
its bytecode caches, as an installed package does (PYTHONDONTWRITEBYTECODE set, every import
would compile again: 2.5× instead of 1.9× here).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from conversations import load_locomo  # noqa: E402
from qmdcli import QmdHome, qmd_available, run_measured, start_spawner  # noqa: E402
from scale import MEMSIFT  # noqa: E402


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms (min {min(values):.0f}, max {max(values):.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--conversation", default="conv-26", help="the LoCoMo conversation (conv-26 … conv-50)")
    ap.add_argument("--work", type=Path, default=HERE / "out" / "cold-pair")
    ap.add_argument("--memsift", help="the memsift command to time (default: this environment's)")
    args = ap.parse_args()
    if not qmd_available():
        sys.exit("cold_pair: qmd is not on PATH (npm install -g @tobilu/qmd@2.8.3, on Node 22)")
    start_spawner()
    questions = [q for q in load_locomo(args.work / "data") if q.qid.startswith(f"{args.conversation}:")]
    if not questions:
        sys.exit(f"cold_pair: no LoCoMo conversation {args.conversation!r}")
    ws = questions[0].workspace
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.startswith("MEMSIFT") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(MEMSIFT_STATE_DIR=str(args.work / "state"), XDG_CONFIG_HOME=str(args.work / "xdg-config"),
               MEMSIFT_NO_RESIDENT="1", MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__PROVIDER="none")
    memsift = [args.memsift] if args.memsift else list(MEMSIFT)
    built = run_measured([*memsift, "-w", str(ws), "index"], env=env)
    if built.rc != 0:
        sys.exit(f"cold_pair: memsift index failed: {built.stderr[-600:]}")
    home = QmdHome(args.work / "qmd")
    home.reset()
    home.run("collection", "add", str(ws), "--name", "mem", "--mask", "**/*.md")
    ours = [*memsift, "-w", str(ws), "search", "--json"]
    theirs = ["qmd", "--index", home.index, "search", "--json", "-n", "6", "--"]
    print(f"{args.conversation}: {len(list(ws.rglob('*.md')))} files; {args.pairs} pairs after one warm-up each")
    run_measured([*ours, questions[0].text], env=env)
    run_measured([*theirs, questions[0].text], env=home.env, cwd=home.root)
    a, b = [], []
    for i in range(args.pairs):
        question = questions[i % len(questions)].text
        for side, argv, side_env, cwd in ((a, ours, env, None), (b, theirs, home.env, home.root)):
            run = run_measured([*argv, question], env=side_env, cwd=cwd)
            if run.rc != 0:
                sys.exit(f"cold_pair: {argv[0]} exited {run.rc}: {run.stderr[-600:]}")
            side.append(run.seconds * 1000)
    ratios = [x / y for x, y in zip(a, b)]
    print(f"  memsift search, cold: {_spread(a)}")
    print(f"  qmd search:           {_spread(b)}")
    print(f"  cold ÷ qmd, pair by pair: median {statistics.median(ratios):.2f}× "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
