"""An embedding provider plugin: hashed bags of words (deterministic, no model), with its own
settings under `memorySearch.tiny-hash`."""

from pydantic import BaseModel, ConfigDict, Field

from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.plugins import ProviderPlugin


class TinyHashConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dims: int = Field(32, ge=4, le=1024)


class TinyHash(FakeEmbeddingProvider):
    id = "tiny-hash"


def _create(ms, *, primary=True, environ=None, config=None, **kw):
    return TinyHash(dims=config.dims, model=f"tiny-hash-{config.dims}")


provider = ProviderPlugin("tiny-hash", _create, "hashed bags of words (a test plugin)", config_model=TinyHashConfig)
