"""pydantic models for the config keys, named as in the reference system so configs carry over.

These models validate *types and allowed values*. Clamping and normalisation (weights summed to 1,
candidateMultiplier 1..20, overlap < tokens, …) happen in `load.py` (`normalise_memory_search`), after the per-agent
merge, exactly as the reference does it.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

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
    "KeyedAgentEntry",
    "AgentMemory",
    "SystemAgent",
    "AgentDefaults",
    "AgentsConfig",
    "MemsiftConfig",
]

PROVIDER_IDS = ("local", "openai", "gemini", "voyage", "mistral", "ollama")
# "none": keyword search only (FTS5 BM25, no embeddings), what the reference falls back to without a provider.
# Provider and reranker names are memsift's own or an installed plugin's (engine/plugins): checked
# against the registry when one is built, with the installed names in the error.
_PLUGIN_NAME = r"^[a-z][a-z0-9_-]*$"


def _registered(kind: str, *special: str):  # noqa: ANN202
    def check(name: str) -> str:
        if name not in special:
            from ..plugins.registry import check_name  # noqa: PLC0415

            check_name(kind, name)
        return name

    return AfterValidator(check)


ProviderId = Annotated[str, Field(pattern=_PLUGIN_NAME), _registered("provider", "auto", "none")]
FallbackId = Annotated[str, Field(pattern=_PLUGIN_NAME), _registered("provider", "none")]
BackendId = Annotated[str, Field(pattern=_PLUGIN_NAME), _registered("backend")]


class _Strict(BaseModel):
    """Keys are camelCase in files; unknown keys are errors inside memsift's own sections."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class _WithPluginBlocks(_Strict):
    """A section where a plugin keeps its settings under its name (`memory.lancedb`,
    `memorySearch.<provider>`, `query.rerank.<reranker>`), validated by the plugin's own model
    when it is used (engine/config/plugin_blocks.py). A key that is a near miss of one of ours, or
    that is not an object, is still a mistake."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)

    @model_validator(mode="after")
    def _plugin_blocks(self):  # noqa: ANN202
        ours = sorted(f.alias or n for n, f in type(self).model_fields.items())
        for key, value in (self.model_extra or {}).items():
            hint = difflib.get_close_matches(key, ours, n=1, cutoff=0.8)
            if hint or not isinstance(value, dict):
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise PydanticCustomError(
                    "plugin_block",
                    "unknown key{did}; allowed keys here: {ours}, or a plugin's settings (an object) under its name",
                    {"key": key, "did": did, "ours": ", ".join(ours)},
                )
        return self


class BatchConfig(_Strict):
    enabled: bool = Field(
        False,
        description="Embed a full index through the provider's batch API (openai, gemini) instead of live calls.",
    )
    wait: bool = Field(
        True, description="Wait for a submitted batch to finish; false: an unfinished job counts as a failure."
    )
    concurrency: int = Field(2, description="Batch jobs in flight at once.")
    poll_interval_ms: int = Field(2000, description="How often a running batch job is polled, in milliseconds.")
    timeout_minutes: float = Field(
        60,
        description="How long a batch job may run before it counts as failed (after 2 failures batching is off and "
                    "plain requests are used).",
    )


class RemoteConfig(_Strict):
    base_url: str | None = Field(
        None,
        description="The provider's endpoint (an OpenAI-compatible server, a proxy); the provider's own URL when "
                    "unset.",
    )
    api_key: SecretStr | None = Field(
        None,
        description="The API key, or the name of an environment variable holding it; else the provider's usual "
                    "variable (OPENAI_API_KEY, …). Never logged.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Extra HTTP headers sent to the provider; every value is masked in logs and errors.",
    )
    batch: BatchConfig = Field(
        default_factory=BatchConfig,
        description="The provider's batch API for large indexing runs.",
    )

    @field_validator("api_key", mode="before")
    @classmethod
    def _api_key_ref(cls, value: object) -> object:
        return _secret_ref(value)


class VectorStoreConfig(_Strict):
    enabled: bool = Field(True, description="Store and search vectors (sqlite-vec); false: keyword search only.")
    extension_path: str | None = Field(
        None,
        description="A sqlite-vec loadable extension to use instead of the one in the sqlite-vec wheel.",
    )
    # Above this many chunks, a 1-bit first pass in memory and exact rescoring of `rescorePool`
    # candidates replace sqlite-vec's full scan (backends/builtin/vector_memory.py).
    quantize_above: int = Field(
        default=100_000,
        ge=0,
        description="Above this many chunks, vectors are held in memory as 1-bit codes and the nearest are rescored "
                    "exactly.",
    )
    rescore_pool: int = Field(
        default=1000, ge=10, le=100_000,
        description="How many nearest 1-bit codes are rescored from the stored floats.",
    )


class FtsStoreConfig(_Strict):
    tokenizer: Literal["unicode61", "trigram"] = Field(
        "unicode61",
        description="The FTS5 tokenizer: unicode61 (Porter stemming, diacritics folded, CJK per character) or trigram "
                    "(substrings, 2-character CJK names).",
    )


class StoreConfig(_Strict):
    path: str | None = Field(
        None,
        description="The index file; `{agentId}` is substituted and `~` expanded. Default: "
                    "`<stateDir>/memory/<agentId>-<8 hex>.sqlite`, one per workspace and set of files.",
    )
    vector: VectorStoreConfig = Field(default_factory=VectorStoreConfig, description="The vector side of the index.")
    fts: FtsStoreConfig = Field(default_factory=FtsStoreConfig, description="The keyword side of the index.")


class ChunkingConfig(_Strict):
    """`tokens` / `overlap` are the reference's keys; `strategy` is memsift's. Unset, a chunk is
    what a hit shows (`evidence`, 175 tokens = the 700-character snippet, no overlap); setting
    `tokens` or `overlap` selects the reference's chunker (400 / 80 unless given), as configs
    carried over expect. Normalised in load.py."""

    tokens: int | None = Field(
        None,
        description="Tokens a chunk (the reference's key): 175 with `evidence`, 400 with `reference`.",
    )
    overlap: int | None = Field(
        None,
        description="Tokens shared by neighbouring chunks (reference chunker only): 0 with `evidence`, 80 with "
                    "`reference`.",
    )
    strategy: Literal["evidence", "reference"] | None = Field(
        None,
        description="`evidence` (a chunk is what a hit shows) unless `tokens` or `overlap` is set, which selects "
                    "`reference`.",
    )


class SessionSyncConfig(_Strict):
    delta_bytes: float = Field(
        100_000,
        description="Transcript growth in bytes that triggers a sync of session memory (0: any growth).",
    )
    delta_messages: float = Field(
        50,
        description="Transcript growth in messages that triggers a sync of session memory (0: any growth).",
    )
    post_compaction_force: bool = Field(
        True,
        description="The reference's forced sync after compaction: accepted so configs carry over (memsift syncs on "
                    "growth).",
    )


class SyncConfig(_Strict):
    on_session_start: bool = Field(
        True,
        description="A search under a session key not seen before first syncs changed files.",
    )
    on_search: bool = Field(True, description="Every search first syncs changed files (within a 2 s budget).")
    watch: bool = Field(True, description="`memsift watch` follows file changes.")
    watch_debounce_ms: int = Field(
        1500,
        description="How long `watch` waits for changes to settle before syncing, in milliseconds.",
    )
    interval_minutes: float = Field(0, description="A periodic full sync in `memsift watch`, in minutes (0: off).")
    sessions: SessionSyncConfig = Field(
        default_factory=SessionSyncConfig,
        description="When session transcripts are synced.",
    )


class MmrConfig(_Strict):
    enabled: bool = Field(
        False,
        description="Maximal marginal relevance: trade some relevance for hits that say different things.",
    )
    lambda_: float = Field(
        default=0.7, alias="lambda",
        description="MMR's balance, clamped to [0, 1]: 1 is relevance only, 0 diversity only.",
    )


class TemporalDecayConfig(_Strict):
    enabled: bool = Field(False, description="Older dated hits lose some of their score.")
    half_life_days: float = Field(30, description="Days after which the decay factor halves (at least 1).")
    # "bounded" (memsift): score × (1 − weight + weight · 0.5^(age/halfLife)), age counted from the
    # newest dated hit of the search; "reference": score × 0.5^(age/halfLife), age from now.
    formula: Literal["bounded", "reference"] = Field(
        "bounded",
        description="`bounded`: score × (1 − weight + weight·0.5^(age/halfLife)), age from the newest dated hit; "
                    "`reference`: score × 0.5^(age/halfLife), age from now.",
    )
    # the share of a score decay may take
    weight: float = Field(
        default=0.1, ge=0.0, le=1.0,
        description="The share of a score the `bounded` decay may take.",
    )


class HybridConfig(_Strict):
    enabled: bool = Field(
        True,
        description="Merge keyword (BM25) and vector scores; false: the vector side alone when there is one (`--mode "
                    "hybrid` still merges).",
    )
    vector_weight: float = Field(
        0.7,
        description="The vector score's weight; clamped to [0, 1], then both weights are divided by their sum.",
    )
    text_weight: float = Field(
        0.3,
        description="The keyword score's weight; clamped to [0, 1], then both weights are divided by their sum.",
    )
    candidate_multiplier: float = Field(
        4,
        description="Candidates gathered on each side per hit wanted; floored, clamped to 1..20, pool capped at 200.",
    )
    mmr: MmrConfig = Field(default_factory=MmrConfig, description="Diversity of the final cut.")
    temporal_decay: TemporalDecayConfig = Field(
        default_factory=TemporalDecayConfig,
        description="Recency: older dated hits lose some score.",
    )


class TimeConfig(_Strict):
    """Time expressions in a question ("last Tuesday", "in November 2022") favour hits of that time."""

    enabled: bool = Field(True, description="Times named in a question favour hits of those days.")
    # a dated hit outside the window loses up to this share of its score
    weight: float = Field(
        default=0.7, ge=0.0, le=1.0,
        description="The share of its score a dated hit outside the named window may lose.",
    )
    # which months "last summer" names
    hemisphere: Literal["northern", "southern"] = Field(
        "northern",
        description='Which months a season names ("last summer": June–August, or December–February).',
    )


class RerankRemoteConfig(_Strict):
    """`query.rerank.remote`: the reranker's endpoint and key, read like `memorySearch.remote`."""

    base_url: str | None = Field(None, description="The reranker's endpoint (required for provider `endpoint`).")
    api_key: SecretStr | None = Field(
        None,
        description="The reranker's API key, or the name of an environment variable holding it. Never logged.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Extra HTTP headers for the reranker; every value is masked.",
    )

    @field_validator("api_key", mode="before")
    @classmethod
    def _api_key_ref(cls, value: object) -> object:
        return _secret_ref(value)


