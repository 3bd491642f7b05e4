"""The config keys, named as in the reference system so configs carry over: records (`engine/records/__init__.py`)
the engine reads, and from which `engine/records/schema.py` makes the pydantic models that validate a file.

The records say *types and allowed values* (`spec(...)`: bounds, patterns, and the checks run
before or after pydantic's own); pydantic checks them when a config is read (`load.py`), never
on a cold command that reads settings already validated (`snapshot.py`). Clamping and
normalisation (weights summed to 1, candidateMultiplier 1..20, overlap < tokens, …) happen in
`load.py` (`normalise_memory_search`), after the per-agent merge, exactly as the reference does it.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Literal

from ..durations import check_duration
from ..records import Record, spec
from ..secrets import Secret
from .zones import zone_info

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


def _registered(kind: str, *special: str) -> Callable[[str], str]:
    """A check that `name` is a provider, reranker or backend memsift has (its own or a plugin's)."""

    def check(name: str) -> str:
        if name not in special:
            from ..plugins.registry import check_name  # noqa: PLC0415

            check_name(kind, name)
        return name

    return check


_A_PROVIDER = _registered("provider", "auto", "none")
_A_FALLBACK = _registered("provider", "none")
_A_BACKEND = _registered("backend")
_A_RERANKER = _registered("reranker")


class _Section(Record, frozen=True):
    """A config section: `model_validate` reads one from a file's keys (camelCase or not), as pydantic
    models did (pydantic's ValidationError when it is no such section)."""

    @classmethod
    def model_validate(cls, data: Any) -> Any:
        from ..records.schema import validate  # noqa: PLC0415  (pydantic: only where a config is read)

        return validate(cls, data)


class _Strict(_Section, frozen=True):
    """Keys are camelCase in files; unknown keys are errors inside memsift's own sections."""

    __extra__ = "forbid"


class _WithPluginBlocks(_Strict, frozen=True):
    """A section where a plugin keeps its settings under its name (`memory.lancedb`,
    `memorySearch.<provider>`, `query.rerank.<reranker>`), kept in `model_extra` and validated by
    the plugin's own model when it is used (engine/config/plugin_blocks.py). A key that is a near
    miss of one of ours, or that is not an object, is still a mistake (`engine/records/schema.py`)."""

    __extra__ = "blocks"


class BatchConfig(_Strict, frozen=True):
    enabled: bool = spec(
        default=False,
        description="Embed a full index through the provider's batch API (openai, gemini) instead of live calls.",
    )
    wait: bool = spec(
        default=True, description="Wait for a submitted batch to finish; false: an unfinished job counts as a failure."
    )
    concurrency: int = spec(default=2, description="Batch jobs in flight at once.")
    poll_interval_ms: int = spec(default=2000, description="How often a running batch job is polled, in milliseconds.")
    timeout_minutes: float = spec(
        default=60,
        description="How long a batch job may run before it counts as failed (after 2 failures batching is off and "
                    "plain requests are used).",
    )


class RemoteConfig(_Strict, frozen=True):
    base_url: str | None = spec(
        default=None,
        description="The provider's endpoint (an OpenAI-compatible server, a proxy); the provider's own URL when "
                    "unset.",
    )
    api_key: Secret | None = spec(
        default=None, before=lambda value: _secret_ref(value),
        description="The API key, or the name of an environment variable holding it; else the provider's usual "
                    "variable (OPENAI_API_KEY, …). Never logged.",
    )
    headers: dict[str, str] = spec(
        factory=dict,
        description="Extra HTTP headers sent to the provider; every value is masked in logs and errors.",
    )
    batch: BatchConfig = spec(
        factory=BatchConfig,
        description="The provider's batch API for large indexing runs.",
    )


class VectorStoreConfig(_Strict, frozen=True):
    enabled: bool = spec(default=True, description="Store and search vectors (sqlite-vec); false: keyword search only.")
    extension_path: str | None = spec(
        default=None,
        description="A sqlite-vec loadable extension to use instead of the one in the sqlite-vec wheel.",
    )
    # Above this many chunks, a 1-bit first pass in memory and exact rescoring of `rescorePool`
    # candidates replace sqlite-vec's full scan (backends/builtin/vector_memory.py).
    quantize_above: int = spec(
        default=100_000,
        ge=0,
        description="Above this many chunks, vectors are held in memory as 1-bit codes and the nearest are rescored "
                    "exactly.",
    )
    rescore_pool: int = spec(
        default=1000, ge=10, le=100_000,
        description="How many nearest 1-bit codes are rescored from the stored floats.",
    )


class FtsStoreConfig(_Strict, frozen=True):
    tokenizer: Literal["unicode61", "trigram"] = spec(
        default="unicode61",
        description="The FTS5 tokenizer: unicode61 (Porter stemming, diacritics folded, CJK per character) or trigram "
                    "(substrings, 2-character CJK names).",
    )


class StoreConfig(_Strict, frozen=True):
    path: str | None = spec(
        default=None,
        description="The index file; `{agentId}` is substituted and `~` expanded. Default: "
                    "`<stateDir>/memory/<agentId>-<8 hex>.sqlite`, one per workspace and set of files.",
    )
    vector: VectorStoreConfig = spec(factory=VectorStoreConfig, description="The vector side of the index.")
    fts: FtsStoreConfig = spec(factory=FtsStoreConfig, description="The keyword side of the index.")


class ChunkingConfig(_Strict, frozen=True):
    """`tokens` / `overlap` are the reference's keys; `strategy` is memsift's. Unset, a chunk is
    what a hit shows (`evidence`, 175 tokens = the 700-character snippet, no overlap); setting
    `tokens` or `overlap` selects the reference's chunker (400 / 80 unless given), as configs
    carried over expect. Normalised in load.py."""

    tokens: int | None = spec(
        default=None,
        description="Tokens a chunk (the reference's key): 175 with `evidence`, 400 with `reference`.",
    )
    overlap: int | None = spec(
        default=None,
        description="Tokens shared by neighbouring chunks (reference chunker only): 0 with `evidence`, 80 with "
                    "`reference`.",
    )
    strategy: Literal["evidence", "reference"] | None = spec(
        default=None,
        description="`evidence` (a chunk is what a hit shows) unless `tokens` or `overlap` is set, which selects "
                    "`reference`.",
    )


class SessionSyncConfig(_Strict, frozen=True):
    delta_bytes: float = spec(
        default=100_000,
        description="Transcript growth in bytes that triggers a sync of session memory (0: any growth).",
    )
    delta_messages: float = spec(
        default=50,
        description="Transcript growth in messages that triggers a sync of session memory (0: any growth).",
    )
    post_compaction_force: bool = spec(
        default=True,
        description="The reference's forced sync after compaction: accepted so configs carry over (memsift syncs on "
                    "growth).",
    )


class SyncConfig(_Strict, frozen=True):
    on_session_start: bool = spec(
        default=True,
        description="A search under a session key not seen before first syncs changed files.",
    )
    on_search: bool = spec(default=True, description="Every search first syncs changed files (within a 2 s budget).")
    watch: bool = spec(default=True, description="`memsift watch` follows file changes.")
    watch_debounce_ms: int = spec(
        default=1500,
        description="How long `watch` waits for changes to settle before syncing, in milliseconds.",
    )
    interval_minutes: float = spec(
        default=0, description="A periodic full sync in `memsift watch`, in minutes (0: off).",
    )
    sessions: SessionSyncConfig = spec(
        factory=SessionSyncConfig,
        description="When session transcripts are synced.",
    )


class MmrConfig(_Strict, frozen=True):
    enabled: bool = spec(
        default=False,
        description="Maximal marginal relevance: trade some relevance for hits that say different things.",
    )
    lambda_: float = spec(
        default=0.7, json="lambda",
        description="MMR's balance, clamped to [0, 1]: 1 is relevance only, 0 diversity only.",
    )


class TemporalDecayConfig(_Strict, frozen=True):
    enabled: bool = spec(default=False, description="Older dated hits lose some of their score.")
    half_life_days: float = spec(default=30, description="Days after which the decay factor halves (at least 1).")
    # "bounded" (memsift): score × (1 − weight + weight · 0.5^(age/halfLife)), age counted from the
    # newest dated hit of the search; "reference": score × 0.5^(age/halfLife), age from now.
    formula: Literal["bounded", "reference"] = spec(
        default="bounded",
        description="`bounded`: score × (1 − weight + weight·0.5^(age/halfLife)), age from the newest dated hit; "
                    "`reference`: score × 0.5^(age/halfLife), age from now.",
    )
    # the share of a score decay may take
    weight: float = spec(
        default=0.1, ge=0.0, le=1.0,
        description="The share of a score the `bounded` decay may take.",
    )


class HybridConfig(_Strict, frozen=True):
    enabled: bool = spec(
        default=True,
        description="Merge keyword (BM25) and vector scores; false: the vector side alone when there is one (`--mode "
                    "hybrid` still merges).",
    )
    vector_weight: float = spec(
        default=0.7,
        description="The vector score's weight; clamped to [0, 1], then both weights are divided by their sum.",
    )
    text_weight: float = spec(
        default=0.3,
        description="The keyword score's weight; clamped to [0, 1], then both weights are divided by their sum.",
    )
    candidate_multiplier: float = spec(
        default=4,
        description="Candidates gathered on each side per hit wanted; floored, clamped to 1..20, pool capped at 200.",
    )
    mmr: MmrConfig = spec(factory=MmrConfig, description="Diversity of the final cut.")
    temporal_decay: TemporalDecayConfig = spec(
        factory=TemporalDecayConfig,
        description="Recency: older dated hits lose some score.",
    )


def _a_zone(v: str | None) -> str | None:
    if v is None:
        return None
    zone_info(v.strip())  # BadZone (a ValueError): the config error names the key
    return v.strip()


class TimeConfig(_Strict, frozen=True):
    """Time expressions in a question ("last Tuesday", "in November 2022") favour hits of that time."""

    enabled: bool = spec(default=True, description="Times named in a question favour hits of those days.")
    # a dated hit outside the window loses up to this share of its score
    weight: float = spec(
        default=0.7, ge=0.0, le=1.0,
        description="The share of its score a dated hit outside the named window may lose.",
    )
    # which months "last summer" names
    hemisphere: Literal["northern", "southern"] = spec(
        default="northern",
        description='Which months a season names ("last summer": June–August, or December–February).',
    )
    timezone: str | None = spec(
        default=None, after=_a_zone,
        description='The user\'s time zone, an IANA name ("Europe/Berlin"): which day "yesterday" is, and the day of '
                    "a note's time. Unset: OpenClaw's `agents.defaults.userTimezone`, else this machine's zone ($TZ).",
    )


class RerankRemoteConfig(_Strict, frozen=True):
    """`query.rerank.remote`: the reranker's endpoint and key, read like `memorySearch.remote`."""

    base_url: str | None = spec(default=None, description="The reranker's endpoint (required for provider `endpoint`).")
    api_key: Secret | None = spec(
        default=None, before=lambda value: _secret_ref(value),
        description="The reranker's API key, or the name of an environment variable holding it. Never logged.",
    )
    headers: dict[str, str] = spec(
        factory=dict,
        description="Extra HTTP headers for the reranker; every value is masked.",
    )


class RerankConfig(_WithPluginBlocks, frozen=True):
    """`query.rerank`: an optional stage that rescores the top `candidates` hits (engine/rerank/)."""

    enabled: bool = spec(default=False, description="Rescore the top hits with a cross-encoder.")
    provider: str = spec(
        default="local", pattern=_PLUGIN_NAME, after=_A_RERANKER,
        description="`local` (an ONNX cross-encoder on disk), `voyage`, `cohere`, `jina`, `endpoint` (any server "
                    "speaking the rerank API), or an installed plugin's reranker.",
    )
    model: str = spec(default="", description="The reranker model; the provider's default when empty.")
    # local: a folder holding model.onnx and tokenizer.json
    model_path: str | None = spec(
        default=None,
        description="`local`: a folder holding `model.onnx` and `tokenizer.json`; `~` expanded.",
    )
    candidates: int = spec(default=30, ge=1, le=200, description="How many top hits are rescored.")
    # final = (1 - weight) * hybrid + weight * rerank
    weight: float = spec(
        default=0.5, ge=0.0, le=1.0,
        description="final = (1 − weight) × hybrid + weight × rerank.",
    )
    # the stage's budget per search; past it the order is kept
    timeout_ms: float = spec(
        default=3000, gt=0,
        description="The stage's budget per search in milliseconds; past it the hybrid order is kept (and said).",
    )
    # local: query + chunk tokens; cohere: per document
    max_tokens: int = spec(
        default=256, ge=16, le=8192,
        description="`local`: query + chunk tokens per pair; `cohere`: tokens per document.",
    )
    # local: pairs per onnxruntime call; remote: documents per request
    batch_size: int = spec(
        default=16, ge=1, le=1000,
        description="`local`: pairs per onnxruntime call; remote: documents per request.",
    )
    remote: RerankRemoteConfig = spec(
        factory=RerankRemoteConfig,
        description="The reranker's endpoint and key, read like `memorySearch.remote`.",
    )


class RankerConfig(_Strict, frozen=True):
    """`query.ranker`: the shipped evidence ranker (engine/rerank/evidence.py), which reorders the
    backend's top `candidates` hybrid hits by what they show. On by default; offline, no download."""

    enabled: bool = spec(
        default=True,
        description="Reorder hybrid hits of conversation memory with the shipped evidence ranker.",
    )
    candidates: int = spec(
        default=40, ge=1, le=200,
        description="How many of the backend's top hits the ranker reorders.",
    )


def _at_least_one(v: int) -> int:
    if v < 1:
        raise ValueError("must be at least 1")
    return v


class QueryConfig(_Strict, frozen=True):
    max_results: int = spec(
        default=6, after=_at_least_one, description="Hits a search returns (at least 1); `-n` overrides.",
    )
    min_score: float = spec(
        default=0.35,
        description="Hits scoring below this are dropped (clamped to [0, 1]); keyword hits with strong evidence may "
                    "fill free slots, marked `rescued`.",
    )
    hybrid: HybridConfig = spec(factory=HybridConfig, description="How keyword and vector scores merge.")
    time: TimeConfig = spec(factory=TimeConfig, description="Time-aware search.")
    rerank: RerankConfig = spec(factory=RerankConfig, description="The optional rerank stage.")
    ranker: RankerConfig = spec(factory=RankerConfig, description="The shipped evidence ranker.")
    # Bounded lexical expansion of the keyword query (engine/search/expansion.py): "inflections"
    # (bought → buy, choose → chose), "synonyms" (and a verb's words of its commonest sense), "off".
    expansion: Literal["off", "inflections", "synonyms"] = spec(
        default="synonyms",
        description="Bounded lexical expansion: `inflections` (bought → buy, choose → chose), `synonyms` (also a "
                    "verb's words of its commonest sense), or `off`.",
    )


class CacheConfig(_Strict, frozen=True):
    enabled: bool = spec(
        default=True, description="Cache embeddings by text, so unchanged chunks are never embedded twice.",
    )
    max_entries: float | None = spec(
        default=None,
        description="At most this many cached embeddings (the least recently written go first); unbounded when unset.",
    )


class MultimodalConfig(_Strict, frozen=True):
    enabled: bool = spec(
        default=False,
        description="Index images and audio in extra paths (needs provider gemini with `gemini-embedding-2-preview` "
                    "and no fallback).",
    )
    # None (unset) means both when enabled, as in the reference; "all" also inside the list.
    modalities: list[Literal["image", "audio", "all"]] | Literal["all"] | None = spec(
        default=None,
        description='Which kinds of files: `["image", "audio"]`, `"all"` or `["all"]`; both when unset.',
    )
    max_file_bytes: int = spec(default=10 * 1024 * 1024, description="Larger image and audio files are skipped.")


class LocalConfig(_Strict, frozen=True):
    model_path: str | None = spec(
        default=None,
        description="A local `.onnx` file, or a folder with `model.onnx` and `tokenizer.json`, instead of the bundled "
                    "MiniLM; download addresses are refused.",
    )
    model_cache_dir: str | None = spec(
        default=None,
        description="Where the int8 graph of the bundled model is built once; default "
                    "`$XDG_CACHE_HOME/memsift/models`.",
    )
    notes_model_path: str | None = spec(
        default=None,
        description="A smaller model taught the question model's vectors (`contrib/embedder/`), a folder or `.onnx` "
                    "file: it embeds the notes (faster indexing), the question model the questions.",
    )


class ExperimentalConfig(_Strict, frozen=True):
    session_memory: bool = spec(
        default=False,
        description="Allow `sources: [\"sessions\"]`: index the agent's session transcripts.",
    )


class QmdPath(_Strict, frozen=True):
    path: str = spec(description="A folder QMD indexes as a collection.")
    name: str | None = spec(default=None, description="The collection's name; derived from the path when unset.")
    pattern: str = spec(default="**/*.md", description="Which files of the folder, as a glob.")


class MemorySearchQmdConfig(_Strict, frozen=True):
    """`memorySearch.qmd`: collections one agent (or every agent, under defaults) adds to QMD."""

    extra_collections: list[QmdPath] = spec(
        factory=list,
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


def _provider_key(value: object) -> object:
    """A provider-wide key: as `remote.apiKey` reads one, except that a reference only OpenClaw's secret
    providers resolve (file, exec, store) is left to them: memsift then looks where it always does."""
    try:
        return _secret_ref(value)
    except ValueError:
        return None


def _extra_path_objects(value: object) -> object:
    return [_extra_path(v) for v in value] if isinstance(value, list) else value


def _provider_alias(value: object) -> object:
    return PROVIDER_ALIASES.get(value, value) if isinstance(value, str) else value


class MemorySearchConfig(_WithPluginBlocks, frozen=True):
    enabled: bool = spec(
        default=True, description="Memory search for this agent; false: the CLI refuses to search (exit 3).",
    )
    provider: str = spec(
        default="auto", before=_provider_alias, pattern=_PLUGIN_NAME, after=_A_PROVIDER,
        description="The embedding provider: `auto` (a configured local model, then providers with keys, else the "
                    "bundled model), `local`, `openai`, `gemini`, `voyage`, `mistral`, `ollama`, an installed "
                    "plugin's provider, or `none` (keyword search only).",
    )
    fallback: str = spec(
        default="none", before=_provider_alias, pattern=_PLUGIN_NAME, after=_A_FALLBACK,
        description="The provider used when the primary one fails (`none`: no fallback).",
    )
    model: str = spec(default="", description="The provider's embedding model; its default when empty.")
    output_dimensionality: Literal[768, 1536, 3072] | None = spec(
        default=None,
        description="Gemini: the vector size asked for.",
    )
    remote: RemoteConfig = spec(
        factory=RemoteConfig,
        description="The remote provider's endpoint, key and headers.",
    )
    sources: list[Literal["memory", "sessions"]] = spec(
        factory=lambda: ["memory"],  # type: ignore[arg-type]  # a list of that literal
        description="What is indexed: `memory` files, and `sessions` transcripts (with `experimental.sessionMemory`).",
    )
    extra_paths: list[str] = spec(
        factory=list, before=_extra_path_objects,
        description="More Markdown files or folders to index, relative to the workspace or absolute; trimmed and "
                    "de-duplicated. OpenClaw's object form `{path}` is read too (a `pattern` other than every `.md` "
                    "file is refused).",
    )
    remember_across_conversations: bool | None = spec(
        default=None,
        description='OpenClaw 2026.9\'s cross-conversation transcript recall: accepted so configs carry over; memsift '
                    'searches the memory files (and `sources: ["sessions"]` transcripts), not other conversations.',
    )
    input_type: str | None = spec(
        default=None, description="OpenClaw 2026.9's embedding input type: accepted so configs carry over; not used."
    )
    query_input_type: str | None = spec(
        default=None, description="OpenClaw 2026.9's query input type: accepted so configs carry over; not used."
    )
    document_input_type: str | None = spec(
        default=None, description="OpenClaw 2026.9's document input type: accepted so configs carry over; not used."
    )
    store: StoreConfig = spec(factory=StoreConfig, description="Where and how the index is stored.")
    chunking: ChunkingConfig = spec(factory=ChunkingConfig, description="How files are cut into chunks.")
    sync: SyncConfig = spec(factory=SyncConfig, description="When changed files are synced into the index.")
    query: QueryConfig = spec(factory=QueryConfig, description="How a search ranks.")
    cache: CacheConfig = spec(factory=CacheConfig, description="The embedding cache.")
    multimodal: MultimodalConfig = spec(
        factory=MultimodalConfig,
        description="Images and audio in extra paths.",
    )
    local: LocalConfig = spec(factory=LocalConfig, description="The local embedding model.")
    experimental: ExperimentalConfig = spec(
        factory=ExperimentalConfig,
        description="Features behind a switch.",
    )
    qmd: MemorySearchQmdConfig = spec(factory=MemorySearchQmdConfig, description="Per-agent QMD collections.")


# --- memory (global) -------------------------------------------------------------------------


class QmdSessions(_Strict, frozen=True):
    enabled: bool = spec(default=False, description="Export session transcripts as Markdown for QMD to index.")
    export_dir: str | None = spec(
        default=None,
        description="Where exported sessions are written (memsift's own folder under the QMD home when unset; never "
                    "over memory files).",
    )
    retention_days: float | None = spec(
        default=None,
        description="Exported sessions older than this are removed; kept when unset.",
    )


def _qmd_duration(v: object) -> object:
    # The reference silently uses the default for an unparseable duration; memsift refuses it,
    # so a typo such as "banana" or "1h 30m" is seen at once instead of a schedule it did not mean.
    if isinstance(v, (str, int, float)):
        check_duration(v)
    return v


class QmdUpdate(_Strict, frozen=True):
    interval: str | float = spec(
        default="5m", before=_qmd_duration,
        description="How often `qmd update` runs (`30s`, `5m`, `1h30m`, a number of minutes, `0s` for never).",
    )
    debounce_ms: float = spec(default=15_000, description="The shortest gap between two updates, in milliseconds.")
    on_boot: bool = spec(default=True, description="Update the collections when the backend starts.")
    wait_for_boot_sync: bool = spec(default=False, description="The first search waits for the boot update.")
    embed_interval: str | float = spec(
        default="60m", before=_qmd_duration, description="How often `qmd embed` runs (a duration as for `interval`)."
    )
    command_timeout_ms: float = spec(
        default=30_000, description="Budget of a `qmd collection` command, in milliseconds.",
    )
    update_timeout_ms: float = spec(default=120_000, description="Budget of `qmd update`, in milliseconds.")
    embed_timeout_ms: float = spec(default=120_000, description="Budget of `qmd embed`, in milliseconds.")


class QmdLimits(_Strict, frozen=True):
    max_results: float = spec(default=6, description="Hits asked of QMD.")
    max_snippet_chars: float = spec(default=700, description="A hit's snippet is cut to this many characters.")
    max_injected_chars: float = spec(
        default=4000,
        description="All snippets of one answer together stay under this many characters.",
    )
    timeout_ms: float = spec(
        default=4000,
        description="Budget of one QMD search, in milliseconds; past it the fallback answers.",
    )


class ScopeMatch(_Strict, frozen=True):
    channel: str | None = spec(default=None, description="The session key's channel (`telegram`, `discord`, …).")
    chat_type: Literal["direct", "group", "channel", "dm"] | None = spec(
        default=None,
        description="The session key's chat type (`dm` is `direct`).",
    )
    key_prefix: str | None = spec(default=None, description="A prefix of the normalised session key.")
    raw_key_prefix: str | None = spec(default=None, description="A prefix of the session key as given.")


class ScopeRule(_Strict, frozen=True):
    action: Literal["allow", "deny"] = spec(description="What a matching session key gets.")
    match: ScopeMatch | None = spec(
        default=None, description="Which session keys the rule covers; every key when unset.",
    )


class ScopeConfig(_Strict, frozen=True):
    default: Literal["allow", "deny"] | None = spec(
        default=None, description="What a session key no rule matches gets.",
    )
    rules: list[ScopeRule] = spec(factory=list, description="Rules in order; the first that matches decides.")


class McporterConfig(_Strict, frozen=True):
    enabled: bool = spec(
        default=False,
        description="The reference's mcporter bridge: accepted so configs carry over; memsift runs QMD directly.",
    )
    server_name: str = spec(default="qmd", description="The mcporter server name (accepted, not used).")
    start_daemon: bool = spec(default=True, description="Start the mcporter daemon (accepted, not used).")


def _default_scope() -> ScopeConfig:
    # The reference's 2026-04-13 default: deny, but allow direct chats and channels.
    return ScopeConfig(
        default="deny",
        rules=[
            ScopeRule(action="allow", match=ScopeMatch(chat_type="direct")),
            ScopeRule(action="allow", match=ScopeMatch(chat_type="channel")),
        ],
    )


class QmdConfig(_Strict, frozen=True):
    command: str = spec(default="qmd", description="The QMD command (a name on PATH or a path).")
    search_mode: Literal["search", "vsearch", "query"] = spec(
        default="search",
        description="`search` (BM25), `vsearch` (vectors) or `query` (QMD's hybrid with its reranker).",
    )
    search_tool: str | None = spec(
        default=None,
        description="The reference's search tool name: accepted so configs carry over; `searchMode` decides."
    )
    include_default_memory: bool = spec(
        default=True,
        description="Index the workspace's `MEMORY.md` and `memory/` as collections.",
    )
    paths: list[QmdPath] = spec(
        factory=list,
        description="More folders indexed as collections, for every agent.",
    )
    sessions: QmdSessions = spec(factory=QmdSessions, description="Session transcripts exported for QMD.")
    update: QmdUpdate = spec(
        factory=QmdUpdate,
        description="When QMD updates and embeds, and the commands' budgets.",
    )
    limits: QmdLimits = spec(factory=QmdLimits, description="Limits of a QMD search.")
    mcporter: McporterConfig = spec(factory=McporterConfig, description="The mcporter bridge.")
    scope: ScopeConfig = spec(
        factory=_default_scope,
        description="Which chats may search memory: deny, except direct chats and channels, by default.",
    )
    fallback: Literal["builtin", "none"] = spec(
        default="builtin",
        description="What answers when QMD fails: the builtin backend, or nothing (an error).",
    )


class PostgresPool(_Strict, frozen=True):
    min_size: int = spec(default=1, ge=0, le=100, description="Connections kept open.")
    max_size: int = spec(default=4, ge=1, le=100, description="At most this many connections.")


class PostgresConfig(_Strict, frozen=True):
    """`memory.postgres`: one shared database for many memsift processes (backends/postgres)."""

    # else $MEMSIFT_POSTGRES_DSN
    dsn: Secret | None = spec(
        default=None,
        description="The database (`postgresql://…`); else `$MEMSIFT_POSTGRES_DSN`. Its password is never logged.",
    )
    # a read replica for searches; writes and read-your-writes use `dsn`
    read_dsn: Secret | None = spec(
        default=None,
        description="A read replica for searches; writes and read-your-writes use `dsn`.",
    )
    pool: PostgresPool = spec(factory=PostgresPool, description="The connection pool.")
    connect_timeout_ms: int = spec(
        default=5000, ge=100,
        description="How long a connection attempt may take, in milliseconds.",
    )
    statement_timeout_ms: int = spec(
        default=10000, ge=100,
        description="Budget of one search statement, in milliseconds.",
    )
    # how long a sync waits for another writer of the agent
    lock_timeout_ms: int = spec(
        default=60000, ge=100,
        description="How long a sync waits for another writer of the same agent, in milliseconds.",
    )
    # read-your-writes: wait this long for the replica, then read the primary
    replica_wait_ms: int = spec(
        default=1000, ge=0,
        description="Read-your-writes: how long to wait for the replica to catch up before reading the primary.",
    )
    fallback: Literal["builtin", "none"] = spec(
        default="none",
        description="What answers when the server is unreachable: the builtin backend, or nothing (exit 7).",
    )
    hnsw_above: int = spec(
        default=50_000,
        ge=0,
        description="An agent with at least this many chunk vectors gets its own HNSW index (pgvector, iterative "
                    "scan), "
        "built by its next sync; smaller agents are scanned exactly (about 10 ms per 10,000 vectors). 0: never.",
    )
    hnsw_ef_search: int = spec(
        default=800,
        ge=10,
        le=1000,
        description="HNSW search breadth (hnsw.ef_search) for an agent with its own index: higher is nearer exact, "
                    "slower "
        "(at a million chunks, real questions, the graph of half vectors: recall@10 0.96-0.97 at 400, "
        "0.978-0.995 at 800, 0.980-0.997 at 1000).",
    )


def _duration(v: str) -> str:
    check_duration(v)
    return v


def _seconds_duration(v: str | float) -> str | float:
    check_duration(v, bare_unit="s")  # a bare number is seconds
    return v


class ResidentHelperConfig(_Strict, frozen=True):
    """`memory.residentHelper`: the first `memsift search` starts a helper that answers later ones."""

    enabled: bool = spec(
        default=True,
        description="A cold `memsift search` starts a helper that keeps the index and model loaded and answers later "
                    "searches.",
    )
    max_helpers: int = spec(
        default=4,
        ge=1,
        le=64,
        description="At most this many helpers run per user (one per workspace and settings, each holding its index "
                    "and "
        "model); past it a search is answered cold and starts none.",
    )
    # the helper exits after this long without a search
    idle_timeout: str = spec(
        default="15m", after=_duration,
        description="The helper exits after this long without a search.",
    )


class LimitsConfig(_Strict, frozen=True):
    """`memory.limits`: every command's time budget (`--timeout` or `$MEMSIFT_TIMEOUT` overrides the
    running command's). Past it the work is cancelled with a message saying what it waited on; the
    Markdown files are never touched and the index keeps what it held."""

    index: str | float = spec(
        default="30m", after=_seconds_duration,
        description="`memsift index`: the whole sync (a first index of a large workspace with the local model takes "
                    "minutes).",
    )
    search: str | float = spec(
        default="2m", after=_seconds_duration,
        description="`memsift search`, MCP `memory_search`: one search, a first index it builds included.",
    )
    get: str | float = spec(
        default="30s", after=_seconds_duration, description="`memsift get`, MCP `memory_get`: one read.",
    )
    status: str | float = spec(default="1m", after=_seconds_duration, description="`memsift status`.")
    stall: str | float = spec(
        default="3m", after=_seconds_duration,
        description="`memsift index` also gives up when nothing has moved for this long (a hanging embedding endpoint, "
                    "a lock held elsewhere) instead of waiting out every retry; `0` turns it off.",
    )


class MemoryConfig(_WithPluginBlocks, frozen=True):
    backend: str = spec(
        default="builtin", pattern=_PLUGIN_NAME, after=_A_BACKEND,
        description="The search backend: `builtin` (SQLite FTS5 + sqlite-vec), `qmd` (the QMD tool as a sidecar), "
                    "`postgres` (PostgreSQL + pgvector), or an installed plugin's (`memsift plugins` lists them).",
    )
    citations: Literal["auto", "on", "off"] = spec(
        default="auto",
        description="Citations in hits: `auto` cites in direct chats and when no session key is given.",
    )
    qmd: QmdConfig = spec(factory=QmdConfig, description="The QMD backend.")
    postgres: PostgresConfig = spec(factory=PostgresConfig, description="The Postgres backend.")
    resident_helper: ResidentHelperConfig = spec(
        factory=ResidentHelperConfig,
        description="The helper that answers repeated CLI searches.",
    )
    limits: LimitsConfig = spec(factory=LimitsConfig, description="Every command's time budget.")
    search: MemorySearchConfig | None = spec(
        default=None,
        description="OpenClaw 2026.9's place for the memory search settings of every agent "
                    "(`agents.defaults.memorySearch` before); wins over the older keys where both are set.",
    )



# --- agents ----------------------------------------------------------------------------------


class _Tolerant(_Section, frozen=True):
    """Agent entries carry many reference keys memsift does not use; those are ignored."""

    __extra__ = "ignore"


class SystemAgent(_Tolerant, frozen=True):
    agent_id: str | None = spec(
        default=None, description="The agent used without `-a` (OpenClaw 2026.9's default agent).",
    )


class AgentDefaults(_Tolerant, frozen=True):
    workspace: str | None = spec(
        default=None,
        description="The agent's workspace folder (holding `MEMORY.md` and `memory/`); `-w` and `$MEMSIFT_WORKSPACE` "
                    "override.",
    )
    memory_search: MemorySearchConfig | None = spec(
        default=None,
        description="Memory search settings every agent starts from (before OpenClaw 2026.9; now `memory.search`).",
    )
    system_agent: SystemAgent | None = spec(default=None, description="OpenClaw 2026.9: which agent is the default.")
    user_timezone: str | None = spec(
        default=None,
        description="OpenClaw's: the user's time zone (IANA), the one its daily memory files are named in. memsift "
                    "reads days in it (`memorySearch.query.time.timezone` wins); an unknown name is set aside with a "
                    "warning, as OpenClaw falls back to the machine's zone.",
    )


class AgentMemory(_Strict, frozen=True):
    """`agents.entries.<id>.memory` (OpenClaw 2026.9): the agent's own search settings."""

    search: MemorySearchConfig | None = spec(
        default=None, description="This agent's memory search settings, over `memory.search`."
    )


class _AgentSettings(_Tolerant, frozen=True):
    workspace: str | None = spec(default=None, description="This agent's workspace; the defaults' when unset.")
    memory_search: MemorySearchConfig | None = spec(
        default=None,
        description="This agent's settings, over the defaults (`extraPaths` are added to the defaults'); OpenClaw "
                    "2026.9 names it `memory.search`.",
    )
    memory: AgentMemory | None = spec(
        default=None, description="OpenClaw 2026.9: `memory.search`, this agent's settings.",
    )


class AgentEntry(_AgentSettings, frozen=True):
    """`agents.list[]`, the roster before OpenClaw 2026.9."""

    id: str = spec(
        min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="The agent id (`-a`); matched case-insensitively.",
    )
    default: bool = spec(default=False, description="The agent used without `-a`.")


class KeyedAgentEntry(_AgentSettings, frozen=True):
    """`agents.entries.<id>`, OpenClaw 2026.9's roster: the key is the agent id."""

    default: bool = spec(
        default=False, description="Retired by OpenClaw 2026.9 (use `agents.defaults.systemAgent.agentId`); still read."
    )


class AgentsConfig(_Tolerant, frozen=True):
    defaults: AgentDefaults = spec(factory=AgentDefaults, description="Settings for every agent.")
    list_: list[AgentEntry] = spec(
        factory=list, json="list",
        description="Agents by id, each with its own settings (before OpenClaw 2026.9).",
    )
    entries: dict[str, KeyedAgentEntry] = spec(
        factory=dict, key_pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
        description="OpenClaw 2026.9's agents, keyed by id, each with its own settings (`memory.search`, `workspace`).",
    )


class ProviderEndpoint(_Tolerant, frozen=True):
    """`models.providers.<id>` of an OpenClaw config: what an embedding provider of that id reads of it."""

    # Borrowed from OpenClaw's section, never a reason to refuse a config: a value of a form memsift
    # does not read (a secret reference in a header) is left out.
    base_url: str | None = spec(
        default=None, before=lambda value: value if isinstance(value, str) else None,
        description="The provider's endpoint; `memorySearch.remote.baseUrl` wins.",
    )
    api_key: Secret | None = spec(
        default=None, before=lambda value: _provider_key(value),
        description="Its key, or the name of a variable holding it (`$NAME`, `${NAME}`, an `env` secret "
                    "reference); `memorySearch.remote.apiKey` wins. Other secret references are OpenClaw's alone.",
    )
    headers: dict[str, str] = spec(
        factory=dict, before=lambda value: {k: v for k, v in value.items() if isinstance(v, str)}
        if isinstance(value, dict) else {},
        description="Its headers; `memorySearch.remote.headers` are added over them.",
    )


class ModelsConfig(_Tolerant, frozen=True):
    providers: dict[str, ProviderEndpoint] = spec(
        factory=dict,
        description="OpenClaw's model providers by id. An embedding provider of the same id (`openai`, `gemini`, "
                    "`voyage`, `mistral`, `ollama`) takes its endpoint, key and headers where `memorySearch.remote` "
                    "leaves them unset, as OpenClaw does.",
    )


class MemsiftConfig(_Strict, frozen=True):
    """The whole file. `stateDir` is memsift's own key (where indexes live)."""

    # Set by load.py, not settings: which source set each raw key (`_origins`), what to tell the
    # user (`_notes`), the OpenClaw file read (`_openclaw_path`).
    _origins: ClassVar[dict[Any, str]] = {}
    _notes: ClassVar[list[str]] = []
    _openclaw_path: ClassVar[Any] = None

    state_dir: str | None = spec(
        default=None,
        description="Where indexes live (memsift's own key); default `$XDG_STATE_HOME/memsift` "
                    "(`~/.local/state/memsift`).",
    )
    agents: AgentsConfig = spec(factory=AgentsConfig, description="Agents and their memory search settings.")
    memory: MemoryConfig = spec(
        factory=MemoryConfig,
        description="The backend and what applies to every agent.",
    )
    memory_search: MemorySearchConfig | None = spec(
        default=None,
        description="The oldest place of the memory search settings of every agent (OpenClaw moved it to "
                    "`agents.defaults.memorySearch`, then `memory.search`): still read, under both.",
    )
    models: ModelsConfig = spec(
        factory=ModelsConfig,
        description="OpenClaw's `models` section, of which memsift reads `providers.<id>.baseUrl`, `apiKey` and "
                    "`headers` for its remote embedding providers.",
    )
