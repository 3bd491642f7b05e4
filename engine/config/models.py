"""pydantic models for the config keys, named as in the reference system so configs carry over.

These models validate *types and allowed values*. Clamping and normalisation (weights summed to 1,
candidateMultiplier 1..20, overlap < tokens, …) happen in `resolve.py`, after the per-agent merge,
exactly as the reference does it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic.alias_generators import to_camel

from ..durations import check_duration

__all__ = [
    "ResidentHelperConfig",
    "PROVIDER_IDS",
    "MemorySearchConfig",
    "RerankConfig",
    "MemorySearchQmdConfig",
    "MemoryConfig",
    "QmdConfig",
    "PostgresConfig",
    "AgentEntry",
    "AgentDefaults",
    "AgentsConfig",
    "MemsiftConfig",
]

PROVIDER_IDS = ("local", "openai", "gemini", "voyage", "mistral", "ollama")
# "none": keyword search only (FTS5 BM25, no embeddings), what the reference falls back to without a provider.
ProviderId = Literal["auto", "none", "local", "openai", "gemini", "voyage", "mistral", "ollama"]
FallbackId = Literal["none", "local", "openai", "gemini", "voyage", "mistral", "ollama"]


class _Strict(BaseModel):
    """Keys are camelCase in files; unknown keys are errors inside memsift's own sections."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class BatchConfig(_Strict):
    enabled: bool = False
    wait: bool = True
    concurrency: int = 2
    poll_interval_ms: int = 2000
    timeout_minutes: float = 60


class RemoteConfig(_Strict):
    base_url: str | None = None
    api_key: SecretStr | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    batch: BatchConfig = Field(default_factory=BatchConfig)


class VectorStoreConfig(_Strict):
    enabled: bool = True
    extension_path: str | None = None
    # Above this many chunks, a 1-bit first pass in memory and exact rescoring of `rescorePool`
    # candidates replace sqlite-vec's full scan (backends/builtin/vector_memory.py).
    quantize_above: int = Field(default=100_000, ge=0)
    rescore_pool: int = Field(default=1000, ge=10, le=100_000)


class FtsStoreConfig(_Strict):
    tokenizer: Literal["unicode61", "trigram"] = "unicode61"


class StoreConfig(_Strict):
    path: str | None = None
    vector: VectorStoreConfig = Field(default_factory=VectorStoreConfig)
    fts: FtsStoreConfig = Field(default_factory=FtsStoreConfig)


class ChunkingConfig(_Strict):
    """`tokens` / `overlap` are the reference's keys; `strategy` is memsift's. Unset, a chunk is
    what a hit shows (`evidence`, 175 tokens = the 700-character snippet, no overlap); setting
    `tokens` or `overlap` selects the reference's chunker (400 / 80 unless given), as configs
    carried over expect. Normalised in load.py."""

    tokens: int | None = None
    overlap: int | None = None
    strategy: Literal["evidence", "reference"] | None = None


class SessionSyncConfig(_Strict):
    delta_bytes: float = 100_000
    delta_messages: float = 50
    post_compaction_force: bool = True


class SyncConfig(_Strict):
    on_session_start: bool = True
    on_search: bool = True
    watch: bool = True
    watch_debounce_ms: int = 1500
    interval_minutes: float = 0
    sessions: SessionSyncConfig = Field(default_factory=SessionSyncConfig)


class MmrConfig(_Strict):
    enabled: bool = False
    lambda_: float = Field(default=0.7, alias="lambda")


class TemporalDecayConfig(_Strict):
    enabled: bool = False
    half_life_days: float = 30
    # "bounded" (memsift): score × (1 − weight + weight · 0.5^(age/halfLife)), age counted from the
    # newest dated hit of the search; "reference": score × 0.5^(age/halfLife), age from now.
    formula: Literal["bounded", "reference"] = "bounded"
    weight: float = Field(default=0.1, ge=0.0, le=1.0)  # the share of a score decay may take


class HybridConfig(_Strict):
    enabled: bool = True
    vector_weight: float = 0.7
    text_weight: float = 0.3
    candidate_multiplier: float = 4
    mmr: MmrConfig = Field(default_factory=MmrConfig)
    temporal_decay: TemporalDecayConfig = Field(default_factory=TemporalDecayConfig)


class TimeConfig(_Strict):
    """Time expressions in a question ("last Tuesday", "in November 2022") favour hits of that time."""

    enabled: bool = True
    weight: float = Field(default=0.5, ge=0.0, le=1.0)  # a dated hit outside the window loses up to this share of its score
    hemisphere: Literal["northern", "southern"] = "northern"  # which months "last summer" names


