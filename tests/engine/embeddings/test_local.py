from __future__ import annotations

import numpy as np
import pytest

from memsift.engine.embeddings import select_provider
from memsift.engine.embeddings.local import DEFAULT_MODEL_ID, LocalMiniLMProvider
from memsift.engine.config import MemorySearchConfig
from memsift.engine.errors import ProviderUnavailableError

PARAPHRASES = [
    ("We chose PostgreSQL for the ledger service.", "The ledger will run on a Postgres database."),
    ("My sister is allergic to peanuts.", "Lena cannot eat peanuts, she has an allergy."),
    ("The deploy failed because the TLS certificate expired.", "An expired certificate broke the release."),
    ("Never schedule meetings before 10am.", "No meetings early in the morning, please."),
]
UNRELATED = [
    ("We chose PostgreSQL for the ledger service.", "She is planning a trip to Lisbon in December."),
    ("My sister is allergic to peanuts.", "Raise the load balancer idle timeout to 300 seconds."),
    ("The deploy failed because the TLS certificate expired.", "Dark roast coffee with oat milk."),
    ("Never schedule meetings before 10am.", "The passport expires next June."),
]


def _cos(p, a, b):
    m = p.embed_sync([a, b])
    return float(m[0] @ m[1])


def test_vectors_are_384d_unit_length_and_deterministic(local_provider):
    m = local_provider.embed_sync(["hello world", "another text", ""])
    assert m.shape == (3, 384) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert np.allclose(local_provider.embed_sync(["hello world"])[0], m[0], atol=1e-5)
    assert local_provider.model == DEFAULT_MODEL_ID and local_provider.dimensions == 384


def test_paraphrases_score_higher_than_unrelated_pairs(local_provider):
    para = [_cos(local_provider, a, b) for a, b in PARAPHRASES]
    unrel = [_cos(local_provider, a, b) for a, b in UNRELATED]
    assert min(para) > max(unrel)
    assert np.mean(para) - np.mean(unrel) > 0.3


def test_batching_does_not_change_vectors(local_provider):
    texts = [f"note number {i} about topic {i % 7}" * (1 + i % 5) for i in range(70)]
    together = local_provider.embed_sync(texts)
    alone = np.stack([local_provider.embed_sync([t])[0] for t in texts[:5]])
    assert np.allclose(together[:5], alone, atol=1e-4)
    if local_provider.quantised:  # windows ran side by side on one-thread runs: the same vectors
        assert local_provider._single is not None and np.array_equal(together[:5], alone)


def test_batches_stay_within_the_padded_token_budget():
    from memsift.engine.embeddings.local import BATCH_MAX_WINDOWS, BATCH_TOKENS, _batches

    lengths = [3, 5, 40, 64, 64, 100, 256, 256, 256, 256, 256, 7, 12] * 9
    order = sorted(range(len(lengths)), key=lambda k: lengths[k])
    batches = _batches(order, lengths)
    assert sorted(k for b in batches for k in b) == list(range(len(lengths)))  # each window once
    for b in batches:
        assert len(b) * max(lengths[k] for k in b) <= BATCH_TOKENS or len(b) == 1
        assert len(b) <= BATCH_MAX_WINDOWS


def test_first_queries_use_the_quick_session_with_the_same_vectors(monkeypatch):
    from memsift.engine.embeddings import local as local_mod

    monkeypatch.setattr(local_mod, "QUICK_QUERIES", 2)
    p = LocalMiniLMProvider()
    long_query = "which database did we pick for the ledger service and why " * 30  # several windows
    quick = [p.embed_query_sync("which database did we pick?"), p.embed_query_sync(long_query)]
    assert p._session is None and p._quick is not None  # no optimised graph loaded for two queries
    third = p.embed_query_sync("which database did we pick?")
    assert p._session is not None and p._quick is None  # then the optimised one takes over
    full = p.embed_sync(["which database did we pick?", long_query])
    assert np.allclose(quick[0], full[0], atol=1e-5) and np.allclose(quick[1], full[1], atol=1e-5)
    assert np.allclose(third, full[0], atol=1e-5)


def test_long_text_tail_is_not_truncated_away(local_provider):
    filler = " ".join(["The soup needs onions, garlic, carrots and a slow simmer."] * 30)  # > 256 tokens
    tail = "Upgrade the Kubernetes cluster to version 1.31 next week."
    q = local_provider.embed_sync(["Kubernetes cluster upgrade"])[0]
    with_tail, without = local_provider.embed_sync([filler + " " + tail, filler])
    assert float(q @ with_tail) > float(q @ without) + 0.05


def test_fingerprint_names_model_and_files(local_provider):
    fp = local_provider.fingerprint
    assert len(fp) == 16 and fp == LocalMiniLMProvider().fingerprint


def test_download_addresses_are_refused():
    with pytest.raises(ProviderUnavailableError, match="never downloads"):
        LocalMiniLMProvider("hf:ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/model.gguf")


def test_broken_custom_model_file_gives_a_clear_error(tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx graph")
    provider = LocalMiniLMProvider(str(bad))
    with pytest.raises(ProviderUnavailableError, match="cannot load local model"):
        provider.embed_sync(["x"])


def test_auto_selects_the_local_model_and_missing_model_path_degrades():
    sel = select_provider(MemorySearchConfig(), environ={})
    assert sel.provider is not None and sel.provider.id == "local" and sel.unavailable_reason is None
    missing = MemorySearchConfig.model_validate({"local": {"modelPath": "/nonexistent/model.onnx"}})
    sel = select_provider(missing, environ={})
    assert sel.provider is None and "not found" in sel.unavailable_reason
    with pytest.raises(ProviderUnavailableError):
        select_provider(missing.model_copy(update={"provider": "local"}), environ={})


def _tokenizer_with(specials: tuple[str, str], words: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(["<pad>", *specials, "<unk>", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{specials[0]} $A {specials[1]}", special_tokens=[(t, vocab[t]) for t in specials])
    return tok, vocab


def test_long_texts_windows_are_wrapped_in_the_tokenizers_own_special_tokens(tmp_path, local_provider):
    # A model at local.modelPath with MPNet's or RoBERTa's vocabulary opens a text with <s> and closes
    # it with </s>; the windows of a long text were wrapped in BERT's [CLS]/[SEP] ids (101/102) instead.
    words = [f"w{i}" for i in range(700)]
    tok, vocab = _tokenizer_with(("<s>", "</s>"), words)
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "model.onnx").write_bytes(b"unused: only the tokenizer is loaded here")
    provider = LocalMiniLMProvider(str(tmp_path))
    provider._load_tokenizer()
    windows = provider._windows(" ".join(words))
    assert len(windows) == 3
    assert all(w[0] == vocab["<s>"] and w[-1] == vocab["</s>"] and len(w) <= 256 for w in windows)
    assert [i for w in windows for i in w[1:-1]] == [vocab[t] for t in words]  # every token once, in order
    # The shipped model keeps BERT's ids around each window, so its vectors and fingerprint do not change.
    local_provider._load_tokenizer()
    shipped = local_provider._windows(" ".join(["onions"] * 600))
    assert len(shipped) == 3 and all(w[0] == 101 and w[-1] == 102 for w in shipped)
