"""The registration memsift finds through the `memsift.backends` entry point, and the settings of
`memory.qdrant` (validated by memsift with its "did you mean" errors): `fallback` and
`keepGenerations` come with the kit's `IndexedPluginConfig`."""

from __future__ import annotations

from pydantic import Field

from memsift.engine.kit import IndexedPluginConfig, indexed_backend_plugin


class QdrantConfig(IndexedPluginConfig):
    url: str | None = Field(
        None,
        description="A Qdrant server (`http://host:6333`); unset: Qdrant's local mode in `path` (one process at a "
                    "time).",
    )
    api_key_env: str | None = Field(
        None,
        description="The environment variable holding the server's API key (the key itself never sits in the config).",
    )
    path: str | None = Field(
        None, description="Local mode's folder; default `<stateDir>/agents/<agent>/qdrant`."
    )
    collection_prefix: str = Field(
        "memsift", pattern=r"^[A-Za-z0-9_-]{1,40}$", description="Collections are named `<prefix>_<agent>_…`."
    )
    timeout_s: float = Field(10.0, gt=0, description="Seconds a request to the server may take.")


# The manager is imported when the backend is first opened: qdrant-client loads only when used.
backend = indexed_backend_plugin(
    "qdrant", manager="memsift_qdrant.manager:QdrantSearchManager", config_model=QdrantConfig,
    description="Qdrant (local mode or a server): BM25 sparse vectors plus dense vectors, ranked by memsift",
)