RerankProviderId = Annotated[str, Field(pattern=_PLUGIN_NAME), _registered("reranker")]


class RerankConfig(_WithPluginBlocks):
    """`query.rerank`: an optional stage that rescores the top `candidates` hits (engine/rerank/)."""

    enabled: bool = Field(False, description="Rescore the top hits with a cross-encoder.")
    provider: RerankProviderId = Field(
        "local",
        description="`local` (an ONNX cross-encoder on disk), `voyage`, `cohere`, `jina`, `endpoint` (any server "
                    "speaking the rerank API), or an installed plugin's reranker.",
    )
    model: str = Field("", description="The reranker model; the provider's default when empty.")
    # local: a folder holding model.onnx and tokenizer.json
    model_path: str | None = Field(
        None,
        description="`local`: a folder holding `model.onnx` and `tokenizer.json`; `~` expanded.",
    )
    candidates: int = Field(default=30, ge=1, le=200, description="How many top hits are rescored.")
    # final = (1 - weight) * hybrid + weight * rerank
    weight: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="final = (1 − weight) × hybrid + weight × rerank.",
    )
    # the stage's budget per search; past it the order is kept
    timeout_ms: float = Field(
        default=3000, gt=0,
        description="The stage's budget per search in milliseconds; past it the hybrid order is kept (and said).",
    )
    # local: query + chunk tokens; cohere: per document
    max_tokens: int = Field(
        default=256, ge=16, le=8192,
        description="`local`: query + chunk tokens per pair; `cohere`: tokens per document.",
    )
    # local: pairs per onnxruntime call; remote: documents per request
    batch_size: int = Field(
        default=16, ge=1, le=1000,
        description="`local`: pairs per onnxruntime call; remote: documents per request.",
    )
    remote: RerankRemoteConfig = Field(
        default_factory=RerankRemoteConfig,
        description="The reranker's endpoint and key, read like `memorySearch.remote`.",
    )


