"""An embedding provider plugin: hashed bags of words (deterministic, no model)."""

from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.plugins import ProviderPlugin


class TinyHash(FakeEmbeddingProvider):
    id = "tiny-hash"


def _create(ms, *, primary=True, environ=None, **kw):
    return TinyHash(dims=32, model="tiny-hash-32")


provider = ProviderPlugin("tiny-hash", _create, "hashed bags of words (a test plugin)")
