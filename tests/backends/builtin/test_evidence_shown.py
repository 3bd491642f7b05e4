"""The lines a hit shows hold the evidence that ranked it, on a conversational daily log."""

from __future__ import annotations

import anyio

from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.search.ranking import NEAR_EMPTY_WORDS, brevity_factor

PAINTING = [
    "the watercolor landscape I started last week is coming along nicely, the sky took three layers.",
    "I bought a new set of sable brushes and they hold so much more paint than my old synthetic ones.",
    "the art class on Thursday covered layering techniques with acrylics over a textured gesso base.",
    "my sunflower painting got a lot of compliments at the community gallery opening on Saturday night.",
    "I am thinking about trying oil paints next, although the drying time and the solvents worry me.",
    "the local craft store has a sale on canvas panels so I stocked up on a dozen of the larger sizes.",
    "painting outdoors at the lake this morning was peaceful, the light changed every ten minutes or so.",
]
FILLER = [
    "that sounds lovely, we should go to the gallery together next month when the new exhibit opens.",
    "the weather forecast says rain all weekend so maybe we can paint indoors at my place instead.",
    "I will bring snacks and some tea, let me know what time works for you and I will be there.",
]


def _workspace(root):
    """The issue's reproduction: the answer is line 9, after seven turns about painting."""
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- Caroline and Melanie are long-term friends.\n")
    lines = ["# Session 3 — 2023-06-09 19:55 (Caroline & Melanie)"]
    lines += [f"[D3:{i}] Melanie: {t}" for i, t in enumerate(PAINTING, 1)]
    lines.append("[D3:8] Caroline: I finally adopted a rescue greyhound last Tuesday, her name is Pixel.")
    lines += [f"[D3:{i}] Melanie: {t}" for i, t in enumerate(FILLER, 9)]
    (ws / "memory" / "2023-06-09.md").write_text("\n".join(lines) + "\n")
    return ws


def test_first_hit_shows_the_answer_line_not_the_two_line_memory(tmp_path, local_provider):
    ws = _workspace(tmp_path)
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=local_provider)
    try:
        answer = anyio.run(lambda: m.search("What did Caroline adopt?", max_results=2, min_score=0.0, explain=True))
    finally:
        m._close_reader()
    first = answer.results[0]
    assert first.path == "memory/2023-06-09.md"
    assert first.start_line <= 9 <= first.end_line
    assert "adopted a rescue greyhound" in first.snippet
    assert len(first.snippet) <= 700
    memory = next(h for h in answer.results if h.path == "MEMORY.md")
    assert memory.explain.brevity < 1  # kept, but its similarity is scaled as near-empty


def test_brevity_scales_only_near_empty_text():
    assert brevity_factor("# Memory\n- Caroline and Melanie are long-term friends.") < 0.5
    assert brevity_factor(" ".join(["word"] * NEAR_EMPTY_WORDS)) == 1.0
    assert brevity_factor("") == 0.0
    # CJK has no spaces: a 40-character sentence is not one "word"
    assert brevity_factor("索靖擅长草书，他的作品在敦煌一带流传很广，后人常常临摹他的字帖学习书法。" * 2) == 1.0
