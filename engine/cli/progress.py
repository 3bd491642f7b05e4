"""Progress of long work on a terminal (stderr): files checked, then chunks embedded, with rate and ETA.

`memsift index` shows it always; a search shows it only when it must build the index first (and
says so in one line), since its ordinary freshness check takes a moment. Off a terminal there is
no bar, but a search that builds the index first still says so in one plain line on stderr, so a
script's log shows what the wait was (a first search over a thousand files takes seconds); and
`memsift index` that runs long (a first index of thousands of notes takes minutes) says where it
is every `PLAIN_EVERY_S` in a plain line, as on a terminal that cannot draw a bar (`TERM=dumb`).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["progress_display", "STAGE_LABELS"]

STAGE_LABELS = {"files": ("checking files", "files"), "embed": ("embedding chunks", "chunks"),
                "write": ("writing chunks", "chunks")}
PLAIN_EVERY_S = 10.0  # off a terminal, `memsift index` says where it is this often (a short run says nothing)


def _build_message(workspace: Any) -> str:
    return f"memsift: building the index for {workspace} first (there is none yet); the search follows"


def _one_line(workspace: Any) -> Callable[[str, int, int], None]:
    """Off a terminal: the one line a search that builds the index first prints, nothing else."""

    def update(stage: str, _done: int, _total: int) -> None:
        if stage == "build":
            print(_build_message(workspace), file=sys.stderr, flush=True)

    return update


def _plain_lines(clock: Callable[[], float] = time.monotonic) -> Callable[[str, int, int], None]:
    """Off a terminal, for `memsift index`: a line every `PLAIN_EVERY_S` while a stage runs, with
    its share done and, once it has moved, the time left at its pace so far."""
    started = clock()
    stage_start: dict[str, tuple[float, int]] = {}
    last = [started]

    def update(stage: str, done: int, total: int) -> None:
        if stage not in STAGE_LABELS:
            return
        now = clock()
        first_at, first_done = stage_start.setdefault(stage, (now, done))
        if now - last[0] < PLAIN_EVERY_S or not total:
            return
        last[0] = now
        label, unit = STAGE_LABELS[stage]
        line = f"memsift: {label}: {done:,} of {total:,} {unit} ({100 * done // total}%)"
        if done > first_done and done < total:
            left = (now - first_at) / (done - first_done) * (total - done)
            line += f", about {_duration(left)} left"
        print(line, file=sys.stderr, flush=True)

    return update


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


@contextmanager
def progress_display(*, always: bool, workspace: Any = None) -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress callback (stage, done, total) drawing on stderr, or None off a terminal.

    `always`: show every stage (`memsift index`); otherwise stay silent until the manager reports
    "build" (a search found no index and builds it first), then say so and show the rest."""
    if not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":  # no bar can be drawn there
        yield _plain_lines() if always else _one_line(workspace)
        return
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    from .streams import on_the_terminal, shown_through_rich, terminal_safe  # noqa: PLC0415

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:.1f} {task.fields['unit']}/s" if speed else "", style="progress.data.speed")

    console = Console(file=on_the_terminal(sys.stderr))  # its bars' own escapes pass (streams.py)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                   TimeRemainingColumn(), console=console, transient=True)
    tasks: dict[str, Any] = {}
    state = {"on": always, "started": False}

    def update(stage: str, done: int, total: int) -> None:
        if stage == "build":
            console.print(terminal_safe(_build_message(workspace)), markup=False, highlight=False)
            state["on"] = True
            return
        if not state["on"] or stage not in STAGE_LABELS:
            return
        if not state["started"]:
            bar.start()
            shown_through_rich()
            state["started"] = True
        if stage not in tasks:
            label, unit = STAGE_LABELS[stage]
            tasks[stage] = bar.add_task(label, total=total, unit=unit)
        bar.update(tasks[stage], completed=done, total=total, refresh=True)

    try:
        yield update
    finally:
        if state["started"]:
            bar.stop()
