"""Remote providers against real HTTP servers on loopback speaking each vendor's wire format."""

from __future__ import annotations

import json

import anyio
import numpy as np
import pytest

from memsift.engine.config import MemorySearchConfig
from memsift.engine.embeddings import create_provider, select_provider
from memsift.engine.embeddings.keys import MissingKeyError
from memsift.engine.embeddings.remote import plan_batches
from memsift.engine.errors import ProviderError
from provider_server import Fault, ProviderServer

KEY = "test-key-123456789"


def _ms(server: ProviderServer, provider: str, remote: dict | None = None, **extra) -> MemorySearchConfig:
    raw = {"provider": provider, "remote": {"baseUrl": server.base_url, "apiKey": KEY, **(remote or {})}, **extra}
    return MemorySearchConfig.model_validate(raw)


class Sleeps:
    """Records the waits between retries instead of sleeping (the waits are what we assert)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _make(server, provider, remote=None, **extra):
    sleeps = Sleeps()
    p = create_provider(provider, _ms(server, provider, remote, **extra), environ={}, sleep=sleeps)
    return p, sleeps


def run(fn, *args):
    return anyio.run(fn, *args)


@pytest.mark.parametrize("flavour", ["openai", "mistral", "voyage", "gemini", "ollama"])
def test_each_provider_speaks_its_wire_format(flavour):
    with ProviderServer(flavour) as server:
        p, _ = _make(server, flavour)
        docs = run(p.embed_documents, ["ledger on postgres", "lisbon hotels", "postgres ledger decision"])
        q = run(p.embed_query, "postgres ledger")
        assert docs.shape == (3, 48) and q.shape == (48,)
        cos = docs @ q / (np.linalg.norm(docs, axis=1) * np.linalg.norm(q))
        assert cos[0] > cos[1] and cos[2] > cos[1]  # the vectors came back in order
        reqs = server.embedding_requests()
        doc_req, query_req = reqs[0], reqs[-1]
        if flavour == "gemini":
            assert doc_req.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
            assert doc_req.headers["x-goog-api-key"] == KEY and "authorization" not in doc_req.headers
            assert {r["taskType"] for r in doc_req.body["requests"]} == {"RETRIEVAL_DOCUMENT"}
            assert query_req.path.endswith(":embedContent") and query_req.body["taskType"] == "RETRIEVAL_QUERY"
            assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)  # gemini vectors are normalised
        elif flavour == "ollama":
            assert doc_req.path == "/api/embed" and doc_req.body == {
                "model": "nomic-embed-text",
                "input": ["ledger on postgres", "lisbon hotels", "postgres ledger decision"],
            }
            assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
        else:
            assert doc_req.path == "/v1/embeddings" and doc_req.headers["authorization"] == f"Bearer {KEY}"
            assert (
                doc_req.body["model"]
                == {"openai": "text-embedding-3-small", "mistral": "mistral-embed", "voyage": "voyage-4-large"}[flavour]
            )
            if flavour == "voyage":
                assert doc_req.body["input_type"] == "document" and query_req.body["input_type"] == "query"
            else:
                assert "input_type" not in doc_req.body


def test_openai_compatible_endpoint_with_custom_headers_and_model_prefix():
    with ProviderServer("openai") as server:
        p, _ = _make(server, "openai", {"headers": {"X-Org": "acme"}}, model="openai/my-embedder")
        run(p.embed_query, "hello")
        req = server.embedding_requests()[0]
        assert req.headers["x-org"] == "acme" and req.body["model"] == "my-embedder"
        other, _ = _make(server, "openai", {"headers": {"X-Org": "other"}}, model="openai/my-embedder")
        assert other.fingerprint != p.fingerprint  # headers (never the key) are part of the vector space


def test_gemini_embedding_2_output_dimensionality():
    with ProviderServer("gemini") as server:
        p, _ = _make(server, "gemini", model="models/gemini-embedding-2-preview", outputDimensionality=768)
        v = run(p.embed_query, "hello")
        assert v.shape == (768,) and server.embedding_requests()[0].body["outputDimensionality"] == 768
        plain, _ = _make(server, "gemini")
        run(plain.embed_query, "hello")
        assert "outputDimensionality" not in server.embedding_requests()[-1].body  # only for embedding 2


def test_batching_by_byte_budget_and_bounded_concurrency():
    texts = [f"note {i}: " + "word " * (40 + i % 50) for i in range(1000)]
    with ProviderServer("openai") as server:
        server.delay = 0.02
        p, _ = _make(server, "openai")
        out = run(p.embed_documents, texts)
        assert out.shape == (1000, 48)
        reqs = server.embedding_requests()
        sizes = [sum(len(t.encode()) for t in r.body["input"]) for r in reqs]
        assert all(s <= 8000 for s in sizes)
        assert sum(len(r.body["input"]) for r in reqs) == 1000
        assert len(reqs) == len(plan_batches(texts))
        expected_min = -(-sum(len(t.encode()) for t in texts) // 8000)
        assert expected_min <= len(reqs) <= expected_min + 5
        assert 1 < server.max_in_flight <= 4  # parallel, but bounded


def test_an_oversize_text_goes_alone_and_item_caps_hold():
    assert plan_batches(["a" * 9000, "b", "c"]) == [[0], [1, 2]]
    assert plan_batches(["x"] * 250, max_items=100) == [list(range(100)), list(range(100, 200)), list(range(200, 250))]


def test_429_with_retry_after_is_honoured():
    with ProviderServer("openai") as server:
        server.faults = [Fault(429, headers={"Retry-After": "3"}), Fault(429, headers={"Retry-After": "1"})]
        p, sleeps = _make(server, "openai")
        v = run(p.embed_query, "hello")
        assert v.shape == (48,)
        assert sleeps.waits == [3.0, 1.0]
        assert len(server.embedding_requests()) == 3 and p.stats.retries == 2 and p.stats.failures == 0


def test_5xx_retries_with_exponential_backoff_then_fails():
    with ProviderServer("mistral") as server:
        server.faults = [Fault(503) for _ in range(10)]
        p, sleeps = _make(server, "mistral")
        with pytest.raises(ProviderError, match="HTTP 503"):
            run(p.embed_query, "hello")
        assert len(server.embedding_requests()) == 4  # 1 call + 3 retries
        assert len(sleeps.waits) == 3
        for wait, base in zip(sleeps.waits, (0.5, 1.0, 2.0)):
            assert base <= wait <= base * 1.2
        assert p.stats.failures == 1


def test_timeouts_are_retried():
    with ProviderServer("openai") as server:
        server.faults = [Fault(200, delay=1.0)]
        p, sleeps = _make(server, "openai")
        p.query_timeout = 0.3
        v = run(p.embed_query, "hello")
        assert v.shape == (48,) and len(sleeps.waits) == 1 and p.stats.retries == 1


@pytest.mark.parametrize(
    "fault,message",
    [
        (Fault(400, {"error": {"message": "input is too long for this model"}}), "too long"),
        (Fault(200, raw=b'{"data": [ this is not json'), "malformed JSON"),
        (Fault(200, {"data": "nope"}), "expected 1 embeddings"),
        (Fault(200, {"data": [{"index": 0, "embedding": ["a", "b"]}]}), "not lists of numbers"),
        (
            Fault(
                200,
                {"data": [{"index": 0, "embedding": [1.0, float("nan")]}]},
                raw=b'{"data": [{"index": 0, "embedding": [1.0, NaN]}]}',
            ),
            "non-finite",
        ),
    ],
)
def test_bad_responses_are_clear_errors_and_not_retried(fault, message):
    with ProviderServer("openai") as server:
        server.faults = [fault]
        p, sleeps = _make(server, "openai")
        with pytest.raises(ProviderError, match=message):
            run(p.embed_query, "hello")
        assert sleeps.waits == [] and len(server.embedding_requests()) == 1


def test_wrong_dimensions_and_counts_are_detected():
    with ProviderServer("openai") as server:
        p, _ = _make(server, "openai")
        run(p.embed_query, "first call learns 48 dims")
        server.dims = 32
        with pytest.raises(ProviderError, match="returned 32 dimensions, expected 48"):
            run(p.embed_query, "hello")
        server.dims = 48
        server.wrong_count = True
        with pytest.raises(ProviderError, match="expected 2 embeddings, got 1"):
            run(p.embed_documents, ["a", "b"])
    with ProviderServer("gemini") as server:
        server.wrong_dims = True
        p, _ = _make(server, "gemini")
        with pytest.raises(ProviderError, match="one length"):
            run(p.embed_documents, ["a", "b"])


def test_bad_key_is_not_retried_and_never_shown():
    with ProviderServer("openai", key="the-real-key-0000000000") as server:
        secret = "sk-wrong-secret-key-abcdefghijklmnop"
        p = create_provider(
            "openai",
            MemorySearchConfig.model_validate(
                {"provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": secret}}
            ),
            environ={},
        )
        with pytest.raises(ProviderError) as err:
            run(p.embed_query, "hello")
        assert "HTTP 401" in str(err.value) and "Incorrect API key" in str(err.value)
        assert secret not in str(err.value) and secret[:12] not in str(err.value)
        assert len(server.requests) == 1


def test_unreachable_endpoint_is_a_clear_error():
    ms = MemorySearchConfig.model_validate(
        {"provider": "openai", "remote": {"baseUrl": "http://127.0.0.1:9/v1", "apiKey": KEY}}
    )
    p = create_provider("openai", ms, environ={})
    with pytest.raises(ProviderError, match="cannot reach 127.0.0.1:9"):
        run(p.embed_query, "x")


def test_keys_come_from_config_or_the_environment():
    ms = MemorySearchConfig.model_validate({"provider": "openai"})
    with pytest.raises(MissingKeyError, match="set OPENAI_API_KEY"):
        create_provider("openai", ms, environ={})
    assert create_provider("openai", ms, environ={"OPENAI_API_KEY": "sk-env"})._api_key == "sk-env"
    g = MemorySearchConfig.model_validate({"provider": "gemini", "remote": {"apiKey": "GEMINI_API_KEY"}})
    assert create_provider("gemini", g, environ={"GEMINI_API_KEY": "g-env"})._api_key == "g-env"
    with pytest.raises(MissingKeyError, match="names the environment variable GEMINI_API_KEY"):
        create_provider("gemini", g, environ={})
    assert create_provider("gemini", MemorySearchConfig(), environ={"GOOGLE_API_KEY": "g2"})._api_key == "g2"
    for pid, var in [("voyage", "VOYAGE_API_KEY"), ("mistral", "MISTRAL_API_KEY")]:
        with pytest.raises(MissingKeyError, match=var):
            create_provider(pid, MemorySearchConfig(), environ={})
    assert create_provider("ollama", MemorySearchConfig(), environ={})._api_key is None  # optional


def test_ollama_at_its_openai_compatible_root_is_asked_at_its_own_api():
    """`remote.baseUrl: http://host:11434/v1` (what Ollama's docs show for OpenAI clients): memsift
    speaks Ollama's own API, at `/api/embed` beside it, as OpenClaw does (before: `/v1/api/embed`, 404)."""
    with ProviderServer("ollama", key=None) as server:
        for base in (f"{server.root}/v1", f"{server.root}/V1/", server.root):
            ms = MemorySearchConfig.model_validate({"provider": "ollama", "remote": {"baseUrl": base}})
            assert run(create_provider("ollama", ms, environ={}).embed_query, "hello").shape[0] > 0
        assert {r.path for r in server.embedding_requests()} == {"/api/embed"}


def test_credentials_in_the_headers_or_the_url_need_no_api_key():
    """Azure OpenAI's `api-key` header, a proxy's `Authorization`, Google's `?key=`: the provider is made
    with no apiKey and sends what was configured (no empty `Authorization: Bearer`)."""
    with ProviderServer("openai", key=None) as server:
        for headers in ({"api-key": "azure-secret-1"}, {"Authorization": "Basic dXNlcjpwdw=="}):
            ms = MemorySearchConfig.model_validate({"provider": "openai", "remote": {
                "baseUrl": f"{server.base_url}?api-version=2024-02-01", "headers": headers}})
            p = create_provider("openai", ms, environ={})
            run(p.embed_query, "hello")
            req = server.embedding_requests()[-1]
            assert req.path == "/v1/embeddings" and req.query == {"api-version": ["2024-02-01"]}
            assert {k.lower(): v for k, v in headers.items()}.items() <= req.headers.items()
        assert "authorization" not in server.embedding_requests()[0].headers
    ms = MemorySearchConfig.model_validate({"provider": "gemini", "remote": {"baseUrl": "https://g.example/v1beta?key=K"}})
    assert create_provider("gemini", ms, environ={})._api_key is None
    plain = MemorySearchConfig.model_validate({"provider": "openai", "remote": {"baseUrl": "https://h/v1?monkey=1",
                                                                              "headers": {"X-Org": "acme"}}})
    with pytest.raises(MissingKeyError):  # a parameter or header that is not a credential does not count
        create_provider("openai", plain, environ={})


def test_a_key_rotated_in_the_url_keeps_the_vector_space():
    """The query's credential is masked in the provider's identity (as an apiKey never is part of it),
    while a parameter that changes the endpoint is kept."""
    def fingerprint(url: str) -> str:
        ms = MemorySearchConfig.model_validate({"provider": "gemini", "remote": {"baseUrl": url}})
        return create_provider("gemini", ms, environ={}).fingerprint

    assert fingerprint("https://g.example/v1beta?key=OLD-1") == fingerprint("https://g.example/v1beta?key=NEW-2")
    assert fingerprint("https://g.example/v1beta?key=A&deployment=a") != fingerprint(
        "https://g.example/v1beta?key=A&deployment=b")


def test_auto_order_and_keyless_default():
    sel = select_provider(MemorySearchConfig(), environ={})
    assert sel.provider.id == "local"
    sel = select_provider(MemorySearchConfig(), environ={"VOYAGE_API_KEY": "v", "MISTRAL_API_KEY": "m"})
    assert sel.provider.id == "voyage"
    sel = select_provider(
        MemorySearchConfig(), environ={"MISTRAL_API_KEY": "m", "GEMINI_API_KEY": "g", "OPENAI_API_KEY": "o"}
    )
    assert sel.provider.id == "openai"
    sel = select_provider(MemorySearchConfig(), environ={"OLLAMA_API_KEY": "x"})
    assert sel.provider.id == "local"  # ollama is never auto-selected


def test_explicit_provider_without_key_uses_the_fallback_and_says_why():
    ms = MemorySearchConfig.model_validate({"provider": "openai", "fallback": "local"})
    sel = select_provider(ms, environ={})
    assert sel.provider.id == "local" and sel.fallback_from == "openai" and "OPENAI_API_KEY" in sel.fallback_reason
    with pytest.raises(MissingKeyError):
        select_provider(MemorySearchConfig.model_validate({"provider": "openai"}), environ={})


def test_fallback_never_receives_the_primary_key_or_endpoint():
    ms = MemorySearchConfig.model_validate(
        {
            "provider": "openai",
            "fallback": "mistral",
            "remote": {"baseUrl": "http://127.0.0.1:1/v1", "apiKey": "sk-openai-only"},
        }
    )
    fb = create_provider("mistral", ms, primary=False, environ={"MISTRAL_API_KEY": "m-key"})
    assert fb._api_key == "m-key" and fb.base_url == "https://api.mistral.ai/v1" and fb.model == "mistral-embed"


def test_openai_batch_api_job_flow():
    with ProviderServer("openai") as server:
        server.batch_polls_before_done = 2
        p, _ = _make(server, "openai", {"batch": {"enabled": True, "pollIntervalMs": 10}})
        out = run(p.embed_documents, [f"text {i}" for i in range(30)])
        assert out.shape == (30, 48)
        paths = [(r.method, r.path) for r in server.requests]
        assert ("POST", "/v1/files") in paths and ("POST", "/v1/batches") in paths
        assert paths.count(("GET", "/v1/batches/batch_0")) == 3
        create = next(r for r in server.requests if r.path == "/v1/batches")
        assert create.body["endpoint"] == "/v1/embeddings" and create.body["completion_window"] == "24h"
        assert server.embedding_requests() == []  # nothing went through the plain path
        assert p.batch_api.jobs == 1 and p.batch_api.usable()


def test_batch_failures_disable_batching_and_fall_back_to_plain_requests():
    with ProviderServer("openai") as server:
        server.batch_fail = True
        server.batch_polls_before_done = 0
        p, _ = _make(server, "openai", {"batch": {"enabled": True, "pollIntervalMs": 10}})
        for _ in range(3):
            out = run(p.embed_documents, ["a", "b"])
            assert out.shape == (2, 48)
        assert p.batch_api.failures == 2 and not p.batch_api.usable()
        assert len([r for r in server.requests if r.path == "/v1/batches"]) == 2  # not tried a third time
        assert len(server.embedding_requests()) == 3  # every call still answered


def test_batch_wait_false_is_an_error_then_plain_path():
    with ProviderServer("openai") as server:
        p, _ = _make(server, "openai", {"batch": {"enabled": True, "wait": False, "pollIntervalMs": 10}})
        out = run(p.embed_documents, ["a"])
        assert out.shape == (1, 48) and "wait is false" in p.batch_api.last_error


def test_gemini_batch_api_and_missing_endpoint():
    with ProviderServer("gemini") as server:
        p, _ = _make(server, "gemini", {"batch": {"enabled": True, "pollIntervalMs": 10}})
        out = run(p.embed_documents, ["alpha beta", "gamma"])
        assert out.shape == (2, 48) and np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
        paths = [r.path for r in server.requests]
        assert "/upload/v1beta/files" in paths and "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent" in paths
        assert any(p_.startswith("/download/v1beta/files/") for p_ in paths)
        single = run(p.embed_query, "alpha beta")
        assert float(out[0] @ single) == pytest.approx(1.0, abs=1e-5)  # same vectors as the plain path
    with ProviderServer("gemini") as server:
        server.batch_endpoint_missing = True
        p, _ = _make(server, "gemini", {"batch": {"enabled": True, "pollIntervalMs": 10}})
        assert run(p.embed_documents, ["x"]).shape == (1, 48)
        assert not p.batch_api.usable() and p.batch_api.failures == 2  # disabled at once


def test_requests_per_thousand_chunks_figure():
    """Not a timing: the request count for 1,000 chunk-sized texts, printed for the closing note."""
    texts = [("daily log line about the ledger migration and hotel plans " * 26)[: 1200 + i % 400] for i in range(1000)]
    with ProviderServer("openai") as server:
        p, _ = _make(server, "openai")
        run(p.embed_documents, texts)
        n = len(server.embedding_requests())
        assert n == len(plan_batches(texts))
        print(json.dumps({"requests_per_1000_chunks": n}))
