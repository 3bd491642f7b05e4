"""LongMemEval names its evidence sessions `answer_…`, and the `lme` layout tags each line with its
session id: a reader must not learn that name, so it is cut from every text the reader is trained
or measured on (the other sets' tags, `[D7:20]`, `[beam100k_1#52]`, say nothing of the answer)."""

import re

LEAK = re.compile(r"\banswer_")


def unleak(text: str) -> str:
    return LEAK.sub("", text)
