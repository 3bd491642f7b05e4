"""The CJK bench (contrib/bench/cjk.py) runs every mode end to end on a small set written here: it
had failed at its start since the evidence ranker's stage wrapped the backend (the stage has no
provider for the script-unaware mode to reach)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

import cjk  # noqa: E402

PARAGRAPHS = {
    "p1": ("长城", "长城是中国古代的军事防御工程，东起山海关，西至嘉峪关。"),
    "p2": ("富士山", "富士山は日本で最も高い山で、標高は3776メートルである。"),
    "p3": ("黄河", "黄河是中国第二长河，发源于青藏高原，流经九个省区。"),
}
QUESTIONS = {"q1": ("长城东起哪里？", "p1"), "q2": ("富士山の標高は何メートルか？", "p2")}


def test_the_cjk_bench_runs_every_mode_on_a_small_set(tmp_path, monkeypatch):
    data = tmp_path / "cjk-dev"
    (data / "tiny" / "qrels").mkdir(parents=True)
    (data / "tiny" / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}, ensure_ascii=False) + "\n"
                for k, (t, x) in PARAGRAPHS.items()), encoding="utf-8")
    (data / "tiny" / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": q}, ensure_ascii=False) + "\n" for k, (q, _) in QUESTIONS.items()),
        encoding="utf-8")
    (data / "tiny" / "qrels" / "dev.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{k}\t{p}\t1\n" for k, (_, p) in QUESTIONS.items()))
    load = cjk.load_cjk
    monkeypatch.setattr(cjk, "load_cjk", lambda name, root: load(name, root, data))
    for mode in cjk.CJK_MODES:
        out = anyio.run(cjk.eval_cjk, "tiny", mode, tmp_path / "work", tmp_path / "state")
        assert out["queries"] == 2 and out["hit@10"] == 1.0, (mode, out)
