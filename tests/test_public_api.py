from __future__ import annotations

import memsift.engine as engine


def test_public_names_are_exactly_these():
    assert set(engine.__all__) == {
        "BackendError",
        "ConfigError",
        "IndexUnusableError",
        "ManagerStatus",
        "MemsiftError",
        "PathNotAllowedError",
        "ProviderError",
        "ProviderUnavailableError",
        "ReadResult",
        "ResolvedConfig",
        "SearchAnswer",
        "SearchHit",
        "SearchManager",
        "SyncReport",
        "configure_logging",
        "load_config",
        "open_manager",
        "resolve_agent",
        "resolve_config",
    }
    for name in engine.__all__:
        assert getattr(engine, name) is not None


def test_builtin_manager_satisfies_the_protocol(tmp_path):
    from helpers import make_settings
    from memsift.backends.builtin import BuiltinSearchManager
    from memsift.engine.embeddings.fake import FakeEmbeddingProvider

    m = BuiltinSearchManager(make_settings(tmp_path, tmp_path), provider=FakeEmbeddingProvider())
    assert isinstance(m, engine.SearchManager)
