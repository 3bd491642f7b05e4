"""The registration memsift finds through the `memsift.backends` entry point, and the settings of
`memory.lancedb` (validated by memsift with its "did you mean" errors): `fallback` and
`keepGenerations` come with the kit's `IndexedPluginConfig`."""

from __future__ import annotations

from pydantic import Field

from memsift.engine.kit import IndexedPluginConfig, indexed_backend_plugin


class LanceConfig(IndexedPluginConfig):
    path: str | None = Field(
        None, description="The folder of the agent's Lance database; default `<stateDir>/agents/<agent>/lancedb`."
    )


# The manager is imported when the backend is first opened: lancedb and pyarrow load only when used.
backend = indexed_backend_plugin(
    "lancedb",
    manager="memsift_lancedb.manager:LanceSearchManager",
    config_model=LanceConfig,
    description="LanceDB embedded (a Lance dataset per agent): its full-text index and vector search, ranked by "
                "memsift",
)
