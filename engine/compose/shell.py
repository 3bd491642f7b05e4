"""`IndexedBackend`: the shell every indexed backend's manager shares — builtin, Postgres and the
plugins (through the kit's `IndexedManager`, which re-exports it) alike — and `Freshness`, the one
state machine that says when an index must be compared with the files before a search. Here, not
in the kit, so memsift's own backends do not load the whole kit on every cold command.

The shell answers a search the same way on every such backend: the request's sides, the query's
embedding started beside the freshness check and the store's search, explain kept only when
asked, and one `SearchAnswer` built from the backend's facts. A subclass provides:

- `search_fresh(req, degraded, sides, embedding)`: bring the index up to date as this backend
  does (`self.freshness` says when), then search it; returns an `IndexedAnswer`;
- `index_meta()` (ProviderChoice: the published index's meta, read to follow its provider),
  `adopt_index_provider(meta)` where its search reads the meta;
- optionally `query_embedding(q)` (the query's vector within its budget: a circuit, say),
  `answer_notes()` (what the next answer should say once: by default what syncs said) and
  `pending_files()` (files a sync still running has not written);
- after each sync, `sync_finished(report, seen)`: its report, stale vectors, notes, freshness.

The embedding provider (the configured one, or the fallback after it failed) is `ProviderChoice`'s.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from ..embeddings.query import QueryEmbedding, beside
from ..files.rules import MemoryRules, read_memory
from ..logging import get_logger
from ..results import BelowMinScore, Degraded, ReadResult, SearchAnswer
from ..search.indexed import IndexedAnswer
from ..search.modes import Sides, search_sides
from ..search.request import KeywordSearch, SearchRequest
from ..search.scripts import vector_mode_warning
from .provider_choice import ProviderChoice

__all__ = ["Freshness", "IndexedBackend", "vectors_missing"]

log = get_logger("memsift.search")


def vectors_missing(provider: Any, with_vectors: int | None, chunks: int, built: bool) -> dict[str, Any] | None:
    """Status's `vector.pending` (as builtin's keyword-first index shows it) while some chunks of
    an index have no vector (a provider failed when they were written): None when all do."""
    if provider is None or not built or with_vectors is None or with_vectors >= chunks:
        return None
    return {"done": with_vectors, "total": chunks, "etaSeconds": None}


class Freshness:
    """Whether the files must be compared with the index before the next search.

    A new manager has not compared them yet (dirty). A files-changed notice (`mark`: a watcher,
    the host) or the host's exact change check (`watch`: asked before every search) makes it dirty
    again; a sync clears only the notices it saw begin (`sync_begins`, then `synced`): a file
    written while the sync ran is synced by the next search.

    A manager no host watches (the Python API's, kept open by a gateway) arms its own check
    (`own_probe`) at its second search: without one it would never look at the files again, and
    a one-shot CLI search, which asks once, never pays for it."""

    def __init__(self, own_probe: Callable[[], Any] | None = None) -> None:
        self.dirty = True
        self.notices = 0
        self.probe: Any = None  # a long-running host's ChangeProbe, our own, or None
        self._make_own_probe = own_probe
        self._own: Any = None

    def mark(self) -> None:
        self.dirty = True
        self.notices += 1

    def watch(self, probe: Any) -> None:
        """Ask `probe` before every search (None: stop); anything written before it existed is synced next."""
        self._close_own()
        self.probe = probe
        self.mark()

    def due(self) -> bool:
        """Must this search sync first? (The probe is asked now.)"""
        if self.probe is None and not self.dirty and self._make_own_probe is not None:
            self.watch(self._make_own_probe())
            self._own = self.probe
        if self.probe is not None and self.probe.changed():
            self.mark()
        return self.dirty

    def sync_begins(self) -> int:
        return self.notices

    def synced(self, seen: int) -> None:
        """A sync that began at `seen` notices is done: clean unless a notice came meanwhile."""
        self.dirty = self.notices != seen

    def settled(self) -> None:
        """The index answers as it is (no sync on search, or none possible): clean until the next notice."""
        self.dirty = False

    def close(self) -> None:
        """The manager closes: its own change check's inotify queue with it (a host closes its own)."""
        self._close_own()
        self._make_own_probe = None

    def _close_own(self) -> None:
        if self._own is not None:
            if self.probe is self._own:
                self.probe = None
            self._own.close()
            self._own = None


class IndexedBackend(ProviderChoice, KeywordSearch):
    """What a manager over an index of memsift's chunks writes alike (see the module's text)."""

    backend = ""
    stale_cause: str | None = None  # the index was built for other settings: its vectors are not this model's

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.ms = settings.memory_search
        self.memory_rules = MemoryRules.from_settings(settings)
        # No sync on search, no change check: the index answers as it is until a sync.
        self.freshness = Freshness(self._own_change_probe if self.ms.sync.on_search else None)
        self._last_sync: Any = None  # the last sync's report (status shows it)
        self._sync_notes: list[str] = []  # what syncs said (an index kept or to be rebuilt across an upgrade)

    # --- what a subclass provides ---------------------------------------------------------------

    async def search_fresh(self, req: SearchRequest, degraded: Degraded, sides: Sides,
                           embedding: QueryEmbedding | None) -> IndexedAnswer:
        raise NotImplementedError

    def query_embedding(self, q: str) -> QueryEmbedding:
        return QueryEmbedding(self.provider, q)

    async def follow_index(self) -> None:
        """Before a process's first search (or the first after a change) embeds its question: take the
        provider the published index was built with, so a cold search does not ask a provider that
        failed. Later, each backend follows the index with the meta its search reads anyway."""
        if self.freshness.dirty:
            self.adopt_index_provider(await self.index_meta())

    def answer_notes(self) -> list[str]:
        """What syncs said, told once, in the next answer."""
        notes, self._sync_notes = self._sync_notes, []
        return notes

    def sync_finished(self, report: Any, seen: Any) -> None:
        """What a finished sync leaves: its report, whether the vectors are this model's, its notes
        for the next answer, and the changes it saw begin cleared (`Freshness.synced`)."""
        report.fallback = self.fallback()
        self._last_sync = report
        self._sync_notes += report.notes
        self.stale_cause = report.reindex_cause if not report.full_reindex else None
        self.freshness.synced(seen)

    def pending_files(self) -> int | None:
        return None

    def changes_since_index(self, known: Mapping[str, tuple[int, int]], reasons: Mapping[str, str], *,
                            media: tuple[str, ...] = (), judge: Callable[[Any], str | None] | None = None
                            ) -> tuple[int, list[dict[str, str]]]:
        """Status's `pendingChanges` and `skipped`: the memory files on disk now (`media`: the image and
        audio extensions the index holds) against the index's `known` ones (path → (mtime_ns, size),
        transcripts left out: their watch syncs them), with `reasons` (what the last sync skipped)
        and what discovery skips now; `judge` as `files.sync.pending_changes`."""
        from ..files.discovery import discover_memory_files  # noqa: PLC0415  (status only)
        from ..files.sync import pending_changes  # noqa: PLC0415

        files, found = discover_memory_files(self.settings.workspace, self.ms.extra_paths, media)
        return pending_changes(files, known, {**reasons, **{s.path: s.reason for s in found}}, judge)

    # --- freshness (the host's calls: WatchesChanges, MarksDirty) --------------------------------

    def mark_dirty(self) -> None:
        """Files changed: the next search syncs them first."""
        self.freshness.mark()

    def _own_change_probe(self) -> Any:
        """The exact change check a manager no host watches makes for itself (`Freshness`)."""
        from ..files.change_probe import memory_change_probe  # noqa: PLC0415  (only a manager kept open)

        return memory_change_probe(self.settings)

    def watch_changes(self, probe: Any) -> None:
        """A long-running host (watch, MCP) hands over an exact change check (`ChangeProbe`, or
        None to stop): every search asks it first, so a file written just before the search is
        synced instead of waiting for the watcher to hear of it."""
        self.freshness.watch(probe)

    # --- search ---------------------------------------------------------------------------------

    @property
    def query_config(self) -> Any:
        return self.ms.query

    async def answer(self, req: SearchRequest) -> SearchAnswer:
        started = time.perf_counter()
        self.ensure_provider()
        degraded = Degraded()
        found = IndexedAnswer([], "none")
        if req.q:
            await self.follow_index()
            sides = search_sides(req.q, req.mode, hybrid_enabled=self.ms.query.hybrid.enabled, provider=self.provider)
            embedding = self.query_embedding(req.q) if sides.vector and self.provider is not None else None

            async def fresh_search() -> IndexedAnswer:
                return await self.search_fresh(req, degraded, sides, embedding)

            # The query's vector is computed while the freshness check and the store's search run
            # (both wait mostly in native code), instead of before them.
            found = await beside(embedding.run if embedding else None, fresh_search)
            if not req.explain:  # explained always below: whether a hit was rescued under minScore shows on every hit
                for hit in found.hits:
                    hit.explain = None
        log.debug("search done", backend=self.backend, mode=found.mode, hits=len(found.hits),
                  took_ms=round((time.perf_counter() - started) * 1000, 1), sync_pending=found.sync_pending,
                  degraded=degraded.model_dump(exclude_none=True) or None)
        return self.answer_of(req, found, degraded, started)

    def answer_of(self, req: SearchRequest, found: IndexedAnswer, degraded: Degraded, started: float) -> SearchAnswer:
        """The one answer of every indexed backend, from what its search found."""
        # `--mode vector` alone, asked for, in a script the model does not cover: say its results are noise.
        warning = vector_mode_warning(req.q, self.provider) if req.q and req.mode == "vector" else None
        notes = [n for n in (*self.answer_notes(), warning) if n]
        below = found.below_min_score
        p = self.provider
        return SearchAnswer(
            query=req.query, results=found.hits, backend=self.backend, mode=found.mode,
            provider=p.id if p else "none", model=p.model if p else None,
            citations=self.settings.memory.citations, degraded=degraded, fallback=self.fallback(),
            min_score=req.floor, max_results=req.limit, took_ms=round((time.perf_counter() - started) * 1000, 3),
            relaxed=found.relaxed, sync_pending=found.sync_pending or None,
            pending_files=self.pending_files() if found.sync_pending else None, sync_error=found.sync_error,
            notes=notes or None,
            below_min_score=BelowMinScore(candidates=below[0], best_score=below[1]) if below else None,
            **req.time_facts(time_only=found.time_only),
        )

    async def query_vector(self, q: str, degraded: Degraded, embedding: QueryEmbedding | None) -> Any:
        """The question's vector (from `embedding`, started beside the search), or None saying why in
        `degraded`: no provider (unless "none" was chosen), an index built for other settings, or the
        embedding's own failure. A provider that changed since (a fallback) embeds the question anew."""
        if self.provider is None:
            selection = self.selection
            if selection is None or selection.requested != "none":  # provider "none" is a choice, not an outage
                why = selection.unavailable_reason if selection is not None else None
                degraded.vector = f"no embedding provider: {why or 'none configured'}"
            return None
        if self.stale_cause:
            degraded.vector = f"index was built for other settings ({self.stale_cause}); run `memsift index` to rebuild"
            return None
        if embedding is None or embedding.provider is not self.provider:  # none started, or the provider changed
            embedding = self.query_embedding(q)
            await embedding.run()
        await embedding.done.wait()
        if embedding.error:
            degraded.vector = embedding.error
        return embedding.vector

    # --- read -----------------------------------------------------------------------------------

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   max_chars: int | None = None, offset: int = 0) -> ReadResult:
        return await read_memory(self.memory_rules, path, from_line, lines, max_chars=max_chars, offset=offset)
