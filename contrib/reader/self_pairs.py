"""Self-supervised groups for the reader, from permitted chats nobody labelled (issue 62's pretraining).

Each group is (query, positive, negatives) like train_reader.groups(), made from the turns of one
chat file, the way a memory question meets its evidence turn:

- inverse cloze: one sentence of a turn (6–30 words) asks; the turn without that sentence (kept
  whole one time in ten, so exact overlap is not the only cue) answers;
- reply: the question a turn ends with asks; the next turn, by another speaker, answers.

Negatives are other turns of the same file (same topic and people: the hard kind a search
returns). Only workspaces whose licence allows weights that ship may be read (LongMemEval, MIT;
RealMem and Molweni, Apache-2.0); the caller says which folders those are.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

TURN = re.compile(r"^\[[^\]]{1,80}\]\s+([^:\n]{1,40}):\s+(.+)$")
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def turns_of(path: Path) -> list[tuple[str, str]]:
    """(speaker, text) for each tagged turn of a chat file; tags are dropped (they say nothing)."""
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = TURN.match(line.strip())
        if m:
            out.append((m.group(1).strip(), m.group(2).strip()))
    return out


def _words(text: str) -> int:
    return len(text.split())


def _cloze(turns, i: int, rng: random.Random) -> tuple[str, str] | None:
    speaker, text = turns[i]
    sentences = [s for s in SENTENCE.split(text) if s]
    choices = [k for k, s in enumerate(sentences) if 6 <= _words(s) <= 30]
    if len(sentences) < 2 or not choices:
        return None
    k = rng.choice(choices)
    rest = sentences if rng.random() < 0.1 else sentences[:k] + sentences[k + 1 :]
    return sentences[k], _said((speaker, " ".join(rest)))


def _reply(turns, i: int) -> tuple[str, str] | None:
    if i + 1 >= len(turns) or turns[i + 1][0] == turns[i][0]:
        return None
    asks = [s for s in SENTENCE.split(turns[i][1]) if s.endswith("?") and 4 <= _words(s) <= 40]
    if not asks:
        return None
    return asks[-1], _said(turns[i + 1])


def _said(turn: tuple[str, str]) -> str:
    """A turn as the reader sees it: `Speaker: text`."""
    return f"{turn[0]}: {turn[1]}"


def _asked(turns, order: list[int], rng: random.Random):
    """(turns the group stands on, query, positive) for each turn, in `order`, that makes one."""
    for i in order:
        replying = rng.random() < 0.5
        made = _reply(turns, i) if replying else _cloze(turns, i, rng)
        if made is not None:
            yield ({i, i + 1} if replying else {i}), *made


def groups_from_file(turns: list[tuple[str, str]], others: list[str], negatives: int, per_file: int,
                     rng: random.Random) -> list[tuple[str, str, list[str]]]:
    """Groups from one chat file's turns; `others` (turns of the same person's other files) top up
    the negatives of a short file."""
    if len(turns) < 2:
        return []
    order = list(range(len(turns)))
    rng.shuffle(order)
    out = []
    for used, query, positive in _asked(turns, order, rng):
        pool = [_said(t) for j, t in enumerate(turns) if j not in used]
        negs = rng.sample(pool, min(negatives, len(pool)))
        if len(negs) < negatives:
            if len(others) < negatives:
                continue
            negs += rng.sample(others, negatives - len(negs))
        out.append((query, positive, negs))
        if len(out) >= per_file:
            break
    return out


def _easy_groups(turns: list[tuple[str, str]], everyone: list[str], negatives: int, per_file: int,
                 rng: random.Random) -> list[tuple[str, str, list[str]]]:
    mine = {_said(t) for t in turns}
    if sum(t not in mine for t in everyone) < negatives:
        return []
    out = []
    for _used, query, positive in _asked(turns, rng.sample(range(len(turns)), len(turns)), rng):
        negs: list[str] = []
        while len(negs) < negatives:  # anyone's turns but this file's
            negs += [t for t in rng.sample(everyone, negatives) if t not in mine][: negatives - len(negs)]
        out.append((query, positive, negs))
        if len(out) >= per_file:
            break
    return out


def _person(path: Path) -> Path:
    """The workspace a chat file belongs to (the folder above `memory/`)."""
    return path.parent.parent if path.parent.name == "memory" else path.parent


def self_groups(folders: list[Path], *, negatives: int, limit: int, rng: random.Random,
                easy: bool = False) -> list[tuple[str, str, list[str]]]:
    """Up to `limit` groups spread over every chat file under `folders`; `easy`: negatives from
    anyone's chats instead of the same file (a start that is easier to learn from)."""
    files = sorted(p for folder in folders for p in folder.rglob("*.md") if p.name != "MEMORY.md")
    if not files:
        raise SystemExit(f"no chat files under {', '.join(map(str, folders))}")
    per_file = max(1, -(-limit // len(files)))
    turns = {f: turns_of(f) for f in files}
    by_person: dict[Path, list[str]] = {}
    for f in files:
        by_person.setdefault(_person(f), []).extend(map(_said, turns[f]))
    everyone = [t for said in by_person.values() for t in said]
    out = []
    for f in files:
        if easy:
            out += _easy_groups(turns[f], everyone, negatives, per_file, rng)
            continue
        mine = set(map(_said, turns[f]))
        others = [t for t in by_person[_person(f)] if t not in mine]
        out += groups_from_file(turns[f], others, negatives, per_file, rng)
    rng.shuffle(out)
    return out[:limit]
