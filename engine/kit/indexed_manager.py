"""`IndexedManager`: the part of a `SearchManager` that every plugin backend keeping memsift's
chunks in its own store writes alike, written once.

A subclass says where its index lives and how it is stored; this class does the rest the way
memsift's own backends do it: the embedding provider, the fingerprint that says when a rebuild
is due, which files changed since the last sync and their chunks, embedding in steps with
progress, syncing what changed before a search, the search itself (through `search_indexed`
over the subclass's `CandidateStore`), the answer, reads through the memory rules, and status.

A subclass implements:

- `sync(force=, reason=)`: its own writes, using `file_changes`, `chunk_rows` and `embed`, and
  on an incremental sync `backfill` for the chunks an earlier provider failure left without vectors;
- `generation()`: the published index (an object with `number` and `meta`), or None;
- `candidates(generation)`: its `CandidateStore` over that index;
- optionally `run_blocking(fn, *args)`: how a blocking store call runs (a worker thread by default),
  and `search_published(...)` to wrap the search (a retry after a rebuild, say).

Session transcripts (`sources: ["memory", "sessions"]` with `experimental.sessionMemory`) come
with the files `file_changes` returns, as on builtin: `sessions/<name>.jsonl` hits whose lines are
the JSONL's, compared by a sync someone asked for, a host's start, interval and transcript-growth
syncs, never waited on by a search's or a watcher's sync; no longer a source, their rows go. A
subclass keeps each file's source in what `known` gives (its fourth field) and each chunk's.

The subclass's `sync` is wrapped (`__init_subclass__`) with memsift's embedding-provider fallback
(engine/compose/provider_choice.py): one sync at a time; a sync someone asked for tries the
configured provider again; and a sync whose report says its vectors could not be made runs once
more with `memorySearch.fallback` when one can be taken (a full rebuild: the fingerprint's provider
changed), recorded in the published meta for other processes.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import anyio

from ..config import ResolvedConfig
from ..errors import IndexUnusableError, ProviderError
from ..files.chunking import CHUNKER_REVISION, chunk_id
from ..files.discovery import MemoryFile, Skipped, discover_memory_files
from ..files.fingerprint import fingerprint_diff, version_stamps
from ..files.note_dates import NOTE_DATES_REVISION, ChunkDay
from ..files.sync import MarkdownRead, read_markdown, read_transcript, session_days_key, skip_reason, sort_files
from ..files.transcripts import list_transcripts, sessions_folder
from ..lazy import np  # numpy on first use: plugins import the kit on every command
from ..logging import get_logger
from ..manager import SyncReport
from ..results import Degraded, ManagerStatus
from ..secrets import redact
from ..search.citations import citations_enabled
from ..search.fts_query import INDEX_TEXT_REVISION
from ..search.indexed import CandidateStore, IndexedAnswer, IndexedSearch, search_indexed
from ..search.modes import Sides
from ..embeddings.query import QueryEmbedding
from ..search.request import SearchRequest
from ..search.terms import chunk_tokens

from ..compose.shell import IndexedBackend, vectors_missing

__all__ = ["IndexedManager", "Changes", "ChunkRow", "SyncStart"]

log = get_logger("memsift.kit")

OTHER_MODEL = "the index was built for another embedding model; run `memsift index` to rebuild"


@dataclass
class Changes:
    """What a sync finds on disk against what the index holds."""

    changed: list[tuple[MemoryFile, os.stat_result, MarkdownRead]]  # new or edited: read and chunked
    touched: list[tuple[MemoryFile, str, int, int]]  # same bytes, new mtime: (file, hash, mtime_ns, size)
    gone: list[str]  # indexed paths no longer on disk


@dataclass(frozen=True)
class SyncStart:
    """When a sync began (`IndexedManager.sync_started`)."""

    clock: float  # time.perf_counter()
    notices: int  # Freshness.notices then


@dataclass
class ChunkRow:
    """One chunk to store: where it is, its text, its day and its FTS5 tokens."""

    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    day: ChunkDay
    tokens: list[str]

    @property
    def first_day(self) -> str | None:
        return min(self.day.days, default=self.day.day)

    @property
    def last_day(self) -> str | None:
        return max(self.day.days, default=self.day.day)


class IndexedManager(IndexedBackend):
    schema = 1  # the subclass's storage layout: a new one rebuilds
    embed_step = 64  # chunks per local-model call (progress between them)
    indexes_sessions = True  # its sync takes `include_sessions` (engine/manager.py IndexesSessions)

    def __init__(self, settings: ResolvedConfig, progress: Any = None, config: Any = None) -> None:
        super().__init__(settings)
        self.progress = progress  # (stage, done, total): "files", then "embed", as memsift's CLI shows them
        self.config = config  # the plugin's `memory.<backend>` block, validated (an IndexedPluginConfig)
        self.agent = settings.agent_id
        self.tokenizer = self.ms.store.fts.tokenizer
        self._last_sync: SyncReport | None = None
        self._embed_error: str | None = None
        self._skipped: list[Skipped] = []
        self._lock = anyio.Lock()
        self._sync_turn = anyio.Lock()  # one sync at a time, its provider switch and rerun included
        self._include_sessions = True  # the running sync's: does it compare session transcripts?

    def syncing(self) -> bool:
        return self._sync_turn.locked()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        own = cls.__dict__.get("sync")
        if own is not None and not getattr(own, "with_provider_fallback", False):
            cls.sync = _with_provider_fallback(own)  # type: ignore[method-assign]

    def agent_folder(self, name: str) -> Path:
        """Where this agent's index lives: the config's `path` (~ expanded; a relative one is under the
        state folder), else `<stateDir>/agents/<agent>/<name>`."""
        state = self.settings.state_dir
        given = getattr(self.config, "path", None)
        root = Path(os.path.expanduser(given)) if given else state / "agents" / self.agent / name
        return root if root.is_absolute() else state / root

    # --- what a subclass provides ---------------------------------------------------------------

    async def sync(self, *, force: bool = False, reason: str = "manual", **_: Any) -> SyncReport:
        raise NotImplementedError

    async def generation(self) -> Any:
        """The published index (`number`, `meta`), or None when there is none yet."""
        raise NotImplementedError

    def candidates(self, generation: Any) -> CandidateStore:
        raise NotImplementedError

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A blocking store call, off the event loop."""
        return await anyio.to_thread.run_sync(fn, *args)

    # --- sync -----------------------------------------------------------------------------------

    def wanted_meta(self, current: dict[str, Any] | None = None) -> dict[str, Any]:
        """The index's fingerprint: any difference from the built one means a full rebuild (which
        memsift built it is recorded, never compared). A remote provider tells its vectors' size
        only once it has answered: until then it is the size `current` (the built index's meta)
        recorded for the same provider."""
        p = self.provider
        c = self.ms.chunking
        dims = p.dimensions if p else None
        if p is not None and dims is None and current and current.get("providerKey") == p.fingerprint:
            dims = current.get("dims")
        return {"schema": self.schema, "provider": p.id if p else "none", "model": p.model if p else "fts-only",
                "providerKey": p.fingerprint if p else "fts-only", "dims": dims,
                "extraPaths": sorted(self.ms.extra_paths), "chunkStrategy": c.strategy, "chunkTokens": c.tokens,
                "chunkOverlap": c.overlap, "chunker": CHUNKER_REVISION, "ftsTokenizer": self.tokenizer,
                "ftsText": INDEX_TEXT_REVISION, "noteDates": NOTE_DATES_REVISION, **session_days_key(self.ms),
                **version_stamps(None, rebuilt=True),  # published with a new index: this memsift built it
                **self.fallback_record()}  # recorded, never compared

    async def wanted_meta_with_dims(self, current: dict[str, Any] | None) -> dict[str, Any]:
        """`wanted_meta(current)`, with the vectors' size asked of the provider (one short text) when
        neither it nor the index knows it yet: a store made without room for vectors would drop
        every vector of its build. A provider that fails leaves it unknown (the report says why)."""
        wanted = self.wanted_meta(current)
        if self.provider is None or wanted["dims"] is not None:
            return wanted
        try:
            await self.provider.embed_query("memsift")
        except ProviderError as exc:
            self._embedding_failed(exc)
            return wanted
        return self.wanted_meta(current)

    def _embedding_failed(self, exc: ProviderError) -> None:
        """This sync's embedding failed: said in its report (and status), and no further call this sync."""
        self._embed_error = str(exc)
        if self.may_fall_back():  # the switch's own warning follows: said once
            log.info("embedding failed; the fallback provider is taken next", backend=self.backend, error=str(exc))
        else:
            log.warning("embedding failed; chunks stored without vectors", backend=self.backend, error=str(exc))

    def file_changes(self, known: dict[str, tuple], report: SyncReport) -> Changes:
        """The memory files (and session transcripts, see the module's text) against `known` (path →
        (hash, mtime_ns, size[, source])), read and chunked where they changed; images and audio
        are not indexed by these backends."""
        files, skipped = discover_memory_files(self.settings.workspace, self.ms.extra_paths)
        files = [f for f in files if f.modality is None]
        if "sessions" in self.ms.sources:
            if self._include_sessions or not known:  # a first or full build holds them all
                files += [MemoryFile(str(p), f"sessions/{p.name}", source="sessions")
                          for p in list_transcripts(sessions_folder(self.settings))]
            else:  # this sync leaves them as indexed: neither compared nor removed
                known = {path: row for path, row in known.items() if _source(row) != "sessions"}
        report.files_seen = len(files)
        strategy, tokens, overlap = self.ms.chunking.strategy, self.ms.chunking.tokens, self.ms.chunking.overlap
        assert strategy is not None and tokens is not None and overlap is not None  # normalised when loaded

        def read(f: MemoryFile, st: os.stat_result) -> tuple[MemoryFile, os.stat_result, MarkdownRead] | None:
            limit = getattr(self.provider, "max_input_bytes", None)
            if f.source == "sessions":
                got = read_transcript(f, skipped, strategy=strategy, tokens=tokens, overlap=overlap,
                                      max_input_bytes=limit, zone=self.ms.query.time.timezone)
            else:
                got = read_markdown(f, st, skipped, strategy=strategy, tokens=tokens, overlap=overlap,
                                    max_input_bytes=limit)
            return (f, st, got) if got is not None else None

        each = (lambda n: self.progress("files", n, len(files))) if self.progress else None
        sorted_files = sort_files(files, known, skipped, read, lambda p: p[2].hash, each)
        gone = sorted(set(known) - {f.rel_path for f in files})
        report.files_unchanged, report.files_removed, report.files_skipped = (
            sorted_files.unchanged,
            len(gone),
            len(skipped),
        )
        self._skipped = skipped
        touched = [(f, known[f.rel_path][0], m, s) for f, m, s in sorted_files.touched]
        return Changes(sorted_files.changed, touched, gone)

    def chunk_rows(self, changed: list[tuple[MemoryFile, os.stat_result, MarkdownRead]]) -> list[ChunkRow]:
        model = self.provider.model if self.provider else "fts-only"
        rows = []
        for f, _st, got in changed:
            for i, ch in enumerate(got.chunks):
                rows.append(
                    ChunkRow(
                        chunk_id(f.source, f.rel_path, ch.start_line, ch.end_line, ch.hash, model),
                        f.rel_path,
                        f.source,
                        ch.start_line,
                        ch.end_line,
                        ch.text,
                        got.days[i] if i < len(got.days) else ChunkDay(None, None),
                        chunk_tokens(ch.text, self.tokenizer),
                    )
                )
        return rows

    async def embed(self, texts: list[str]) -> Any:
        """The chunks' vectors, or None: a provider failure keeps the text searchable (no vectors)
        and is shown in status until a sync embeds again."""
        if self.provider is None or not texts or self._embed_error is not None:
            return None  # after one failure in a sync no further call asks the provider (as builtin)
        step = self.embed_step if self.provider.id == "local" else len(texts)
        try:
            parts = []
            for i in range(0, len(texts), step):
                parts.append(await self.provider.embed_documents(texts[i : i + step]))
                if self.progress:
                    self.progress("embed", min(i + step, len(texts)), len(texts))
        except ProviderError as exc:
            self._embedding_failed(exc)
            return None
        self._embed_error = None
        return np.vstack(parts)

    @staticmethod
    def reusable(current: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
        """Whether the published index's vectors serve the one being built: the same provider, the
        same size (a forced rebuild, a memsift upgrade, another `extraPaths`)."""
        if not current or wanted["dims"] is None:
            return False
        return current.get("dims") == wanted["dims"] and current.get("providerKey") == wanted["providerKey"]

    async def vectors_for(self, rows: list[ChunkRow], stored: dict[str, Any], report: SyncReport) -> list[Any]:
        """Each row's vector: the one `stored` holds for its id (from the index being replaced, when
        `reusable`: a rebuild pays nothing for chunks that did not change, as builtin's cache), else
        embedded now; None for a row whose vector the provider failed to make."""
        if self.provider is None or not rows:
            return [None] * len(rows)
        todo = [i for i, r in enumerate(rows) if r.id not in stored]
        made = await self.embed([rows[i].text for i in todo]) if todo else None
        out = [stored.get(r.id) for r in rows]
        if made is not None:
            for j, i in enumerate(todo):
                out[i] = made[j]
            report.chunks_embedded += len(todo)
        report.chunks_from_cache += len(rows) - len(todo)
        return out

    async def backfill(self, missing: list[tuple[Any, str]], report: SyncReport) -> list[tuple[Any, Any]]:
        """Vectors for chunks stored without them (`(key, text)` pairs: a provider failed when they
        were written), as `(key, vector)` pairs; none when this sync's embedding already failed or
        fails again (the chunks stay searchable by keyword, and status says why)."""
        if not missing or self.provider is None or self._embed_error is not None:
            return []
        vectors = await self.embed([text for _key, text in missing])
        if vectors is None:
            return []
        report.chunks_embedded += len(missing)
        return [(key, vectors[i]) for i, (key, _text) in enumerate(missing)]

    def vectors_error_record(self) -> dict[str, Any]:
        """What a published meta records of this sync's embedding failure (`{}` when its vectors
        were made): read back by `status` in any process while chunks wait for vectors."""
        return {"vectorsError": redact(self._embed_error)} if self._embed_error else {}

    def meta_with_vectors_error(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        """For an incremental sync: the published generation's `meta` with this sync's embedding
        failure recorded (or its old one dropped), or None when that is what it says already."""
        kept = {k: v for k, v in meta.items() if k != "vectorsError"}
        new = {**kept, **self.vectors_error_record()}
        return None if new == meta else new

    def sync_started(self) -> SyncStart:
        """Taken when a sync begins: its clock, and the files-changed notices it will have seen."""
        self._embed_error = None  # this sync's embedding (or backfill) says it again if it still fails
        return SyncStart(time.perf_counter(), self.freshness.sync_begins())

    def synced(self, report: SyncReport, started: SyncStart) -> SyncReport:
        """A sync's report, and the index clean unless files changed while it ran."""
        report.took_ms = round((time.perf_counter() - started.clock) * 1000, 3)
        report.vectors_error = redact(self._embed_error) if self._embed_error else None
        report.fallback = self.fallback()
        self._last_sync = report
        self.freshness.synced(started.notices)
        log.info("sync done", **report.model_dump(exclude_none=True))
        return report

    async def _ensure_fresh(self) -> str | None:
        """Sync what changed before a search; returns why the index could not be updated, if so."""
        due = self.freshness.due()
        if await self.generation() is None:  # none yet, or its tables gone: built from the notes
            await self.sync(reason="bootstrap")
        elif not due:
            return None
        elif self.ms.sync.on_search:
            try:
                await self.sync(reason="search", include_sessions=False)  # never waits on transcripts
            except IndexUnusableError as exc:  # a full disk or a read-only folder: the index as it is answers
                log.warning("index not updated; answering from it as it is", error=str(exc))
                self.freshness.settled()
                return f"the index could not be updated ({exc})"
        else:
            self.freshness.settled()
        return None

    # --- search ---------------------------------------------------------------------------------

    async def index_meta(self) -> dict[str, Any] | None:
        gen = await self.generation()
        return gen.meta if gen is not None else None

    async def search_fresh(self, req: SearchRequest, degraded: Degraded, sides: Sides,
                           embedding: QueryEmbedding | None) -> IndexedAnswer:
        sync_error = await self._ensure_fresh()
        return replace(await self.search_published(req, degraded, sides, embedding), sync_error=sync_error)

    async def search_published(self, req: SearchRequest, degraded: Degraded, sides: Sides,
                      embedding: QueryEmbedding | None) -> IndexedAnswer:
        """The published index searched through `search_indexed`."""
        gen = await self.generation()
        if gen is None:
            return IndexedAnswer([], "none")
        self.adopt_index_provider(gen.meta)  # another process may have rebuilt it with the fallback, or back

        async def query_vector() -> Any:
            qvec = await self.query_vector(req.q, degraded, embedding)
            if qvec is not None and gen.meta.get("dims") != len(qvec):
                degraded.vector = OTHER_MODEL
                return None
            return qvec

        how = IndexedSearch(self.ms.query, self.tokenizer, sides, query_vector, degraded, run=self.run_blocking,
                            cite=citations_enabled(self.settings.memory.citations, req.session_key))
        return await search_indexed(self.candidates(gen), req, how)

    # --- status, close --------------------------------------------------------------------------

    def status_of(self, gen: Any, *, files: int, chunks: int, where: str, how: str, fts_search: str,
                vector: dict[str, Any], index: dict[str, Any],
                source_counts: dict[str, dict[str, int]] | None = None,
                known: dict[str, tuple] | None = None) -> ManagerStatus:
        """Status as memsift's CLI and tools show it; `how` says how this store searches, `index`
        holds what only this backend knows (its generations, where it runs); `source_counts` (from
        `count_by_source`) the files and chunks of each source, as builtin's `sourceCounts`; `known`
        the generation's files (path → (hash, mtime_ns, size[, source])), against which the files
        on disk give `pendingChanges` and the skipped ones, in any process."""
        if gen is not None:
            self.adopt_index_provider(gen.meta)
        stale = self.rebuild_needed(gen)
        indexed = {path: (row[1], row[2]) for path, row in (known or {}).items() if _source(row) != "sessions"}
        # These stores keep no record of what a sync skipped: this process's last sync's, else judged now.
        changed, skipped = self.changes_since_index(indexed, {s.path: s.reason for s in self._skipped},
                                                    judge=skip_reason)
        p = self.provider
        pending = vectors_missing(p, vector.get("rows"), chunks, gen is not None)
        mode = "fts-only" if p is None or stale else "hybrid"
        now_says = ("build the index first, then search" if gen is None
                    else f"{mode} over {chunks} chunks in {how}{self.fallback_words()}")
        return ManagerStatus(
            backend=self.backend, agent_id=self.agent, workspace_dir=str(self.settings.workspace), db_path=where,
            files=files, chunks=chunks, dirty=gen is None or stale is not None or changed > 0,
            provider=p.id if p else "none", requested_provider=self.selection.requested if self.selection else None,
            model=p.model if p else None, dimensions=getattr(p, "dimensions", None),
            model_runtime=getattr(p, "runtime", None), sources=list(self.ms.sources),
            extra_paths=list(self.ms.extra_paths), source_counts=source_counts or {}, search_mode=mode,
            search_now=now_says,
            provider_unavailable_reason=self.selection.unavailable_reason if self.selection else None,
            fallback=self.fallback(),
            fts={"enabled": True, "available": gen is not None, "tokenizer": self.tokenizer, "search": fts_search},
            vector={"enabled": p is not None, "available": p is not None, "pending": pending, **vector},
            cache={"enabled": False, "entries": 0, "maxEntries": 0},
            index={"exists": gen is not None, "meta": gen.meta if gen else None, "rebuildNeeded": stale,
                   "pendingChanges": changed, "lastEmbedError": self._last_embed_error(gen), **index},
            last_sync=self._last_sync.model_dump(by_alias=True) if self._last_sync else None,
            skipped=skipped,
        )

    @staticmethod
    def count_by_source(known: dict[str, tuple], chunks_of: Callable[[str], int]) -> dict[str, dict[str, int]]:
        """{source: {files, chunks}} for `status_of`: the files from a generation's `known` rows,
        the chunks asked of the store once per source found (`chunks_of(source)`)."""
        files = Counter(_source(row) for row in known.values())
        return {source: {"files": n, "chunks": chunks_of(source)} for source, n in sorted(files.items())}

    def _last_embed_error(self, gen: Any) -> str | None:
        """This process's last embedding failure, else the one the index records: its last sync's,
        in another process (`memsift index`, a gateway), dropped by the sync that made the vectors."""
        return self._embed_error or (gen.meta.get("vectorsError") if gen is not None else None)

    def rebuild_needed(self, gen: Any) -> str | None:
        return fingerprint_diff(gen.meta, self.wanted_meta(gen.meta)) if gen is not None else None

    async def aclose(self) -> None:
        await self.close_providers()
        self.freshness.close()


def _source(known_row: tuple) -> str:
    """The source a subclass's `known` row names (its fourth field; a row of three: memory)."""
    return known_row[3] if len(known_row) > 3 else "memory"


def _with_provider_fallback(sync: Callable[..., Any]) -> Callable[..., Any]:
    """A subclass's `sync` with the embedding-provider fallback around it (see the module's text)."""

    @functools.wraps(sync)
    async def run(self: IndexedManager, *, force: bool = False, reason: str = "manual", include_sessions: bool = True,
                  **kw: Any) -> SyncReport:
        self.ensure_provider()
        async with self._sync_turn:  # the provider is not switched under another sync
            self._include_sessions = include_sessions
            try:
                await self.sync_begins_with(reason)
                report = await sync(self, force=force, reason=reason, **kw)
                if report.vectors_error and self.switch_to_fallback(report.vectors_error):
                    report = await sync(self, force=force, reason=reason, **kw)
                return report
            finally:
                self._include_sessions = True

    run.with_provider_fallback = True  # type: ignore[attr-defined]
    return run
