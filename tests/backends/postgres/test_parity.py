"""Postgres answers as builtin does: the example workspace and a SciFact sample, same provider."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import anyio
import numpy as np
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings

pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.builtin import BuiltinSearchManager  # noqa: E402
from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.engine.cli.parity import read_queries, run_parity  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
SAMPLE = Path(__file__).parent / "data" / "scifact-sample.jsonl.gz"


def _settings(tmp_path, ws, dsn, ms=None):
    return make_settings(tmp_path, ws, {"sync": {"onSearch": False}, **(ms or {})},
                         memory={"backend": "postgres", "postgres": {"dsn": dsn}})


def _hits(answer):
    return [(h.path, h.start_line, h.end_line, round(h.score, 4)) for h in answer.results]


def test_example_workspace_same_hits_and_scores(tmp_path, example_workspace, pg_dsn, local_provider):
    settings = _settings(tmp_path, example_workspace, pg_dsn)
    queries = read_queries(REPO / "contrib" / "parity-queries.txt") + ["数据库", "memorySearch.query.hybrid"]

    async def run():
        async with BuiltinSearchManager(settings, provider=local_provider) as b, \
                PostgresSearchManager(settings, provider=local_provider) as p:
            await b.sync()
            report = await p.sync()
            assert report.files_indexed == 6 and report.backend == "postgres"
            for mode in ("hybrid", "keyword", "vector"):
                for q in queries:
                    want = await b.search(q, mode=mode, max_results=10, explain=True)
                    got = await p.search(q, mode=mode, max_results=10, explain=True)
                    assert got.mode == want.mode and got.backend == "postgres"
                    assert _hits(got) == _hits(want), (mode, q)
                    for a, c in zip(want.results, got.results):  # the same score parts, the same snippet
                        assert a.snippet == c.snippet and a.citation == c.citation
                        assert a.explain.bm25_rank == pytest.approx(c.explain.bm25_rank, abs=1e-6) \
                            if a.explain.bm25_rank is not None else c.explain.bm25_rank is None

    anyio.run(run)


def test_memsift_parity_against_postgres(tmp_path, example_workspace, pg_dsn):
    """`memsift parity --against postgres`: every query comparable, the same top 5."""
    settings = _settings(tmp_path, example_workspace, pg_dsn, {"provider": "none"})
    queries = read_queries(REPO / "contrib" / "parity-queries.txt")
    report = anyio.run(lambda: run_parity(settings, queries, k=5, against="postgres"))
    dumped = report.model_dump(by_alias=True, mode="json")
    assert report.comparable and dumped["against"] == "postgres"
    assert dumped["queries"][0]["postgres"]["backend"] == "postgres" and "qmd" not in dumped["queries"][0]
    assert report.summary["meanOverlap"] == 1.0 and report.summary["postgresErrors"] == 0


def _sample(root: Path) -> tuple[Path, list[tuple[str, dict[str, int]]]]:
    ws = root / "scifact"
    (ws / "memory" / "docs").mkdir(parents=True)
    queries = []
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if "query" in row:
                queries.append((row["query"]["text"], row["query"]["relevant"]))
            else:
                d = row["doc"]
                (ws / "memory" / "docs" / f"{d['id']}.md").write_text(
                    f"# {d['title'].strip()}\n\n{' '.join(d['text'].split())}\n"
                )
    return ws, queries


class _Remembering:
    """The real local model, each text embedded once for both backends (the test's time budget)."""

    def __init__(self, provider) -> None:
        self._provider, self._seen = provider, {}

    def __getattr__(self, name):
        return getattr(self._provider, name)

    async def embed_documents(self, texts):
        todo = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if todo:
            self._seen.update(zip(todo, await self._provider.embed_documents(todo)))
        return np.stack([self._seen[t] for t in texts])

    async def aclose(self) -> None:
        pass


def _ndcg10(ranked: list[str], relevant: dict[str, int]) -> float:
    docs = list(dict.fromkeys(ranked))[:10]
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(docs))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal


def test_scifact_sample_top10_and_ndcg(tmp_path, pg_dsn, local_provider):
    ws, queries = _sample(tmp_path)
    settings = _settings(tmp_path, ws, pg_dsn)
    local_provider = _Remembering(local_provider)

    async def run():
        scores = {"builtin": {}, "postgres": {}}
        async with BuiltinSearchManager(settings, provider=local_provider) as b, \
                PostgresSearchManager(settings, provider=local_provider) as p:
            await b.sync()
            await p.sync()
            for mode in ("keyword", "hybrid"):
                overlaps = []
                for name, m in (("builtin", b), ("postgres", p)):
                    scores[name][mode] = []
                for text, relevant in queries:
                    tops = {}
                    for name, m in (("builtin", b), ("postgres", p)):
                        answer = await m.search(text, mode=mode, max_results=30, min_score=0)
                        tops[name] = [Path(h.path).stem for h in answer.results]
                        scores[name][mode].append(_ndcg10(tops[name], relevant))
                    a, c = (list(dict.fromkeys(tops[n]))[:10] for n in ("builtin", "postgres"))  # distinct abstracts
                    overlaps.append(len(set(a) & set(c)) / max(1, len(a)))
                assert sum(overlaps) / len(overlaps) >= 0.95, (mode, overlaps)
                mean = {n: sum(scores[n][mode]) / len(queries) for n in scores}
                assert abs(mean["builtin"] - mean["postgres"]) <= 0.01, (mode, mean)
                assert mean["postgres"] > 0.3  # real retrieval, not two empty lists agreeing

    anyio.run(run)