class RerankRemoteConfig(_Strict):
    """`query.rerank.remote`: the reranker's endpoint and key, read like `memorySearch.remote`."""

    base_url: str | None = None
    api_key: SecretStr | None = None
    headers: dict[str, str] = Field(default_factory=dict)


RerankProviderId = Literal["local", "voyage", "cohere", "jina", "endpoint"]


class RerankConfig(_Strict):
    """`query.rerank`: an optional stage that rescores the top `candidates` hits (engine/rerank/)."""

    enabled: bool = False
    provider: RerankProviderId = "local"
    model: str = ""
    model_path: str | None = None  # local: a folder holding model.onnx and tokenizer.json
    candidates: int = Field(default=30, ge=1, le=200)
    weight: float = Field(default=0.5, ge=0.0, le=1.0)  # final = (1 - weight) * hybrid + weight * rerank
    timeout_ms: float = Field(default=3000, gt=0)  # the stage's budget per search; past it the order is kept
    max_tokens: int = Field(default=256, ge=16, le=8192)  # local: query + chunk tokens; cohere: per document
    batch_size: int = Field(default=16, ge=1, le=1000)  # local: pairs per onnxruntime call; remote: documents per request
    remote: RerankRemoteConfig = Field(default_factory=RerankRemoteConfig)


class RankerConfig(_Strict):
    """`query.ranker`: the shipped evidence ranker (engine/rerank/evidence.py), which reorders the
    backend's top `candidates` hybrid hits by what they show. On by default; offline, no download."""

    enabled: bool = True
    candidates: int = Field(default=40, ge=1, le=200)