class RankerConfig(_Strict):
    """`query.ranker`: the shipped evidence ranker (engine/rerank/evidence.py), which reorders the
    backend's top `candidates` hybrid hits by what they show. On by default; offline, no download."""

    enabled: bool = Field(
        True,
        description="Reorder hybrid hits of conversation memory with the shipped evidence ranker.",
    )
    candidates: int = Field(
        default=40, ge=1, le=200,
        description="How many of the backend's top hits the ranker reorders.",
    )


class QueryConfig(_Strict):
    max_results: int = Field(6, description="Hits a search returns (at least 1); `-n` overrides.")
    min_score: float = Field(
        0.35,
        description="Hits scoring below this are dropped (clamped to [0, 1]); keyword hits with strong evidence may "
                    "fill free slots, marked `rescued`.",
    )
    hybrid: HybridConfig = Field(default_factory=HybridConfig, description="How keyword and vector scores merge.")
    time: TimeConfig = Field(default_factory=TimeConfig, description="Time-aware search.")
    rerank: RerankConfig = Field(default_factory=RerankConfig, description="The optional rerank stage.")
    ranker: RankerConfig = Field(default_factory=RankerConfig, description="The shipped evidence ranker.")
    # Bounded lexical expansion of the keyword query (engine/search/expansion.py): "inflections"
    # (bought → buy, choose → chose), "synonyms" (and a verb's words of its commonest sense), "off".
    expansion: Literal["off", "inflections", "synonyms"] = Field(
        "synonyms",
        description="Bounded lexical expansion: `inflections` (bought → buy, choose → chose), `synonyms` (also a "
                    "verb's words of its commonest sense), or `off`.",
    )

    @field_validator("max_results")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be at least 1")
        return v


