"""What a plugin gives memsift: a backend, an embedding provider or a reranker, found through
Python entry points (`memsift.backends`, `memsift.providers`, `memsift.rerankers`). memsift's own
backends, providers and rerankers register through the same groups (see pyproject.toml), so the
composition layer names none of them.

A backend plugin's entry point names a `BackendPlugin`:

    # pyproject.toml of the plugin package
    [project.entry-points."memsift.backends"]
    lancedb = "memsift_lancedb.plugin:backend"

Its `open(context)` returns a `SearchManager`; memsift wraps it with everything that lives above
backends (fallback, evidence ranking, rerank, scope rules) and serves it through every door.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..config import ResolvedConfig
    from ..config.models import MemorySearchConfig
    from ..embeddings.base import EmbeddingProvider
    from ..manager import SearchManager
    from ..rerank.base import Reranker

__all__ = ["BackendPlugin", "BackendContext", "FallbackPolicy", "ProviderPlugin", "RerankerPlugin", "GROUPS"]

GROUPS = {"backend": "memsift.backends", "provider": "memsift.providers", "reranker": "memsift.rerankers"}


@dataclass(frozen=True)
class BackendContext:
    """What a backend is opened with."""

    settings: ResolvedConfig  # the agent's resolved settings (workspace, state dir, memorySearch, …)
    config: Any  # the backend's own block (`memory.<name>`), validated by its `config_model`; None without one
    progress: Callable[[str, int, int], None] | None = None  # (stage, done, total) for long syncs

    @property
    def state_dir(self) -> Any:
        """Where this agent's index may live: the folder of the builtin index's file."""
        return self.settings.store_path.parent


@dataclass(frozen=True)
class FallbackPolicy:
    """How a backend that can fail at run time (a sidecar, a server) is guarded: when it fails,
    the `to` backend answers and the answer says why; the primary is tried again after
    `retry_after_s`. `fail_closed`: no fallback, the answer says the backend is unavailable."""

    to: str = "builtin"
    fail_closed: bool = False
    retry_after_s: float = 60.0
    primary_budget_s: float | None = None  # a search that has not answered by then is answered by the fallback
    not_covered: list[str] = field(default_factory=list)  # what the primary indexes that the fallback cannot
    eager: bool = False  # open the primary at once (its config errors are told at once), not at first use


@dataclass(frozen=True)
class BackendPlugin:
    """A backend, registered under the `memsift.backends` entry point named `name`. `open(context)`
    returns its `SearchManager`; `config_model` (a pydantic model) validates `memory.<name>`;
    `fallback(context)` returns how its failures are answered (None: they are errors);
    `default_max_results(settings)` is its default cut when a search gives no maxResults."""

    name: str
    open: Callable[[BackendContext], SearchManager]
    description: str = ""
    config_model: type[BaseModel] | None = None  # validates `memory.<name>`
    fallback: Callable[[BackendContext], FallbackPolicy | None] | None = None
    # The hits a search returns when maxResults is not given (a sidecar with its own cap says so).
    default_max_results: Callable[[ResolvedConfig], int] | None = None


@dataclass(frozen=True)
class ProviderPlugin:
    """An embedding provider. `create(ms, primary=…, environ=…, **kw)` returns an
    `EmbeddingProvider` after its cheap setup checks (no model load, no network), or raises
    `ProviderUnavailableError` with the fix. `auto_rank`: its place in `provider: "auto"` (lower
    first; None: never auto-selected). `preferred(ms)`: auto tries it before all others."""

    name: str
    create: Callable[..., EmbeddingProvider]
    description: str = ""
    auto_rank: int | None = None
    preferred: Callable[[MemorySearchConfig], bool] | None = None
    config_model: type[BaseModel] | None = None  # validates `memorySearch.<name>`, passed to create as `config=`


@dataclass(frozen=True)
class RerankerPlugin:
    """A reranker for `memorySearch.query.rerank.provider`. `create(config, environ=…, **kw)`
    returns a `Reranker` (cheap: no model load, no network)."""

    name: str
    create: Callable[..., Reranker]
    description: str = ""
    config_model: type[BaseModel] | None = (
        None  # validates `memorySearch.query.rerank.<name>`, passed to create as `config=`
    )
