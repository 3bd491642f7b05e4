"""Synthetic daily-log workspaces for the speed and scale benchmark.

Each file is one day of an agent's log, `memory/log-<k>/YYYY-MM-DD.md`: a `# date` heading, then
6–14 bullets `- HH:MM <text>`, about 600–1,300 characters, so one file is about one chunk. The
text is cut from Python's own reference documentation (`pydoc_data.topics`, shipped with every
CPython), so words follow a natural, Zipf-like distribution instead of a tiny uniform vocabulary
(where every term would match every note); ticket ids, names and commit hashes are mixed in the
way agents write them. A fixed seed makes every workspace identical from run to run.
"""

from __future__ import annotations

import random
import re
from datetime import date, timedelta
from pathlib import Path

__all__ = ["build_daily_logs", "sample_queries", "DAYS_PER_FOLDER"]

DAYS_PER_FOLDER = 1000
NAMES = "Priya Marco Lena Chen Wei Sofia Tomasz Aiko Bruno Fatima Oskar Ines Ravi Hana Diego Mei".split()
VERBS = "Reviewed Fixed Discussed Deployed Benchmarked Drafted Merged Investigated Planned Tested Noted Decided".split()
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]+")


def _corpus_words() -> list[str]:
    import pydoc_data.topics as topics  # noqa: PLC0415

    return _WORD_RE.findall(" ".join(topics.topics.values()))


def _bullet(rng: random.Random, words: list[str], minute: int) -> str:
    start = rng.randrange(len(words) - 20)
    text = f"{rng.choice(VERBS)} " + " ".join(words[start : start + rng.randint(8, 16)])
    roll = rng.random()
    if roll < 0.15:
        text += f" (INC-{rng.randint(1000, 9999)})"
    elif roll < 0.25:
        text += f", commit {rng.getrandbits(28):07x}"
    elif roll < 0.40:
        text = f"{rng.choice(NAMES)} asked about " + " ".join(words[start : start + rng.randint(8, 16)])
    return f"- {minute // 60:02d}:{minute % 60:02d} {text}."


def build_daily_logs(root: Path, n_files: int, seed: int = 7) -> Path:
    """A workspace of `n_files` daily logs under `root` (reused when it already holds them)."""
    ws = root / f"daily-{n_files}"
    stamp = ws / ".complete"
    if stamp.exists():
        return ws
    words = _corpus_words()
    rng = random.Random(seed)
    first = date(2026, 11, 1)
    for i in range(n_files):
        folder, day = divmod(i, DAYS_PER_FOLDER)
        d = first - timedelta(days=day)
        minutes = sorted(rng.sample(range(7 * 60, 21 * 60), rng.randint(6, 14)))
        lines = [f"# {d.isoformat()}", ""] + [_bullet(rng, words, m) for m in minutes]
        path = ws / "memory" / f"log-{folder:03d}" / f"{d.isoformat()}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (ws / "MEMORY.md").write_text(
        "# Memory\n\n- The team works on the ledger service and the mobile app.\n", encoding="utf-8"
    )
    stamp.write_text("")
    return ws


def sample_queries(n: int = 40, seed: int = 11) -> list[str]:
    """Queries of the three kinds agents send: keyword pairs, questions, and identifiers."""
    words = [w for w in _corpus_words() if len(w) > 3]
    rng = random.Random(seed)
    out: list[str] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(" ".join(rng.sample(words, 2)))
        elif kind == 1:
            out.append(f"what did {rng.choice(NAMES)} ask about {rng.choice(words)} {rng.choice(words)}?")
        elif kind == 2:
            start = rng.randrange(len(words) - 6)
            out.append(" ".join(words[start : start + rng.randint(3, 6)]))
        else:
            out.append(f"INC-{rng.randint(1000, 9999)}")
    return out