class CacheConfig(_Strict):
    enabled: bool = Field(True, description="Cache embeddings by text, so unchanged chunks are never embedded twice.")
    max_entries: float | None = Field(
        None,
        description="At most this many cached embeddings (the least recently written go first); unbounded when unset.",
    )


class MultimodalConfig(_Strict):
    enabled: bool = Field(
        False,
        description="Index images and audio in extra paths (needs provider gemini with `gemini-embedding-2-preview` "
                    "and no fallback).",
    )
    # None (unset) means both when enabled, as in the reference; "all" also inside the list.
    modalities: list[Literal["image", "audio", "all"]] | Literal["all"] | None = Field(
        None,
        description='Which kinds of files: `["image", "audio"]`, `"all"` or `["all"]`; both when unset.',
    )
    max_file_bytes: int = Field(10 * 1024 * 1024, description="Larger image and audio files are skipped.")


class LocalConfig(_Strict):
    model_path: str | None = Field(
        None,
        description="A local `.onnx` file, or a folder with `model.onnx` and `tokenizer.json`, instead of the bundled "
                    "MiniLM; download addresses are refused.",
    )
    model_cache_dir: str | None = Field(
        None,
        description="Where the int8 graph of the bundled model is built once; default "
                    "`$XDG_CACHE_HOME/memsift/models`.",
    )


class ExperimentalConfig(_Strict):
    session_memory: bool = Field(
        False,
        description="Allow `sources: [\"sessions\"]`: index the agent's session transcripts.",
    )


class QmdPath(_Strict):
    path: str = Field(description="A folder QMD indexes as a collection.")
    name: str | None = Field(None, description="The collection's name; derived from the path when unset.")
    pattern: str = Field("**/*.md", description="Which files of the folder, as a glob.")


class MemorySearchQmdConfig(_Strict):
    """`memorySearch.qmd`: collections one agent (or every agent, under defaults) adds to QMD."""

    extra_collections: list[QmdPath] = Field(
        default_factory=list,
        description="More folders this agent's QMD searches.",
    )


# OpenClaw 2026.9's name for an OpenAI-compatible endpoint is memsift's `openai` provider.
PROVIDER_ALIASES = {"openai-compatible": "openai"}
# OpenClaw's `extraPaths: [{path, pattern}]`: these patterns mean what memsift indexes anyway.
_EVERY_MD = frozenset({None, "", "**/*.md", "*.md", "**/*"})


def _extra_path(value: object) -> object:
    """An extra path as memsift keeps it (a string), from OpenClaw's object form."""
    if not isinstance(value, dict):
        return value
    path, pattern = value.get("path"), value.get("pattern")
    if set(value) - {"path", "pattern"} or not isinstance(path, str):
        raise ValueError("an extra path is a string or {path, pattern}")
    if pattern not in _EVERY_MD:
        sub = str(pattern).split("/**", 1)[0].split("*", 1)[0].rstrip("/")
        hint = f"; list {path.rstrip('/') + '/' + sub!r} as the extra path instead" if sub else ""
        raise ValueError(f"pattern {pattern!r}: memsift indexes every .md file under an extra path{hint}")
    return path


