"""Would lemminflect's inflections help the keyword side? Runs `contrib/bench/evidence.py` with the
packaged lexicon extended by lemminflect's noun and verb forms that SQLite's Porter stemmer does
not fold together and the lexicon does not already have (experiencing → experience, added → add,
bonuses → bonus: about 800 pairs). lemminflect (MIT) is needed only here: `pip install lemminflect`.

    python contrib/lexicon/inflections_check.py --sets lme,chats,locomo,beam --modes hybrid

Compare with the same command of `contrib/bench/evidence.py` (same --work: the indexes are shared,
expansion happens at search time). Measured 2026-11-29: no set moved (docs/performance.md).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_lexicon import WORD, _porter  # noqa: E402

from memsift.engine.search import expansion  # noqa: E402


def extended_lines() -> tuple[list[str], int]:
    """The packaged lexicon's lines with lemminflect's missing forms added, sorted; pairs added."""
    from lemminflect.core.Inflections import Inflections  # noqa: PLC0415

    text = (Path(expansion.__file__).parent / "data" / "lexicon.tsv").read_text(encoding="utf-8")
    rows: dict[str, list] = {}
    for line in text.splitlines():
        word, lemma, forms, synonyms, related = line.split("\t")
        rows[word] = [lemma, set(forms.split()), synonyms, related]
    stem, added = _porter(), 0
    for lemma, tags in Inflections()._getInflDict().items():
        if not WORD.match(lemma):
            continue
        for tag, forms in tags.items():
            if not tag.startswith(("NN", "VB")):  # adjectives: better → good is a lemma, not a form
                continue
            for form in forms:
                row = rows.setdefault(form, ["", set(), "", ""])
                if not WORD.match(form) or form == lemma or stem(form) == stem(lemma) or row[0]:
                    continue
                row[0] = lemma
                rows.setdefault(lemma, ["", set(), "", ""])[1].add(form)
                added += 1
    lines = [f"{w}\t{lemma}\t{' '.join(sorted(fs))}\t{syn}\t{rel}" for w, (lemma, fs, syn, rel) in sorted(rows.items())]
    return [line for line in lines if any(line.split("\t")[1:])], added


def main() -> None:
    lines, added = extended_lines()
    text = "\n".join(lines) + "\n"
    lexicon = expansion.Lexicon(*(expansion._Column(text, k) for k in range(4)))
    expansion.lexicon = lambda: lexicon  # expand_terms looks it up at each call
    print(f"lexicon: {len(lines)} words, {added} forms from lemminflect", flush=True)
    sys.argv = ["evidence.py", *sys.argv[1:]]
    runpy.run_path(str(HERE.parent / "bench" / "evidence.py"), run_name="__main__")


if __name__ == "__main__":
    main()
