"""The rerank stage above the backends: on a real builtin index, on QMD (the fake replaying real
captures) and through the CLI and MCP; blend, explain, degraded answers, budget and circuit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from helpers import QMD_SAMPLES, make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.qmd import QmdSearchManager
from memsift.engine.config.models import MmrConfig, QueryConfig, RerankConfig
from memsift.engine.errors import ConfigError
from memsift.engine.compose.factory import open_manager, resolve_config
from memsift.engine.compose.fallback import FallbackSearchManager
from memsift.engine.rerank import create_reranker
from memsift.engine.compose.rerank_stage import RerankingSearchManager, blend
from memsift.engine.results import SearchAnswer, SearchHit
from rerank_server import RerankFault, RerankServer, overlap

QUERY = "ledger postgres"
FAKEBIN = Path(__file__).parents[2] / "backends" / "qmd" / "fakebin"


def run(fn, *args, **kw):
    return anyio.run(lambda: fn(*args, **kw))


class Sleeps:
    async def __call__(self, seconds: float) -> None:
        pass


def _rerank(server: RerankServer, **extra) -> dict:
    return {"enabled": True, "provider": "endpoint", "remote": {"baseUrl": server.base_url}, **extra}


def _settings(tmp_path, ws, rerank: dict | None = None, **ms):
    query = {"rerank": rerank} if rerank else {}
    return make_settings(tmp_path, ws, {"provider": "none", "query": query, **ms})


def _keys(answer: SearchAnswer) -> list[tuple[str, int, int]]:
    return [(h.path, h.start_line, h.end_line) for h in answer.results]


def _plain(tmp_path, ws, **kw) -> SearchAnswer:
    m = open_manager(_settings(tmp_path / "plain", ws))
    try:
        return run(m.search, QUERY, **kw)
    finally:
        run(m.aclose)


def test_off_by_default_no_stage_and_no_rerank_fields(tmp_path, example_workspace):
    m = open_manager(_settings(tmp_path, example_workspace))
    assert not isinstance(m.inner, RerankingSearchManager)
    answer = run(m.search, QUERY, explain=True)
    assert answer.rerank is None and answer.degraded.rerank is None and all(h.rerank is None for h in answer.results)
    run(m.aclose)


def test_builtin_hits_are_reranked_and_blended_with_the_hybrid_score(tmp_path, example_workspace):
    with RerankServer("tei") as server:
        m = open_manager(_settings(tmp_path, example_workspace, _rerank(server, candidates=12, weight=0.6)))
        answer = run(m.search, QUERY, explain=True, max_results=4)
        run(m.aclose)
    plain = _plain(tmp_path, example_workspace, max_results=12)
    assert answer.rerank.applied and answer.rerank.provider == "endpoint" and answer.rerank.weight == 0.6
    assert answer.rerank.candidates == len(plain.results) > 4  # the backend's top 12 went to the reranker
    assert len(answer.results) == 4 and answer.max_results == 4 and answer.degraded.rerank is None
    sent = server.requests[0].body["texts"]
    assert sent == [h.snippet for h in plain.results]  # each hit's snippet, in the backend's order
    for hit in answer.results:
        r = hit.rerank
        assert r.rerank_score == pytest.approx(overlap(QUERY, hit.snippet), abs=1e-6)
        assert (
            r.blended
            == pytest.approx(blend(r.hybrid_score, r.rerank_score, 0.6), abs=1e-6)
            == pytest.approx(0.4 * r.hybrid_score + 0.6 * r.rerank_score, abs=1e-6)
        )
        assert hit.score == r.blended and r.hybrid_score == plain.results[r.hybrid_rank - 1].score
    assert [h.score for h in answer.results] == sorted((h.score for h in answer.results), reverse=True)
    # With weight 1 the reranker alone orders the hits.
    with RerankServer("tei") as server:
        m = open_manager(_settings(tmp_path / "w1", example_workspace, _rerank(server, weight=1.0)))
        answer = run(m.search, QUERY, explain=True)
        run(m.aclose)
    rel = [h.rerank.rerank_score for h in answer.results]
    assert rel == sorted(rel, reverse=True) and rel[0] == 1.0


def test_the_local_cross_encoder_reranks_builtin_hits(tmp_path, example_workspace):
    pytest.importorskip("onnx", reason="the test graph is built with the onnx package (pip install onnx)")
    from cross_encoder_graph import model_folder, probe_graph
    from memsift.engine.rerank.local import LocalCrossEncoder

    probe = LocalCrossEncoder(model_folder(tmp_path / "p", lambda p: probe_graph(p)))
    probe.load()
    ledger = probe._tokenizer.token_to_id("ledger")
    folder = model_folder(tmp_path / "model", lambda p: probe_graph(p, mode="token", token_id=ledger))
    rerank = {"enabled": True, "provider": "local", "modelPath": str(folder), "weight": 1.0, "maxTokens": 128}
    m = open_manager(_settings(tmp_path, example_workspace, rerank))
    answer = run(m.search, "ledger write path", explain=True)
    run(m.aclose)
    assert answer.rerank.applied and answer.rerank.provider == "local" and answer.rerank.model == "model"
    raws = [h.rerank.raw_score for h in answer.results]  # 1 (the query's) + how often the chunk says "ledger"
    assert raws == sorted(raws, reverse=True) and raws[0] >= 2
    assert "ledger" in answer.results[0].snippet.lower()


def test_a_failing_reranker_keeps_the_backends_order_and_says_why(tmp_path, example_workspace):
    plain = _plain(tmp_path, example_workspace)
    with RerankServer("tei") as server:
        server.faults = [RerankFault(500)] * 8
        settings = _settings(tmp_path, example_workspace, _rerank(server, timeoutMs=300))
        m = open_manager(settings)
        answer = run(m.search, QUERY, explain=True)
        assert _keys(answer) == _keys(plain) and [h.score for h in answer.results] == [h.score for h in plain.results]
        assert (
            "HTTP 500: internal error" in answer.degraded.rerank
            and "the backend's order is kept" in answer.degraded.rerank
        )
        # The reranker's 500 is the news: not "budget exceeded", although no retry fitted the budget.
        assert answer.degraded.rerank.startswith("rerank failed: endpoint: HTTP 500"), answer.degraded.rerank
        assert answer.rerank.applied is False and all(h.rerank is None for h in answer.results)
        server.faults = [RerankFault(0, delay=2.0)]  # slower than the budget
        answer = run(m.search, QUERY)
        assert answer.degraded.rerank.startswith("rerank budget exceeded: endpoint did not score")
        assert "300 ms (query.rerank.timeoutMs)" in answer.degraded.rerank and _keys(answer) == _keys(plain)
        # Three failures in a row: the circuit opens and the next search does not ask at all.
        server.faults = [RerankFault(503)] * 8
        run(m.search, QUERY)
        asked = len(server.requests)
        answer = run(m.search, QUERY)
        assert len(server.requests) == asked
        assert "failed 3 searches in a row" in answer.degraded.rerank and "(circuit open)" in answer.degraded.rerank
        assert _keys(answer) == _keys(plain)
        st = run(m.status)
        assert st.rerank["circuit"]["open"] is True and st.rerank["provider"] == "endpoint"
        # A new process (a cold CLI call) sees the open circuit through the file beside the index.
        other = open_manager(settings)
        assert "(circuit open)" in run(other.search, QUERY).degraded.rerank
        run(other.aclose)
        run(m.aclose)


def test_a_reranker_that_cannot_be_set_up_is_a_degraded_answer_not_a_failure(tmp_path, example_workspace, monkeypatch):
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    m = open_manager(_settings(tmp_path, example_workspace, {"enabled": True, "provider": "voyage"}))
    answer = run(m.search, QUERY)
    assert _keys(answer) == _keys(_plain(tmp_path, example_workspace))
    assert answer.degraded.rerank.startswith("reranker unavailable: No API key found for provider voyage")
    assert "memorySearch.query.rerank.remote.apiKey" in answer.degraded.rerank
    assert run(m.status).rerank["error"].startswith("No API key found")
    run(m.aclose)


def test_a_secret_never_reaches_the_answer_or_status(tmp_path, example_workspace):
    secret = "sk-rerank-secret-0123456789abcdef"
    with RerankServer("voyage") as server:
        server.echo_key_in_error = True
        m = open_manager(_settings(tmp_path, example_workspace, {
            "enabled": True, "provider": "voyage", "remote": {"baseUrl": server.base_url, "apiKey": secret}}))
        answer = run(m.search, QUERY)
        st = run(m.status)
        run(m.aclose)
    assert "HTTP 401" in answer.degraded.rerank
    dumped = json.dumps(answer.to_json_dict()) + json.dumps(st.to_json_dict())
    assert secret not in dumped and secret[:12] not in dumped


class _Fixed:
    """A backend answering fixed hits: MMR's effect needs near-duplicate snippets, chosen here."""

    backend = "builtin"
    query_config = QueryConfig()

    def __init__(self, hits: list[SearchHit]) -> None:
        self.hits = hits

    async def answer(self, request):
        max_results = request.max_results
        return SearchAnswer(
            query=request.query,
            results=[h.model_copy() for h in self.hits][:max_results],
            backend="builtin",
            mode="hybrid",
            min_score=0.0,
            max_results=max_results or 6,
            took_ms=1.0,
        )

    async def aclose(self):
        pass