def _secret_ref(value: object) -> object:
    """OpenClaw's secret reference `{source: "env", provider, id}` is the variable's name, which
    memsift reads as such; file, exec and store references belong to OpenClaw's secret providers."""
    if not isinstance(value, dict):
        return value
    if value.get("source") == "env" and isinstance(value.get("id"), str):
        return value["id"]
    raise ValueError(f"a {value.get('source')!r} secret reference is read by OpenClaw's secret providers only; "
                     "give memsift the key, or the name of an environment variable holding it")


class MemorySearchConfig(_WithPluginBlocks):
    enabled: bool = Field(True, description="Memory search for this agent; false: the CLI refuses to search (exit 3).")
    provider: ProviderId = Field(
        "auto",
        description="The embedding provider: `auto` (a configured local model, then providers with keys, else the "
                    "bundled model), `local`, `openai`, `gemini`, `voyage`, `mistral`, `ollama`, an installed "
                    "plugin's provider, or `none` (keyword search only).",
    )
    fallback: FallbackId = Field(
        "none", description="The provider used when the primary one fails (`none`: no fallback)."
    )
    model: str = Field("", description="The provider's embedding model; its default when empty.")
    output_dimensionality: Literal[768, 1536, 3072] | None = Field(
        None,
        description="Gemini: the vector size asked for.",
    )
    remote: RemoteConfig = Field(
        default_factory=RemoteConfig,
        description="The remote provider's endpoint, key and headers.",
    )
    sources: list[Literal["memory", "sessions"]] = Field(
        default_factory=lambda: ["memory"],  # type: ignore[arg-type]  # a list of that literal
        description="What is indexed: `memory` files, and `sessions` transcripts (with `experimental.sessionMemory`).",
    )
    extra_paths: list[str] = Field(
        default_factory=list,
        description="More Markdown files or folders to index, relative to the workspace or absolute; trimmed and "
                    "de-duplicated. OpenClaw's object form `{path}` is read too (a `pattern` other than every `.md` "
                    "file is refused).",
    )
    remember_across_conversations: bool | None = Field(
        None,
        description='OpenClaw 2026.9\'s cross-conversation transcript recall: accepted so configs carry over; memsift '
                    'searches the memory files (and `sources: ["sessions"]` transcripts), not other conversations.',
    )
    input_type: str | None = Field(
        None, description="OpenClaw 2026.9's embedding input type: accepted so configs carry over; not used."
    )
    query_input_type: str | None = Field(
        None, description="OpenClaw 2026.9's query input type: accepted so configs carry over; not used."
    )
    document_input_type: str | None = Field(
        None, description="OpenClaw 2026.9's document input type: accepted so configs carry over; not used."
    )

    @field_validator("extra_paths", mode="before")
    @classmethod
    def _extra_path_objects(cls, value: object) -> object:
        return [_extra_path(v) for v in value] if isinstance(value, list) else value

    @field_validator("provider", "fallback", mode="before")
    @classmethod
    def _provider_aliases(cls, value: object) -> object:
        return PROVIDER_ALIASES.get(value, value) if isinstance(value, str) else value
    store: StoreConfig = Field(default_factory=StoreConfig, description="Where and how the index is stored.")
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig, description="How files are cut into chunks.")
    sync: SyncConfig = Field(default_factory=SyncConfig, description="When changed files are synced into the index.")
    query: QueryConfig = Field(default_factory=QueryConfig, description="How a search ranks.")
    cache: CacheConfig = Field(default_factory=CacheConfig, description="The embedding cache.")
    multimodal: MultimodalConfig = Field(
        default_factory=MultimodalConfig,
        description="Images and audio in extra paths.",
    )
    local: LocalConfig = Field(default_factory=LocalConfig, description="The local embedding model.")
    experimental: ExperimentalConfig = Field(
        default_factory=ExperimentalConfig,
        description="Features behind a switch.",
    )
    qmd: MemorySearchQmdConfig = Field(default_factory=MemorySearchQmdConfig, description="Per-agent QMD collections.")


# --- memory (global) -------------------------------------------------------------------------


class QmdSessions(_Strict):
    enabled: bool = Field(False, description="Export session transcripts as Markdown for QMD to index.")
    export_dir: str | None = Field(
        None,
        description="Where exported sessions are written (memsift's own folder under the QMD home when unset; never "
                    "over memory files).",
    )
    retention_days: float | None = Field(
        None,
        description="Exported sessions older than this are removed; kept when unset.",
    )


