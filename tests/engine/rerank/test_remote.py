"""Remote rerankers against real HTTP servers on loopback speaking each API's request and response
shapes (tests/rerank_server.py): Voyage, Cohere, Jina, and the endpoint provider against TEI,
llama.cpp, vLLM and Infinity."""

from __future__ import annotations

import time

import anyio
import pytest

from memsift.engine.config.models import RerankConfig
from memsift.engine.embeddings.keys import MissingKeyError
from memsift.engine.errors import ProviderError
from memsift.engine.rerank import RerankBudgetExceeded, create_reranker, to_relevance
from rerank_server import FLAVOURS, RerankFault, RerankServer, overlap

KEY = "rerank-key-0123456789"
QUERY = "ledger database choice"
DOCS = ["lisbon hotels", "the ledger database is postgres", "database backups", "ledger database choice made"]
PROVIDER = {"voyage": "voyage", "cohere": "cohere", "jina": "jina"}  # the rest are self-hosted: "endpoint"


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _reranker(server: RerankServer, **extra):
    provider = PROVIDER.get(server.flavour, "endpoint")
    remote = {"baseUrl": server.base_url, **({"apiKey": KEY} if server.key else {})}
    config = RerankConfig.model_validate({"enabled": True, "provider": provider, "remote": remote, **extra})
    return create_reranker(config, environ={}, sleep=Sleeps())


def _score(r, docs=DOCS, budget=30.0):
    return anyio.run(lambda: r.score(QUERY, docs, deadline=time.monotonic() + budget))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_each_api_is_asked_in_its_shape_and_read_back_in_document_order(flavour):
    with RerankServer(flavour) as server:
        r = _reranker(server, batchSize=3)
        raw = _score(r)
        expected = [overlap(QUERY, d) for d in DOCS]
        relevance = to_relevance(raw, r.logits)
        assert relevance == pytest.approx(
            expected if flavour != "llamacpp" else to_relevance([e * 8 - 4 for e in expected], True)
        )
        assert [d for _, d in sorted(zip(relevance, DOCS), reverse=True)][0] == "ledger database choice made"
        assert len(server.requests) == 2  # batchSize 3: documents 0-2, then 3 (sent at once, in any order)
        body = next(r.body for r in server.requests if len(r.body.get("documents", r.body.get("texts"))) == 3)
        assert body["query"] == QUERY
        if flavour == "tei":
            assert body["texts"] == DOCS[:3]
        else:
            assert body["documents"] == DOCS[:3]
        if server.key:
            assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
        if flavour == "voyage":
            assert body["model"] == "rerank-2.5" and body["truncation"] is True
        if flavour == "cohere":
            assert (
                server.requests[0].path == "/v2/rerank"
                and body["model"] == "rerank-v3.5"
                and body["max_tokens_per_doc"] == 256
            )
        if flavour == "jina":
            assert body["model"] == "jina-reranker-v2-base-multilingual" and body["return_documents"] is False


def test_a_logit_answer_goes_through_the_sigmoid_and_a_0_to_1_answer_is_kept():
    assert to_relevance([0.2, 0.9], None) == [0.2, 0.9]
    logits = to_relevance([-4.0, 0.0, 4.0], None)
    assert logits[0] < 0.02 and logits[1] == 0.5 and logits[2] > 0.98
    assert to_relevance([0.5], True) == [pytest.approx(0.6225, abs=1e-4)]


def test_a_500_is_retried_within_the_budget_then_fails_with_the_servers_error():
    with RerankServer("tei") as server:
        server.faults = [RerankFault(500)]
        r = _reranker(server)
        assert len(_score(r)) == 4 and r.stats.retries == 1  # one 500, retried, answered
        server.faults = [RerankFault(500)] * 5
        with pytest.raises(
            RerankBudgetExceeded, match=r"HTTP 500: internal error; no time left in the budget for a retry"
        ):
            _score(r, budget=0.3)  # the first retry waits 0.5 s: more than the budget
        assert r.stats.retries == 2


def test_a_4xx_fails_at_once_and_a_key_echoed_back_is_masked():
    with RerankServer("cohere") as server:
        server.echo_key_in_error = True
        config = RerankConfig.model_validate(
            {
                "enabled": True,
                "provider": "cohere",
                "remote": {"baseUrl": server.base_url, "apiKey": "wrong-key-abcdef0123456789"},
            }
        )
        r = create_reranker(config, environ={})
        with pytest.raises(ProviderError) as info:
            _score(r)
        assert "HTTP 401" in str(info.value) and "wrong-key-abcdef0123456789" not in str(info.value)
        assert len(server.requests) == 1


def test_malformed_answers_are_refused_with_what_was_wrong():
    with RerankServer("jina") as server:
        r = _reranker(server)
        for body, message in (({"results": [{"index": 9, "relevance_score": 1}]}, "index 9"),
                              ({"results": [{"index": 0, "relevance_score": "high"}]}, "not a finite number"),
                              ({"results": [{"index": 0, "relevance_score": 0.5}]}, "scored 1 of 4"),
                              ({"nothing": []}, "no results list")):
            server.faults = [RerankFault(200, body)]
            with pytest.raises(ProviderError, match=message):
                _score(r)


def test_hosted_apis_need_a_key_from_config_or_environment():
    with pytest.raises(MissingKeyError, match=r"set VOYAGE_API_KEY .*memorySearch\.query\.rerank\.remote\.apiKey"):
        create_reranker(RerankConfig(enabled=True, provider="voyage"), environ={})
    r = create_reranker(RerankConfig(enabled=True, provider="cohere"), environ={"CO_API_KEY": "co-key-0123456789"})
    assert r.base_url == "https://api.cohere.com/v2" and r._api_key == "co-key-0123456789"
    endpoint = create_reranker(RerankConfig.model_validate({"enabled": True, "provider": "endpoint",
                                                            "remote": {"baseUrl": "http://127.0.0.1:9"}}), environ={})
    assert endpoint._api_key is None  # a self-hosted server usually has none