def test_mmr_still_diversifies_the_reranked_order(tmp_path):
    twin = "ledger database postgres decision ledger database"
    hits = [SearchHit(path=f"n{i}.md", start_line=1, end_line=2, score=0.5, snippet=s)
            for i, s in enumerate([twin, twin + " again", "ledger database backups in lisbon"])]
    with RerankServer("tei") as server:
        config = RerankConfig.model_validate(_rerank(server, weight=0.5))
        order = {}
        for on in (False, True):
            m = RerankingSearchManager(_Fixed(hits), config, mmr=MmrConfig(enabled=on, **{"lambda": 0.3}),
                                       reranker=create_reranker(config, environ={}, sleep=Sleeps()))
            order[on] = [h.path for h in run(m.search, QUERY, max_results=3).results]
    assert order[False][:2] == ["n0.md", "n1.md"]  # the twins score alike and lead
    assert order[True][:2] == ["n0.md", "n2.md"]  # MMR puts the different note before the twin


def test_qmd_answers_are_reranked_too(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    env = {"PATH": f"{FAKEBIN}:{os.environ['PATH']}", "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
           "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"), "FAKE_QMD_PIDS": str(tmp_path / "pids"),
           "HOME": os.environ.get("HOME", "/root")}
    with RerankServer("infinity") as server:
        rerank = _rerank(server, weight=1.0)
        settings = make_settings(tmp_path, ws, {"provider": "none", "query": {"rerank": rerank}}, memory={
            "backend": "qmd", "qmd": {"includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}],
                                      "update": {"debounceMs": 60_000}}})
        qmd = FallbackSearchManager(lambda: QmdSearchManager(settings, environ=env),
                                    lambda: BuiltinSearchManager(settings), name="qmd")
        config = settings.memory_search.query.rerank
        m = RerankingSearchManager(qmd, config, reranker=create_reranker(config, environ={}, sleep=Sleeps()))
        answer = run(m.search, "aurora telemetry", explain=True)
        run(m.aclose)
    assert answer.backend == "qmd" and answer.fallback is None and answer.rerank.applied
    assert server.requests[0].body["documents"] == [
        h.snippet for h in sorted(answer.results, key=lambda h: h.rerank.hybrid_rank)
    ]
    rel = [h.rerank.rerank_score for h in answer.results]
    assert rel == sorted(rel, reverse=True) and {h.rerank.hybrid_score for h in answer.results} == {0.52, 0.41, 0.4}
    assert all(h.details is not None for h in answer.results)  # QMD's own explain is kept beside the stage's


