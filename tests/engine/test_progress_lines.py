"""Long work says where it is where no bar can be drawn: `memsift index` off a terminal (a CI log,
a pipe) or on one that cannot draw (`TERM=dumb`) printed nothing for minutes on a first index of
thousands of notes. It says a plain line every PLAIN_EVERY_S (a short run says nothing)."""

from __future__ import annotations

from memsift.engine.cli import progress
from memsift.engine.cli.progress import PLAIN_EVERY_S


def test_plain_lines_come_every_interval_with_the_share_done_and_the_time_left(capsys):
    now = [1000.0]
    update = progress._plain_lines(lambda: now[0])
    timeline = [(0.0, "files", 0, 400), (3.0, "files", 400, 400), (4.0, "embed", 0, 1000),
                (PLAIN_EVERY_S + 1, "embed", 100, 1000), (PLAIN_EVERY_S + 5, "embed", 150, 1000),
                (2 * PLAIN_EVERY_S + 2, "embed", 250, 1000), (2 * PLAIN_EVERY_S + 3, "unknown", 1, 2)]
    for at, stage, done, total in timeline:
        now[0] = 1000.0 + at
        update(stage, done, total)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "memsift: embedding chunks: 100 of 1,000 chunks (10%), about 63 s left",  # 7 s for 100: 9 × 7 s
        "memsift: embedding chunks: 250 of 1,000 chunks (25%), about 54 s left",  # 18 s for 250: 3 × 18 s
    ]
