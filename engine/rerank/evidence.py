"""The evidence ranker: a small learned model that reorders a backend's top hits by cheap features
of what each hit shows (issue 30). It runs offline in well under a millisecond, with no model
download: its weights are `evidence_ranker.json`, trained by `contrib/bench/train_ranker.py` on the
conversational dev sets (never on the documents guard) and shipped with memsift.

Features are backend-neutral, read from the hits themselves (score, snippet, path, order):

- `coverage`: the share of the question's words found in the lines the hit shows; a word no hit
  of the pool shows is found where one of its other forms is (the lexicon's: "chose" for "pick",
  engine/search/expansion.py), so plain wording counts where the question's own word is absent;
- `rare_coverage`: the same, each word weighed by its rarity among the pool's hits
  (log(1 + n / (1 + hits holding it))), so a word most hits hold counts little;
- `reciprocal_rank`: 1 / the hit's position in the backend's order;
- `file_best_other`: the best score of another hit from the same file (answers cluster in a file);
- `asker_coverage`: the share of the question's words found in the shown lines spoken by the person
  the question is about: a speaker it names ("What breed is Elena's dog?" → `Elena: …` lines), or
  the user (`User: …`, `user: …`) when it speaks in the first person ("what did I buy?"). A fact about
  someone is usually stated in their own turn, while the other side's long answers repeat the
  question's words.

The score becomes `(score + Σ weight_f × feature_f) / (1 + Σ positive weights)`: the backend's
score plus an evidence bonus, kept in 0..1 so the order and the figure a user reads agree. A
feature no hit of the pool has leaves the sum of weights, so daily notes with no speakers keep the
figures the four other features give them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

from ..search.fts_query import query_terms
from ..text import is_cjk_char, match_form

__all__ = ["EvidenceModel", "load_model", "ranker_terms", "evidence_features", "turn_speaker", "FEATURES"]

FEATURES = ("coverage", "rare_coverage", "reciprocal_rank", "file_best_other", "asker_coverage")
MODEL_FILE = "evidence_ranker.json"
MODEL_FORMAT = 1


# A speaker's turn: optional bullet and bracketed ids or times, then a name of one or two words and ": ".
TURN = re.compile(r"\s*(?:[-*+]\s+)?(?:\[[^\]\n]{0,64}\]\s*)*([^\W\d][\w.'-]{0,23}(?: [^\W\d][\w.'-]{0,23})?): \S")
_FIRST_PERSON = re.compile(r"(?<![\w'’])(?:i|me|my|mine|myself)(?!\w)", re.IGNORECASE)
_USER_SPEAKERS = frozenset({"user"})  # how transcripts and chat logs name the person asking


def turn_speaker(line: str) -> str | None:
    """The speaker of a turn line (`[D3:8] Caroline: …` → "Caroline"), or None."""
    m = TURN.match(line)
    return m.group(1) if m else None


def _asked_about(speaker: str, question: str, first_person: bool) -> bool:
    """Is the question about this speaker: named in it (a whole word, or anywhere for a CJK name,
    which has no word breaks), or the user of a first-person question?"""
    name = match_form(speaker)
    if first_person and name in _USER_SPEAKERS:
        return True
    if is_cjk_char(name[0]):
        return name in question
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", question) is not None


@dataclass(frozen=True)
class EvidenceModel:
    version: str
    weights: dict[str, float]  # feature → weight, with the backend's score weighing 1

    @property
    def scale(self) -> float:
        return 1.0 + sum(w for w in self.weights.values() if w > 0)

    def pool_scale(self, pool: Sequence[dict[str, float]]) -> float:
        """The scale for one pool: a feature no hit of the pool has (no speaker's turns, say, in notes
        of another form) does not count, so such notes keep the figures they had without it. The
        scale is the same for every hit of a pool, so it never changes an order."""
        return 1.0 + sum(w for f, w in self.weights.items() if w > 0 and any(x[f] for x in pool))

    def score(self, base: float, features: dict[str, float], scale: float | None = None) -> float:
        # A feature of negative weight could take a near-zero score below 0: scores stay in 0..1.
        total = base + sum(w * features[f] for f, w in self.weights.items())
        return max(0.0, total / (scale or self.scale))


def _check(data: dict) -> EvidenceModel:
    if data.get("format") != MODEL_FORMAT:
        raise ValueError(f"evidence ranker weights: format {data.get('format')!r}, this memsift reads {MODEL_FORMAT}")
    weights = {str(k): float(v) for k, v in data["weights"].items()}
    unknown = set(weights) - set(FEATURES)
    if unknown:
        raise ValueError(f"evidence ranker weights: unknown features {sorted(unknown)}")
    if not all(math.isfinite(w) for w in weights.values()):
        raise ValueError("evidence ranker weights: not finite")
    return EvidenceModel(version=str(data["version"]), weights=weights)


@lru_cache(maxsize=1)
def load_model() -> EvidenceModel:
    """The shipped weights (read once per process)."""
    from importlib import resources  # noqa: PLC0415  (a keyword search never ranks: ~3 ms of its import)

    text = resources.files(__package__).joinpath(MODEL_FILE).read_text(encoding="utf-8")
    return _check(json.loads(text))


def ranker_terms(query: str) -> list[str]:
    """The question's words as the features count them: its keyword terms (stop words dropped),
    a CJK run as its character pairs (CJK has no word breaks, and a whole run rarely recurs)."""
    out: list[str] = []
    for term in dict.fromkeys(match_form(t) for t in query_terms(query)):
        if is_cjk_char(term[0]) and len(term) > 2:
            out.extend(term[i : i + 2] for i in range(len(term) - 1))
        else:
            out.append(term)
    return list(dict.fromkeys(out))


def evidence_features(terms: Sequence[str], hits: Sequence[tuple[str, float, str]],
                      question: str = "", variants: Mapping[str, Sequence[str]] | None = None
                      ) -> list[dict[str, float]]:
    """The features of each hit, given as (path, score, snippet) in the backend's order; `question`
    is the question as asked (for who it is about); `variants`: other forms of the terms
    (`variants_by_term`), which stand in for a term that no hit shows."""
    shown = [match_form(snippet) for _path, _score, snippet in hits]
    asker_lines = _asker_lines(question, [snippet for _path, _score, snippet in hits])
    held = _forms_that_count(terms, shown, {t: [match_form(v) for v in vs] for t, vs in (variants or {}).items()})
    holds = [[any(v in s for v in forms) for forms in held] for s in shown]
    n = len(hits)
    rarity = [math.log1p(n / (1 + sum(h[j] for h in holds))) for j in range(len(terms))]
    total_rarity = sum(rarity)
    by_file: dict[str, list[float]] = {}
    for path, score, _ in hits:
        by_file.setdefault(path, []).append(score)
    top_two = {path: sorted(scores, reverse=True)[:2] + [0.0] for path, scores in by_file.items()}
    out = []
    for rank, ((path, score, _), has, lines) in enumerate(zip(hits, holds, asker_lines)):
        best, second = top_two[path][:2]
        out.append(
            {
                "coverage": sum(has) / len(terms) if terms else 0.0,
                "rare_coverage": sum(r for r, h in zip(rarity, has) if h) / total_rarity if total_rarity else 0.0,
                "reciprocal_rank": 1.0 / (rank + 1),
                "file_best_other": second if score == best else best,  # the best score of another hit of the file
                "asker_coverage": sum(any(v in ln for v in forms for ln in lines) for forms in held) / len(terms)
                if terms and lines
                else 0.0,
            }
        )
    return out


def _forms_that_count(terms: Sequence[str], shown: Sequence[str], variants: Mapping[str, Sequence[str]]
                      ) -> list[tuple[str, ...]]:
    """For each term, the words whose presence counts as the term's: the term, and where no hit of the
    pool shows it, its other forms too. Counting them where the term is shown as well lifted beam's
    MRR by 0.011 but cost RealMem 0.005 of recall@10 (docs/performance.md): the term itself is the
    better evidence whenever some hit has it."""
    return [(t, *variants.get(t, ())) if not any(t in s for s in shown) else (t,) for t in terms]


def _asker_lines(question: str, snippets: Sequence[str]) -> list[list[str]]:
    """Each snippet's lines (lowercased) spoken by the person the question is about."""
    asked = match_form(question)
    first_person = _FIRST_PERSON.search(question) is not None
    verdict: dict[str, bool] = {}  # a pool has few speakers: each is judged once
    out = []
    for snippet in snippets:
        lines = []
        for line in snippet.split("\n"):
            speaker = turn_speaker(line)
            if speaker is None:
                continue
            if speaker not in verdict:
                verdict[speaker] = _asked_about(speaker, asked, first_person)
            if verdict[speaker]:
                lines.append(match_form(line))
        out.append(lines)
    return out