def test_config_refuses_a_stage_without_its_reranker_and_out_of_range_values(tmp_path, example_workspace):
    with pytest.raises(ConfigError, match=r"memorySearch\.query\.rerank\.modelPath: the local reranker needs a folder"):
        _settings(tmp_path, example_workspace, {"enabled": True})
    with pytest.raises(ConfigError, match=r"rerank\.remote\.baseUrl: the endpoint provider needs"):
        _settings(tmp_path, example_workspace, {"enabled": True, "provider": "endpoint"})
    for rerank, key in (
        ({"enabled": True, "provider": "jina", "weight": 1.5}, "weight"),
        ({"provider": "openai"}, "provider"),
        ({"candidates": 0}, "candidates"),
    ):
        path = tmp_path / "memsift.json5"
        path.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"query": {"rerank": rerank}}}}}))
        with pytest.raises(ConfigError, match=rf"agents\.defaults\.memorySearch\.query\.rerank\.{key}"):
            resolve_config(path, workspace=example_workspace, environ={})
    assert _settings(tmp_path, example_workspace, {"provider": "cohere"}).memory_search.query.rerank.enabled is False


def _cli(tmp_path: Path, ws: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "memsift.json5"
    path.write_text(json.dumps(config))
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "-c", str(path), *args],
                          env=env, capture_output=True, text=True, timeout=300)


