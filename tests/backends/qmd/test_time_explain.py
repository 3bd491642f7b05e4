"""QMD's hits for a question naming a time are judged by that time, as every backend's are, and its
explain says so: each hit's day, where the day came from, and the share of the score the time kept
(builtin's explain shows the same facts). The real qmd; skipped without it."""

from __future__ import annotations

import anyio

from helpers import backend_memory, make_settings
from memsift.engine import open_manager
from time_workspace import FIXED_DAYS, noon, write_time_workspace


def test_a_topic_and_time_question_is_judged_by_the_time_and_explained(tmp_path):
    memory = backend_memory("qmd")
    tw = write_time_workspace(tmp_path / "ws", FIXED_DAYS[3])
    settings = make_settings(tmp_path, tw.root, {"provider": "none"}, memory=memory)

    async def ask():
        manager = open_manager(settings)
        try:
            await manager.sync(reason="test")
            return await manager.search("what bug did I fix last week?", now=noon(tw.today), explain=True)
        finally:
            await manager.aclose()

    answer = anyio.run(ask)
    assert answer.backend == "qmd" and answer.results, answer
    top = answer.results[0]
    assert "HER-95" in top.snippet
    details = [h.details or {} for h in answer.results]
    assert all(d.get("day") and d.get("daySource") for d in details), details
    factors = [d["timeFactor"] for d in details]
    assert details[0]["timeFactor"] == 1.0 and all(0 < f <= 1 for f in factors), factors
