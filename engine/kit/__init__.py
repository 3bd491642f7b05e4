"""The backend kit: everything a backend plugin imports from memsift, in one place.

A plugin package imports `memsift.engine.kit` (and `memsift.engine.kit.testing` in its tests),
never memsift's internal modules: those may move between releases, the names here stay. What
the kit holds, by what a backend does (docs/contributing/plugins.md walks through it):

- register: `BackendPlugin`, `BackendContext`, `FallbackPolicy`, or for an indexed backend
  `indexed_backend_plugin` with a config model extending `IndexedPluginConfig`;
- be a manager: the `SearchManager` protocol, the optional ones the host uses (`WatchesChanges`,
  `MarksDirty`, `IndexesSessions`, `CountsSearchSyncs`, `RunsInBackground`), `SyncReport`, the
  result models and the errors to raise;
- index the memory files every backend indexes, by the same rules: discovery, safe reading,
  chunking, note dates, the fingerprint that says when a full rebuild is due;
- be an indexed backend with little code: `IndexedManager` is the manager such a backend writes
  alike (provider, fingerprint, changed files and their chunks, embedding, freshness, search,
  the answer, reads, status); a subclass adds its storage and its `CandidateStore`. It stands on
  `IndexedBackend`, the shell memsift's own builtin and Postgres managers stand on too (the
  answer, `Freshness`, reads);
- search as every backend searches: a backend that keeps memsift's chunks in its own engine
  implements `CandidateStore` (keyword and vector candidates, the days' rows, file times) and
  calls `search_indexed`, which runs the rest (plan, sides, time, ranking, hits) as memsift's own
  backends do; the pieces stay here for a backend that searches differently: the parsed
  request, the keyword plan and terms, the query vector within its budget, the ranking pipeline
  (merge, time, decay, MMR, minScore, rescue), hits with snippets and citations, and the
  time-only helpers.
"""

from __future__ import annotations

from ..config import ResolvedConfig
from ..embeddings import ProviderSelection, select_provider
from ..errors import BackendError, ConfigError, IndexUnusableError, ProviderError
from ..files.chunking import CHUNKER_REVISION, Chunk, chunk_id, chunk_markdown
from ..files.discovery import MemoryFile, Skipped, discover_memory_files
from ..files.fingerprint import fingerprint_diff
from ..files.note_dates import NOTE_DATES_REVISION, ChunkDay
from ..files.rules import MemoryRules, read_memory
from ..config.sizes import SNIPPET_MAX_CHARS
from ..files.sync import MarkdownRead, read_markdown, sort_files
from ..logging import get_logger
from ..manager import (CountsSearchSyncs, IndexesSessions, MarksDirty, RunsInBackground, SearchManager, SyncReport,
                       WatchesChanges)
from ..plugins import BackendContext, BackendPlugin, FallbackPolicy
from ..files.flock import flock_within
from ..private_dirs import make_private_dir
from ..results import BelowMinScore, Degraded, ManagerStatus, ReadResult, SearchAnswer, SearchHit
from ..search.citations import citations_enabled
from ..search.expansion import EXPANSION_WEIGHT, keyword_scores
from ..search.fts_query import INDEX_TEXT_REVISION, FtsPlan, plan_query
from ..search.hits import hits_from_ranked
from ..search.indexed import (ROW_FIELDS, CandidateStore, IndexedAnswer, IndexedSearch, Selection, candidate_from_row,
                              complete_from_embeddings, first_per_day, search_indexed)
from ..search.modes import Sides, search_sides
from ..search.pipeline import PipelineParams, rank
from ..embeddings.query import QueryEmbedding, beside
from ..search.ranking import Candidate, bm25_relative_scores
from ..search.request import KeywordSearch, SearchRequest
from ..search.scripts import vector_mode_warning
from ..search.terms import QueryItems, chunk_tokens, expansion_items, query_items, word_terms
from ..search.time_only import (
    COMMON_SHARE,
    MAX_COMMON_WORDS,
    is_weightless,
    names_only_a_time,
    nearby_windows,
    topic_words,
)
from ..search.time_query import TimeBound, TimeWindow
from ..search.time_rank import candidate_windows
from .indexed_manager import Changes, ChunkRow, IndexedManager
from .registration import IndexedPluginConfig, indexed_backend_plugin
from ..compose.shell import Freshness, IndexedBackend

__all__ = [
    # register
    "BackendPlugin",
    "BackendContext",
    "FallbackPolicy",
    "indexed_backend_plugin",
    "IndexedPluginConfig",
    # be a manager
    "SearchManager",
    "WatchesChanges",
    "MarksDirty",
    "IndexesSessions",
    "CountsSearchSyncs",
    "RunsInBackground",
    "SyncReport",
    "SearchAnswer",
    "SearchHit",
    "ReadResult",
    "ManagerStatus",
    "Degraded",
    "BelowMinScore",
    "BackendError",
    "IndexUnusableError",
    "ProviderError",
    "ConfigError",
    "ResolvedConfig",
    "get_logger",
    "make_private_dir",
    "flock_within",
    # an indexed backend's manager, most of it written once
    "IndexedManager",
    "IndexedBackend",
    "Freshness",
    "Changes",
    "ChunkRow",
    "chunk_id",
    # embeddings
    "ProviderSelection",
    "select_provider",
    "QueryEmbedding",
    "beside",
    # memory files
    "MemoryFile",
    "Skipped",
    "discover_memory_files",
    "MarkdownRead",
    "read_markdown",
    "sort_files",
    "MemoryRules",
    "read_memory",
    "Chunk",
    "chunk_markdown",
    "CHUNKER_REVISION",
    "NOTE_DATES_REVISION",
    "ChunkDay",
    "fingerprint_diff",
    "SNIPPET_MAX_CHARS",
    # search
    "SearchRequest",
    "KeywordSearch",
    "CandidateStore",
    "Selection",
    "search_indexed",
    "IndexedSearch",
    "IndexedAnswer",
    "complete_from_embeddings",
    "ROW_FIELDS",
    "candidate_from_row",
    "first_per_day",
    "Sides",
    "FtsPlan",
    "plan_query",
    "INDEX_TEXT_REVISION",
    "QueryItems",
    "chunk_tokens",
    "query_items",
    "expansion_items",
    "word_terms",
    "EXPANSION_WEIGHT",
    "keyword_scores",
    "Candidate",
    "bm25_relative_scores",
    "PipelineParams",
    "rank",
    "hits_from_ranked",
    "search_sides",
    "vector_mode_warning",
    "citations_enabled",
    # time
    "TimeBound",
    "TimeWindow",
    "candidate_windows",
    "names_only_a_time",
    "nearby_windows",
    "topic_words",
    "is_weightless",
    "COMMON_SHARE",
    "MAX_COMMON_WORDS",
]