class QmdUpdate(_Strict):
    interval: str | float = Field(
        "5m",
        description="How often `qmd update` runs (`30s`, `5m`, `1h30m`, a number of minutes, `0s` for never).",
    )
    debounce_ms: float = Field(15_000, description="The shortest gap between two updates, in milliseconds.")
    on_boot: bool = Field(True, description="Update the collections when the backend starts.")
    wait_for_boot_sync: bool = Field(False, description="The first search waits for the boot update.")
    embed_interval: str | float = Field("60m", description="How often `qmd embed` runs (a duration as for `interval`).")
    command_timeout_ms: float = Field(30_000, description="Budget of a `qmd collection` command, in milliseconds.")
    update_timeout_ms: float = Field(120_000, description="Budget of `qmd update`, in milliseconds.")
    embed_timeout_ms: float = Field(120_000, description="Budget of `qmd embed`, in milliseconds.")

    @field_validator("interval", "embed_interval", mode="before")
    @classmethod
    def _duration(cls, v: object) -> object:
        # The reference silently uses the default for an unparseable duration; memsift refuses it,
        # so a typo such as "banana" or "1h 30m" is seen at once instead of a schedule it did not mean.
        if isinstance(v, (str, int, float)):
            check_duration(v)
        return v


class QmdLimits(_Strict):
    max_results: float = Field(6, description="Hits asked of QMD.")
    max_snippet_chars: float = Field(700, description="A hit's snippet is cut to this many characters.")
    max_injected_chars: float = Field(
        4000,
        description="All snippets of one answer together stay under this many characters.",
    )
    timeout_ms: float = Field(
        4000,
        description="Budget of one QMD search, in milliseconds; past it the fallback answers.",
    )


class ScopeMatch(_Strict):
    channel: str | None = Field(None, description="The session key's channel (`telegram`, `discord`, …).")
    chat_type: Literal["direct", "group", "channel", "dm"] | None = Field(
        None,
        description="The session key's chat type (`dm` is `direct`).",
    )
    key_prefix: str | None = Field(None, description="A prefix of the normalised session key.")
    raw_key_prefix: str | None = Field(None, description="A prefix of the session key as given.")


class ScopeRule(_Strict):
    action: Literal["allow", "deny"] = Field(description="What a matching session key gets.")
    match: ScopeMatch | None = Field(None, description="Which session keys the rule covers; every key when unset.")


class ScopeConfig(_Strict):
    default: Literal["allow", "deny"] | None = Field(None, description="What a session key no rule matches gets.")
    rules: list[ScopeRule] = Field(default_factory=list, description="Rules in order; the first that matches decides.")


class McporterConfig(_Strict):
    enabled: bool = Field(
        False,
        description="The reference's mcporter bridge: accepted so configs carry over; memsift runs QMD directly.",
    )
    server_name: str = Field("qmd", description="The mcporter server name (accepted, not used).")
    start_daemon: bool = Field(True, description="Start the mcporter daemon (accepted, not used).")


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
    command: str = Field("qmd", description="The QMD command (a name on PATH or a path).")
    search_mode: Literal["search", "vsearch", "query"] = Field(
        "search",
        description="`search` (BM25), `vsearch` (vectors) or `query` (QMD's hybrid with its reranker).",
    )
    search_tool: str | None = Field(
        None, description="The reference's search tool name: accepted so configs carry over; `searchMode` decides."
    )
    include_default_memory: bool = Field(
        True,
        description="Index the workspace's `MEMORY.md` and `memory/` as collections.",
    )
    paths: list[QmdPath] = Field(
        default_factory=list,
        description="More folders indexed as collections, for every agent.",
    )
    sessions: QmdSessions = Field(default_factory=QmdSessions, description="Session transcripts exported for QMD.")
    update: QmdUpdate = Field(
        default_factory=QmdUpdate,
        description="When QMD updates and embeds, and the commands' budgets.",
    )
    limits: QmdLimits = Field(default_factory=QmdLimits, description="Limits of a QMD search.")
    mcporter: McporterConfig = Field(default_factory=McporterConfig, description="The mcporter bridge.")
    scope: ScopeConfig = Field(
        default_factory=_default_scope,
        description="Which chats may search memory: deny, except direct chats and channels, by default.",
    )
    fallback: Literal["builtin", "none"] = Field(
        "builtin",
        description="What answers when QMD fails: the builtin backend, or nothing (an error).",
    )


class PostgresPool(_Strict):
    min_size: int = Field(default=1, ge=0, le=100, description="Connections kept open.")
    max_size: int = Field(default=4, ge=1, le=100, description="At most this many connections.")