class QueryConfig(_Strict):
    max_results: int = 6
    min_score: float = 0.35
    hybrid: HybridConfig = Field(default_factory=HybridConfig)
    time: TimeConfig = Field(default_factory=TimeConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    ranker: RankerConfig = Field(default_factory=RankerConfig)
    # Bounded lexical expansion of the keyword query (engine/search/expansion.py): "inflections"
    # (bought → buy, choose → chose), "synonyms" (and a verb's words of its commonest sense), "off".
    expansion: Literal["off", "inflections", "synonyms"] = "synonyms"

    @field_validator("max_results")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be at least 1")
        return v


class CacheConfig(_Strict):
    enabled: bool = True
    max_entries: float | None = None


class MultimodalConfig(_Strict):
    enabled: bool = False
    # None (unset) means both when enabled, as in the reference; "all" also inside the list.
    modalities: list[Literal["image", "audio", "all"]] | Literal["all"] | None = None
    max_file_bytes: int = 10 * 1024 * 1024


class LocalConfig(_Strict):
    model_path: str | None = None
    model_cache_dir: str | None = None


class ExperimentalConfig(_Strict):
    session_memory: bool = False


class QmdPath(_Strict):
    path: str
    name: str | None = None
    pattern: str = "**/*.md"


class MemorySearchQmdConfig(_Strict):
    """`memorySearch.qmd`: collections one agent (or every agent, under defaults) adds to QMD."""

    extra_collections: list[QmdPath] = Field(default_factory=list)


class MemorySearchConfig(_Strict):
    enabled: bool = True
    provider: ProviderId = "auto"
    fallback: FallbackId = "none"
    model: str = ""
    output_dimensionality: Literal[768, 1536, 3072] | None = None
    remote: RemoteConfig = Field(default_factory=RemoteConfig)
    sources: list[Literal["memory", "sessions"]] = Field(default_factory=lambda: ["memory"])
    extra_paths: list[str] = Field(default_factory=list)
    store: StoreConfig = Field(default_factory=StoreConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    sync: SyncConfig = Field(default_factory=SyncConfig)
    query: QueryConfig = Field(default_factory=QueryConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    multimodal: MultimodalConfig = Field(default_factory=MultimodalConfig)
    local: LocalConfig = Field(default_factory=LocalConfig)
    experimental: ExperimentalConfig = Field(default_factory=ExperimentalConfig)
    qmd: MemorySearchQmdConfig = Field(default_factory=MemorySearchQmdConfig)


# --- memory (global) -------------------------------------------------------------------------


class QmdSessions(_Strict):
    enabled: bool = False
    export_dir: str | None = None
    retention_days: float | None = None


class QmdUpdate(_Strict):
    interval: str | float = "5m"
    debounce_ms: float = 15_000
    on_boot: bool = True
    wait_for_boot_sync: bool = False
    embed_interval: str | float = "60m"
    command_timeout_ms: float = 30_000
    update_timeout_ms: float = 120_000
    embed_timeout_ms: float = 120_000

    @field_validator("interval", "embed_interval", mode="before")
    @classmethod
    def _duration(cls, v: object) -> object:
        # The reference silently uses the default for an unparseable duration; memsift refuses it,
        # so a typo such as "banana" or "1h 30m" is seen at once instead of a schedule it did not mean.
        if isinstance(v, (str, int, float)):
            check_duration(v)
        return v


class QmdLimits(_Strict):
    max_results: float = 6
    max_snippet_chars: float = 700
    max_injected_chars: float = 4000
    timeout_ms: float = 4000


class ScopeMatch(_Strict):
    channel: str | None = None
    chat_type: Literal["direct", "group", "channel", "dm"] | None = None
    key_prefix: str | None = None
    raw_key_prefix: str | None = None


class ScopeRule(_Strict):
    action: Literal["allow", "deny"]
    match: ScopeMatch | None = None


class ScopeConfig(_Strict):
    default: Literal["allow", "deny"] | None = None
    rules: list[ScopeRule] = Field(default_factory=list)


class McporterConfig(_Strict):
    enabled: bool = False
    server_name: str = "qmd"
    start_daemon: bool = True


def _default_scope() -> ScopeConfig:
    # The reference's 2026-04-13 default: deny, but allow direct chats and channels.
    return ScopeConfig(
        default="deny",
        rules=[
            ScopeRule(action="allow", match=ScopeMatch(chat_type="direct")),
            ScopeRule(action="allow", match=ScopeMatch(chat_type="channel")),
        ],
    )


class QmdConfig(_Strict):
    command: str = "qmd"
    search_mode: Literal["search", "vsearch", "query"] = "search"
    search_tool: str | None = None
    include_default_memory: bool = True
    paths: list[QmdPath] = Field(default_factory=list)
    sessions: QmdSessions = Field(default_factory=QmdSessions)
    update: QmdUpdate = Field(default_factory=QmdUpdate)
    limits: QmdLimits = Field(default_factory=QmdLimits)
    mcporter: McporterConfig = Field(default_factory=McporterConfig)
    scope: ScopeConfig = Field(default_factory=_default_scope)
    fallback: Literal["builtin", "none"] = "builtin"


class PostgresPool(_Strict):
    min_size: int = Field(default=1, ge=0, le=100)
    max_size: int = Field(default=4, ge=1, le=100)


class PostgresConfig(_Strict):
    """`memory.postgres`: one shared database for many memsift processes (backends/postgres)."""

    dsn: SecretStr | None = None  # else $MEMSIFT_POSTGRES_DSN
    read_dsn: SecretStr | None = None  # a read replica for searches; writes and read-your-writes use `dsn`
    pool: PostgresPool = Field(default_factory=PostgresPool)
    connect_timeout_ms: int = Field(default=5000, ge=100)
    statement_timeout_ms: int = Field(default=10000, ge=100)
    lock_timeout_ms: int = Field(default=60000, ge=100)  # how long a sync waits for another writer of the agent
    replica_wait_ms: int = Field(default=1000, ge=0)  # read-your-writes: wait this long for the replica, then read the primary
    fallback: Literal["builtin", "none"] = "none"


class ResidentHelperConfig(_Strict):
    """`memory.residentHelper`: the first `memsift search` starts a helper that answers later ones."""

    enabled: bool = True
    idle_timeout: str = "15m"  # the helper exits after this long without a search

    @field_validator("idle_timeout")
    @classmethod
    def _duration(cls, v: str) -> str:
        check_duration(v)
        return v


class MemoryConfig(_Strict):
    backend: Literal["builtin", "qmd", "postgres"] = "builtin"
    citations: Literal["auto", "on", "off"] = "auto"
    qmd: QmdConfig = Field(default_factory=QmdConfig)
    postgres: PostgresConfig = Field(default_factory=PostgresConfig)
    resident_helper: ResidentHelperConfig = Field(default_factory=ResidentHelperConfig)


# --- agents ----------------------------------------------------------------------------------


class _Tolerant(BaseModel):
    """Agent entries carry many reference keys memsift does not use; those are ignored."""

    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True)


class AgentDefaults(_Tolerant):
    workspace: str | None = None
    memory_search: MemorySearchConfig | None = None


class AgentEntry(_Tolerant):
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    default: bool = False
    workspace: str | None = None
    memory_search: MemorySearchConfig | None = None


class AgentsConfig(_Strict):
    defaults: AgentDefaults = Field(default_factory=AgentDefaults)
    list_: list[AgentEntry] = Field(default_factory=list, alias="list")


class MemsiftConfig(_Strict):
    """The whole file. `stateDir` is memsift's own key (where indexes live)."""

    state_dir: str | None = None
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
