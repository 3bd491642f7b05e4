"""Questions that name only a time ("what did I do yesterday?", "what happened last week?",
"上周末我们聊了什么？"): their answer is that time's notes.

`names_only_a_time`: what is left of the question once its time expressions are taken out carries
nothing to look for — question words, stop words, and the words people use to ask what went on
(do, happen, talk about, discuss, work on, anything new, catch up…) — or only words the memory
itself says select nothing: the backend (`weightless`) is asked whether each of at most
MAX_COMMON_WORDS remaining words occurs in COMMON_SHARE of its notes (files) or more — the names
of the two people of a chat log, in every day's note; "the user" of an agent's log — or in none
(no note can be found by it: "what was on my *plate* last Friday?"). Any other word is a topic
("what did I *fix* yesterday?", "what did *Helga* ask for last week?"), and the ordinary blend of
relevance and time ranks those. The list and the share were drawn from the dev questions of
`contrib/bench/timeonly.py`, then checked against the topical time questions of LongMemEval and
the chats set: see docs/performance.md, *Time-only questions*.

`window_first`: the order of a time-only answer — the window's notes, a day at a time in order
(the first chunk of each day, then the second of each…), so the first hits cover the whole
window and read as it happened; never cut by minScore (they are exactly what was asked).
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import timedelta
from typing import TYPE_CHECKING, Callable, Sequence

from ..lazy import lazy_re
from .stopwords import STOP_WORDS

from .time_query import TimeWindow

if TYPE_CHECKING:
    from .ranking import Candidate

__all__ = [
    "names_only_a_time",
    "topic_words",
    "window_first",
    "nearest_notes",
    "nearby_windows",
    "window_days",
    "ASKING_WORDS",
    "COMMON_SHARE",
    "COMMON_MIN_NOTES",
    "MAX_COMMON_WORDS",
    "NEARBY_DAYS",
    "is_weightless",
]

COMMON_SHARE = 0.5  # a word in this share of the notes or more names no topic of one day
COMMON_MIN_NOTES = 20  # below this many notes, a share says little: only absent words are weightless
MAX_COMMON_WORDS = 2  # more words left than this: a topic, whatever their counts
# A window without notes is answered by the notes of the days around it, at most this far away
# ("what did I do on November 20?" when the 17th has a note), never by notes months away that
# happen to hold the number 20.
NEARBY_DAYS = 7
Weightless = Callable[[str], bool]  # a word in no note, or in COMMON_SHARE of them or more


def is_weightless(found: int, notes: int) -> bool:
    """A word found in `found` of `notes` notes selects none of them: it is in none, or (from
    COMMON_MIN_NOTES notes on) in COMMON_SHARE of them or more."""
    return found == 0 or (notes >= COMMON_MIN_NOTES and found >= COMMON_SHARE * notes)

# Words that ask what went on, without saying about what.
ASKING_WORDS = frozenset(
    """
    what whats happen happens happened happening go goes going gone went on up new news anything
    something everything nothing stuff things thing any else much
    do does did doing done work works worked working busy
    talk talks talked talking discuss discusses discussed discussing chat chats chatted chatting
    say says said mention mentioned speak spoke spoken cover covered
    write wrote written log logged note noted notes record recorded jot jotted
    recap summary summarize summarise summarized overview review tell show list remind give
    remember recall memory memories diary journal entry entries
    catch fill update updates highlight highlights topic topics come comes came important notable
    interesting accomplish accomplished achieve achieved spend spent time
    we us our i me my you your they them he she it
    day days morning afternoon evening night
    get got getting been have has had was were am are is be
    there here then around about over during at in on of for from with to
    """.split()
)
# The same for Chinese and Japanese: function words and the ways of asking what happened.
_CJK_ASKING = lazy_re(  # compiled on a time-only question's first use
    "我们|我們|咱们|我|你|他们|他們|大家|做了什么|做了什麼|干了什么|幹了什麼|聊了什么|聊了什麼|聊过什么|谈了什么|談了什麼|"
    "讨论了什么|討論了什麼|发生了什么|發生了什麼|有什么新|有什麼新|说了什么|說了什麼|什么|什麼|都|了|吗|嗎|呢|的|在|过|過|"
    "聊|谈|談|讨论|討論|做|干|幹|说|說|发生|發生|事情|事|情况|情況|"
    "私たち|僕|私|何を|何が|何か|何|した|しました|話した|話しました|話し|話|あった|ありました|起きた|"
    "は|が|を|に|で|の|と|も|か|よ|ね|こと|について"
)
# Ways of asking said in several words ("bring me up to speed on last week").
_ASKING_PHRASES = lazy_re(
    r"\b(?:up\s+to\s+speed|walk\s+me\s+through|run\s*down|main\s+points|worth\s+(?:remembering|knowing|noting)|"
    r"what\s+was\s+on\s+my\s+plate|in\s+my\s+life|fill\s+me\s+in|catch\s+me\s+up|bring\s+me)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def topic_words(question: str, windows: Sequence[TimeWindow]) -> list[str] | None:
    """The words of the question that could name a topic once its time expressions, question words
    and ways of asking are taken out ([] when none; None when a CJK word is left, always a topic)."""
    rest = question
    for w in windows:
        words = w.text.split(" ", 1)
        for text in (w.text, words[-1]):  # "since last March" was spoken as "last March" after "since"
            rest = re.sub(re.escape(text), " ", rest, flags=re.IGNORECASE)
    rest = _CJK_ASKING.sub(" ", _ASKING_PHRASES.sub(" ", rest.lower()))
    if re.search(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]", rest):
        return None  # a CJK word that is not a way of asking: a topic
    words = [w.split("'")[0] for w in _WORD.findall(rest)]
    return list(dict.fromkeys(w for w in words if not _asks(w)))


def _asks(word: str) -> bool:
    """A stop word or a way of asking, inflected or not ("remembering", "updates", "discussed")."""
    if word in ASKING_WORDS or word in STOP_WORDS:
        return True
    for suffix, repl in (("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2 and word[: -len(suffix)] + repl in ASKING_WORDS:
            return True
    return False


def names_only_a_time(question: str, windows: Sequence[TimeWindow], weightless: Weightless | None = None) -> bool:
    """True when the question, without its time expressions, asks for nothing but what went on:
    no word is left, or (`weightless` given) only a few words that select no notes (found in most
    of them or in none)."""
    if not windows:
        return False
    words = topic_words(question, windows)
    if words is None:
        return False
    if not words:
        return True
    return weightless is not None and len(words) <= MAX_COMMON_WORDS and all(weightless(w) for w in words)


def window_first(items: list[Candidate], windows: Sequence[TimeWindow]) -> list[Candidate]:
    """The candidates of the question's windows, a day at a time (each day's chunks in file order),
    days in order; candidates outside every window are dropped. A chunk that also speaks of other
    days shows the lines of the window."""
    from .time_rank import focus_on, is_curated, stated_days  # noqa: PLC0415  (time_rank reads no time-only rule)

    def inside(d: object) -> bool:
        return any(w.distance_days(d) == 0 for w in windows)  # type: ignore[arg-type]

    by_day: dict[object, list[Candidate]] = defaultdict(list)
    for c in items:
        first = next((d for d in stated_days(c) if inside(d)), None)
        if first is not None:
            focus_on(c, inside)
            c.day = first.isoformat()  # the day of the lines shown, not the chunk's first (explain)
            by_day[first].append(c)
    for day_items in by_day.values():  # the day's own notes before MEMORY.md's line of that day
        day_items.sort(key=lambda c: (is_curated(c), c.path, c.start_line))
    out: list[Candidate] = []
    queues = [by_day[d] for d in sorted(by_day)]  # type: ignore[type-var]
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def nearby_windows(windows: Sequence[TimeWindow]) -> list[TimeWindow]:
    """The windows widened by NEARBY_DAYS on each side: the days whose notes a backend reads for a
    time-only question, so that an empty window can be answered by the days around it."""
    pad = timedelta(days=NEARBY_DAYS)
    return [w.widened(pad, pad) for w in windows]


def window_days(items: list[Candidate], windows: Sequence[TimeWindow]) -> set[object]:
    """The days inside the windows that hold notes among `items`."""
    from .time_rank import stated_days  # noqa: PLC0415

    return {d for c in items for d in stated_days(c) if any(w.distance_days(d) == 0 for w in windows)}


def nearest_notes(items: list[Candidate], windows: Sequence[TimeWindow]) -> list[tuple[Candidate, int]]:
    """For a window with no notes: the notes at most NEARBY_DAYS from it, the closest day first
    (the earlier of two as close), each with its distance in days."""
    from .time_rank import stated_days  # noqa: PLC0415

    found = []
    for c in items:
        dist = min(((w.distance_days(d), d) for d in stated_days(c) for w in windows), default=None)
        if dist is not None and 0 < dist[0] <= NEARBY_DAYS:
            found.append((dist, c.path, c.start_line, c))
    found.sort(key=lambda t: t[:3])
    return [(c, dist[0]) for dist, _p, _l, c in found]