class PostgresConfig(_Strict):
    """`memory.postgres`: one shared database for many memsift processes (backends/postgres)."""

    # else $MEMSIFT_POSTGRES_DSN
    dsn: SecretStr | None = Field(
        None,
        description="The database (`postgresql://…`); else `$MEMSIFT_POSTGRES_DSN`. Its password is never logged.",
    )
    # a read replica for searches; writes and read-your-writes use `dsn`
    read_dsn: SecretStr | None = Field(
        None,
        description="A read replica for searches; writes and read-your-writes use `dsn`.",
    )
    pool: PostgresPool = Field(default_factory=PostgresPool, description="The connection pool.")
    connect_timeout_ms: int = Field(
        default=5000, ge=100,
        description="How long a connection attempt may take, in milliseconds.",
    )
    statement_timeout_ms: int = Field(
        default=10000, ge=100,
        description="Budget of one search statement, in milliseconds.",
    )
    # how long a sync waits for another writer of the agent
    lock_timeout_ms: int = Field(
        default=60000, ge=100,
        description="How long a sync waits for another writer of the same agent, in milliseconds.",
    )
    # read-your-writes: wait this long for the replica, then read the primary
    replica_wait_ms: int = Field(
        default=1000, ge=0,
        description="Read-your-writes: how long to wait for the replica to catch up before reading the primary.",
    )
    fallback: Literal["builtin", "none"] = Field(
        "none",
        description="What answers when the server is unreachable: the builtin backend, or nothing (exit 7).",
    )
    hnsw_above: int = Field(
        default=50_000,
        ge=0,
        description="An agent with at least this many chunk vectors gets its own HNSW index (pgvector, iterative "
                    "scan), "
        "built by its next sync; smaller agents are scanned exactly (about 10 ms per 10,000 vectors). 0: never.",
    )
    hnsw_ef_search: int = Field(
        default=800,
        ge=10,
        le=1000,
        description="HNSW search breadth (hnsw.ef_search) for an agent with its own index: higher is nearer exact, "
                    "slower "
        "(at a million chunks, real questions, the graph of half vectors: recall@10 0.96-0.97 at 400, "
        "0.978-0.995 at 800, 0.980-0.997 at 1000).",
    )


class ResidentHelperConfig(_Strict):
    """`memory.residentHelper`: the first `memsift search` starts a helper that answers later ones."""

    enabled: bool = Field(
        True,
        description="A cold `memsift search` starts a helper that keeps the index and model loaded and answers later "
                    "searches.",
    )
    max_helpers: int = Field(
        4,
        ge=1,
        le=64,
        description="At most this many helpers run per user (one per workspace and settings, each holding its index "
                    "and "
        "model); past it a search is answered cold and starts none.",
    )
    # the helper exits after this long without a search
    idle_timeout: str = Field(
        "15m",
        description="The helper exits after this long without a search.",
    )

    @field_validator("idle_timeout")
    @classmethod
    def _duration(cls, v: str) -> str:
        check_duration(v)
        return v


class LimitsConfig(_Strict):
    """`memory.limits`: every command's time budget (`--timeout` or `$MEMSIFT_TIMEOUT` overrides the
    running command's). Past it the work is cancelled with a message saying what it waited on; the
    Markdown files are never touched and the index keeps what it held."""

    index: str | float = Field(
        "30m",
        description="`memsift index`: the whole sync (a first index of a large workspace with the local model takes "
                    "minutes).",
    )
    search: str | float = Field(
        "2m", description="`memsift search`, MCP `memory_search`: one search, a first index it builds included."
    )
    get: str | float = Field("30s", description="`memsift get`, MCP `memory_get`: one read.")
    status: str | float = Field("1m", description="`memsift status`.")
    stall: str | float = Field(
        "3m",
        description="`memsift index` also gives up when nothing has moved for this long (a hanging embedding endpoint, "
                    "a lock held elsewhere) instead of waiting out every retry; `0` turns it off.",
    )

    @field_validator("index", "search", "get", "status", "stall")
    @classmethod
    def _duration(cls, v: str | float) -> str | float:
        check_duration(v, bare_unit="s")  # a bare number is seconds
        return v