def test_cli_explain_json_and_status_show_the_stage(tmp_path, example_workspace):
    with RerankServer("llamacpp") as server:
        config = {"agents": {"defaults": {"memorySearch": {"provider": "none", "query": {"rerank": _rerank(server)}}}}}
        done = _cli(tmp_path, example_workspace, config, "search", "--explain", QUERY)
        assert done.returncode == 0, done.stderr
        assert "    rerank: hybrid=" in done.stdout and " reranker=" in done.stdout and " blend=" in done.stdout
        assert (
            "reranked by endpoint (the server's own model) (" in done.stdout and "endpoint/ " not in done.stdout
        )  # no model set
        data = json.loads(_cli(tmp_path, example_workspace, config, "search", "--json", "--explain", QUERY).stdout)
        assert data["rerank"]["applied"] is True and data["results"][0]["rerank"]["weight"] == 0.5
        server.faults = [RerankFault(404)] * 4
        done = _cli(tmp_path, example_workspace, config, "search", QUERY)
        assert "not reranked: rerank failed: endpoint: HTTP 404" in done.stdout and "Traceback" not in done.stderr
        status = _cli(tmp_path, example_workspace, config, "status")
        assert (
            "Rerank" in status.stdout
            and "Rerank           endpoint (the server's own model) · 30 candidates" in status.stdout
            and "30 candidates" in status.stdout
        )


def test_mcp_memory_search_carries_the_stage(tmp_path, example_workspace):
    pytest.importorskip("mcp", reason="the MCP SDK is not installed (a default dependency)")
    from memsift.engine.mcp.server import MemoryServer

    with RerankServer("vllm") as server:
        settings = _settings(tmp_path, example_workspace, _rerank(server))
        m = open_manager(settings)
        tools = MemoryServer(m, settings)
        out = run(tools.search, QUERY)
        server.faults = [RerankFault(400)] * 2
        degraded = run(tools.search, QUERY)
        run(m.aclose)
    assert out.rerank.applied and out.results and out.degraded is None
    assert "HTTP 400" in degraded.degraded.rerank and degraded.rerank.applied is False


def test_parity_compares_reranked_answers_of_both_backends(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    queries = tmp_path / "queries.txt"
    queries.write_text("aurora telemetry\n", encoding="utf-8")
    with RerankServer("tei") as server:
        config = {"agents": {"defaults": {"memorySearch": {"provider": "none", "query": {"rerank": _rerank(server)}}}},
                  "memory": {"qmd": {"includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}],
                                     "update": {"debounceMs": 0}}}}
        path = tmp_path / "memsift.json5"
        path.write_text(json.dumps(config))
        env = {**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
               "PATH": f"{FAKEBIN}:{os.environ['PATH']}", "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
               "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"), "FAKE_QMD_PIDS": str(tmp_path / "pids")}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "memsift.engine.cli.main",
                "-w",
                str(ws),
                "-c",
                str(path),
                "parity",
                str(queries),
                "--json",
                "-k",
                "3",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["queries"][0]
    assert row["builtin"]["reranked"] is True and row["qmd"]["reranked"] is True
    assert row["qmd"]["fallback"] is None and row["qmd"]["hits"] and row["builtin"]["hits"]
    asked = [r.body["texts"] for r in server.requests]
    assert len(asked) >= 4  # both sides' warm-up query and timed query went through the reranker


def test_config_show_masks_the_rerank_key_and_headers(tmp_path, example_workspace):
    config = {
        "agents": {
            "defaults": {
                "memorySearch": {
                    "query": {
                        "rerank": {
                            "provider": "jina",
                            "remote": {
                                "apiKey": "jina-secret-0123456789",
                                "headers": {"X-Gateway-Token": "gw-secret-abcdef"},
                            },
                        }
                    }
                }
            }
        }
    }
    done = _cli(tmp_path, example_workspace, config, "config", "show")
    assert done.returncode == 0, done.stderr
    assert "jina-secret" not in done.stdout and "gw-secret" not in done.stdout
    shown = json.loads(done.stdout)["memorySearch"]["query"]["rerank"]["remote"]
    assert shown["apiKey"] == "**********" and shown["headers"] == {"X-Gateway-Token": "**********"}