class MemoryConfig(_WithPluginBlocks):
    backend: BackendId = Field(
        "builtin",
        description="The search backend: `builtin` (SQLite FTS5 + sqlite-vec), `qmd` (the QMD tool as a sidecar), "
                    "`postgres` (PostgreSQL + pgvector), or an installed plugin's (`memsift plugins` lists them).",
    )
    citations: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Citations in hits: `auto` cites in direct chats and when no session key is given.",
    )
    qmd: QmdConfig = Field(default_factory=QmdConfig, description="The QMD backend.")
    postgres: PostgresConfig = Field(default_factory=PostgresConfig, description="The Postgres backend.")
    resident_helper: ResidentHelperConfig = Field(
        default_factory=ResidentHelperConfig,
        description="The helper that answers repeated CLI searches.",
    )
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Every command's time budget.")
    search: MemorySearchConfig | None = Field(
        None,
        description="OpenClaw 2026.9's place for the memory search settings of every agent "
                    "(`agents.defaults.memorySearch` before); wins over the older keys where both are set.",
    )



# --- agents ----------------------------------------------------------------------------------


class _Tolerant(BaseModel):
    """Agent entries carry many reference keys memsift does not use; those are ignored."""

    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True)


class SystemAgent(_Tolerant):
    agent_id: str | None = Field(None, description="The agent used without `-a` (OpenClaw 2026.9's default agent).")


class AgentDefaults(_Tolerant):
    workspace: str | None = Field(
        None,
        description="The agent's workspace folder (holding `MEMORY.md` and `memory/`); `-w` and `$MEMSIFT_WORKSPACE` "
                    "override.",
    )
    memory_search: MemorySearchConfig | None = Field(
        None,
        description="Memory search settings every agent starts from (before OpenClaw 2026.9; now `memory.search`).",
    )
    system_agent: SystemAgent | None = Field(None, description="OpenClaw 2026.9: which agent is the default.")


class AgentMemory(_Strict):
    """`agents.entries.<id>.memory` (OpenClaw 2026.9): the agent's own search settings."""

    search: MemorySearchConfig | None = Field(
        None, description="This agent's memory search settings, over `memory.search`."
    )


class _AgentSettings(_Tolerant):
    workspace: str | None = Field(None, description="This agent's workspace; the defaults' when unset.")
    memory_search: MemorySearchConfig | None = Field(
        None,
        description="This agent's settings, over the defaults (`extraPaths` are added to the defaults'); OpenClaw "
                    "2026.9 names it `memory.search`.",
    )
    memory: AgentMemory | None = Field(None, description="OpenClaw 2026.9: `memory.search`, this agent's settings.")


class AgentEntry(_AgentSettings):
    """`agents.list[]`, the roster before OpenClaw 2026.9."""

    id: str = Field(
        min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="The agent id (`-a`); matched case-insensitively.",
    )
    default: bool = Field(False, description="The agent used without `-a`.")


class KeyedAgentEntry(_AgentSettings):
    """`agents.entries.<id>`, OpenClaw 2026.9's roster: the key is the agent id."""

    default: bool = Field(
        False, description="Retired by OpenClaw 2026.9 (use `agents.defaults.systemAgent.agentId`); still read."
    )


class AgentsConfig(_Tolerant):
    defaults: AgentDefaults = Field(default_factory=AgentDefaults, description="Settings for every agent.")
    list_: list[AgentEntry] = Field(
        default_factory=list, alias="list",
        description="Agents by id, each with its own settings (before OpenClaw 2026.9).",
    )
    entries: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")], KeyedAgentEntry] = Field(
        default_factory=dict,
        description="OpenClaw 2026.9's agents, keyed by id, each with its own settings (`memory.search`, `workspace`).",
    )


class MemsiftConfig(_Strict):
    """The whole file. `stateDir` is memsift's own key (where indexes live)."""

    # Set by load.py: which source set each raw key, what to tell the user, the OpenClaw file read.
    _origins: dict = PrivateAttr(default_factory=dict)
    _notes: list = PrivateAttr(default_factory=list)
    _openclaw_path: object = PrivateAttr(default=None)

    state_dir: str | None = Field(
        None,
        description="Where indexes live (memsift's own key); default `$XDG_STATE_HOME/memsift` "
                    "(`~/.local/state/memsift`).",
    )
    agents: AgentsConfig = Field(default_factory=AgentsConfig, description="Agents and their memory search settings.")
    memory: MemoryConfig = Field(
        default_factory=MemoryConfig,
        description="The backend and what applies to every agent.",
    )
    memory_search: MemorySearchConfig | None = Field(
        None,
        description="The oldest place of the memory search settings of every agent (OpenClaw moved it to "
                    "`agents.defaults.memorySearch`, then `memory.search`): still read, under both.",
    )
