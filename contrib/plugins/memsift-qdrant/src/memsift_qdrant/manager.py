"""`QdrantSearchManager`: one agent's memory in Qdrant, behind memsift's `SearchManager`.

What is Qdrant's: storage (collections per generation, store.py), BM25 as sparse vectors with its
IDF modifier, dense cosine search and payload filters (candidates.py). Everything else is
memsift's, through its backend kit (`IndexedManager`): which files are memory and how they are read and chunked,
the search choreography and ranking (`search_indexed`), snippets, citations and explain, reads
through the memory rules. Above it memsift adds the evidence ranker, rerank, scope and the doors.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from memsift.engine.kit import (
    BackendError,
    ChunkRow,
    IndexedManager,
    IndexUnusableError,
    ManagerStatus,
    ResolvedConfig,
    SyncReport,
    fingerprint_diff,
    get_logger,
)

from .store import Generation, QdrantStore, point_id

if TYPE_CHECKING:
    from .candidates import QdrantCandidates

__all__ = ["QdrantSearchManager"]

log = get_logger("memsift.qdrant")

UPSERT_STEP = 256
_FULL_OR_READ_ONLY = re.compile(r"disk is full|readonly database|read-only file system|disk I/O error", re.I)


def _failure(exc: Exception, where: str) -> BackendError:
    """Qdrant's own errors (a server down, a refused request) as memsift's, said once."""
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return BackendError(f"Qdrant at {where} failed: {text}")


class QdrantSearchManager(IndexedManager):
    backend = "qdrant"
    schema = 1

    def __init__(self, settings: ResolvedConfig, config: Any, progress: Any = None) -> None:
        super().__init__(settings, progress, config)
        self.root = self.agent_folder("qdrant")
        self._store: QdrantStore | None = None
        self._checked: int | None = None  # the generation whose chunks were found whole
        self._known_chunks: dict[str, int] = {}  # path → chunk points, as the file records say (this sync)

    @property
    def store(self) -> QdrantStore:
        if self._store is None:
            self._store = QdrantStore(self.config, self.root, self.agent)
        return self._store

    async def run_blocking(self, fn: Any, *args: Any) -> Any:
        """A blocking store call with the client held for its length; Qdrant's errors said as memsift's."""
        def work() -> Any:
            with self.store.client():
                return fn(*args)

        try:
            return await anyio.to_thread.run_sync(work)
        except (BackendError, IndexUnusableError):
            raise
        except OSError as exc:
            raise IndexUnusableError(
                f"cannot write Qdrant's local folder {self.store.where}: {exc.strerror or exc}"
            ) from None
        except Exception as exc:  # the client's transport and API errors: many classes, one meaning
            if _FULL_OR_READ_ONLY.search(str(exc)):  # local mode's SQLite: the disk's failure, not Qdrant's
                raise IndexUnusableError(
                    f"cannot write Qdrant's local folder {self.store.where}: {str(exc)[:200]}; "
                    "searches answer from it as it is until it can be updated"
                ) from None
            raise _failure(exc, self.store.where) from None

    # --- sync -----------------------------------------------------------------------------------

    async def sync(self, *, force: bool = False, reason: str = "manual", **_: Any) -> SyncReport:
        self.ensure_provider()
        async with self._lock:
            started = self.sync_started()
            report = SyncReport(reason=reason, backend=self.backend)
            await self._sync(report, force)
            return self.synced(report, started)

    async def _sync(self, report: SyncReport, force: bool) -> None:
        current = await self.run_blocking(self.store.current)
        wanted = await self.wanted_meta_with_dims(current.meta if current else None)
        cause = "forced" if force else "no index yet" if current is None else fingerprint_diff(current.meta, wanted)
        if cause is None and current is not None:  # a lost chunks collection is rebuilt, not synced into
            lost = await self.run_blocking(self.store.lost_chunks, current.number)
            cause = f"generation {current.number} was damaged: {lost}" if lost else None
        if self.store.healed and cause == "no index yet":
            cause = self.store.healed
        full = cause is not None
        if full and self.store.read_only:
            self._refuse_read_only()
        if full:
            gen = await self.run_blocking(self.store.claim, wanted["dims"])
            report.full_reindex, report.reindex_cause = True, cause
            known: dict[str, tuple] = {}
            self._known_chunks = {}
        else:
            gen = current.number
            known = await self.run_blocking(self.store.known_files, gen)
            self._known_chunks = await self.run_blocking(self.store.chunk_counts, gen)
        changes = self.file_changes(known, report)
        if self.store.read_only and (changes.changed or changes.gone or changes.touched):
            self._refuse_read_only()
        # BM25's average length is the generation's own, measured when it is built (an incremental
        # sync keeps it, as the weights already written use it).
        average = None if full else current.meta.get("averageLength")
        rows = self.chunk_rows(changes.changed)
        stored: dict[str, Any] = {}
        if full and current is not None and self.reusable(current.meta, wanted):
            stored = await self._stored_vectors(current.number, [r.id for r in rows])
        points, average = await self._points(rows, report, average, stored)
        per_file: dict[str, int] = {}
        for row in rows:
            per_file[row.path] = per_file.get(row.path, 0) + 1
        file_points = [self._file_point(f.rel_path, f.source, got.hash, st.st_mtime_ns, st.st_size,
                                        per_file.get(f.rel_path, 0)) for f, st, got in changes.changed]
        file_points += [self._file_point(f.rel_path, f.source, h, m, s, chunks=None) for f, h, m, s in changes.touched]
        stale = changes.gone + [f.rel_path for f, _st, _got in changes.changed]
        refilled = [] if full else await self._refill(gen, set(stale), report)

        def write() -> None:
            with self.store.client() as client:
                if stale and not full:
                    self.store.forget_paths(gen, stale)
                for i in range(0, len(points), UPSERT_STEP):  # the chunks first, each file's record last
                    client.upsert(self.store.chunks(gen), points=points[i : i + UPSERT_STEP])
                for i in range(0, len(file_points), UPSERT_STEP):
                    client.upsert(self.store.files(gen), points=file_points[i : i + UPSERT_STEP])
                self.store.set_vectors(gen, refilled)
                if full:
                    published = Generation(gen, {**wanted, "averageLength": average, **self.vectors_error_record()})
                    if self.store.publish(published):
                        self.store.drop_before(gen - self.config.keep_generations + 1)
                elif current is not None and not self.store.read_only and \
                        (meta := self.meta_with_vectors_error(current.meta)) is not None:
                    self.store.record_vectors_error(gen, meta.get("vectorsError"))

        await self.run_blocking(write)
        report.files_indexed = len(changes.changed)
        report.chunks_written = len(points)

    async def _refill(self, gen: int, replaced: set[str], report: SyncReport) -> list[tuple[Any, Any]]:
        """(point id, vector) for the chunks an earlier provider failure left without vectors (outside
        the files this sync rewrites), or none."""
        if self.provider is None or self.store.read_only:
            return []
        try:
            points = await self.run_blocking(self.store.without_vectors, gen)
        except BackendError as exc:  # a server before Qdrant 1.13 has no `has_vector` filter
            log.warning("cannot list the chunks without vectors; they are made when their file changes",
                        error=str(exc)[:300])
            return []
        return await self.backfill([(p.id, p.payload["text"]) for p in points if p.payload["path"] not in replaced],
                                   report)

    def _refuse_read_only(self) -> None:
        raise IndexUnusableError(f"cannot write Qdrant's local folder {self.store.where}: {self.store.read_only}; "
                                 "searches answer from it as it is until it can be updated")

    def _file_point(self, path: str, source: str, digest: str, mtime_ns: int, size: int, chunks: int | None) -> Any:
        """A file's record; `chunks`: how many chunk points it has (None: a touched file, whose count
        is its record's own, kept)."""
        from qdrant_client import models  # noqa: PLC0415

        payload: dict[str, Any] = {"path": path, "source": source, "hash": digest, "mtime_ns": mtime_ns, "size": size}
        if chunks is None:
            chunks = self._known_chunks.get(path)
        if chunks is not None:
            payload["chunks"] = chunks
        return models.PointStruct(id=point_id(f"file:{path}"), vector={}, payload=payload)

    async def _stored_vectors(self, gen: int, ids: list[str]) -> dict[str, Any]:
        """chunk id → dense vector of generation `gen` (the one a rebuild replaces) for these ids."""
        try:
            return await self.run_blocking(self.store.dense_vectors, gen, ids)
        except BackendError as exc:  # the old generation cannot help: everything is embedded again
            log.warning("cannot reuse the vectors of the index being replaced", error=str(exc)[:300])
            return {}

    async def _points(
        self, chunks: list[ChunkRow], report: SyncReport, average: float | None, stored: dict[str, Any]
    ) -> tuple[list[Any], float]:
        from qdrant_client import models  # noqa: PLC0415

        from .candidates import day_number, document_terms, sparse_document  # noqa: PLC0415

        terms = [document_terms(c.tokens) for c in chunks]
        if not average:
            average = sum(map(len, terms)) / len(terms) if terms else self.ms.chunking.tokens * 0.75
        vectors = await self.vectors_for(chunks, stored, report)
        points = []
        for n, c in enumerate(chunks):
            vector: dict[str, Any] = {"bm25": sparse_document(terms[n], average)}
            if vectors[n] is not None:
                vector["dense"] = np.asarray(vectors[n], dtype=np.float32).tolist()
            payload = {
                "id": c.id,
                "path": c.path,
                "source": c.source,
                "start_line": c.start_line,
                "end_line": c.end_line,
                "text": c.text,
                "day": c.day.day,
                "day_source": c.day.source,
                "tokens": sorted(set(c.tokens)),
                "first_day": day_number(c.first_day),
                "last_day": day_number(c.last_day),
            }
            points.append(models.PointStruct(id=point_id(c.id), vector=vector, payload=payload))
        return points, average

    # --- search ---------------------------------------------------------------------------------

    async def generation(self) -> Generation | None:
        """The published generation; None (so the search builds one first) when it is damaged: its
        chunks are checked once per process and generation, not on every search."""
        gen = await self.run_blocking(self.store.current)
        if gen is None or gen.number == self._checked:
            return gen
        lost = await self.run_blocking(self.store.lost_chunks, gen.number)
        if lost:
            log.error("Qdrant index damaged; rebuilding from the Markdown files", generation=gen.number, why=lost)
            return None  # the search's sync finds the same and rebuilds
        self._checked = gen.number
        return gen

    def candidates(self, generation: Generation) -> QdrantCandidates:
        # qdrant-client takes over a second to import: `memsift get` (memory_get) never loads it.
        from .candidates import QdrantCandidates  # noqa: PLC0415

        return QdrantCandidates(self.store, generation.number, self.tokenizer, dense=bool(generation.meta.get("dims")))

    # --- status, close --------------------------------------------------------------------------

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        self.ensure_provider()

        def counts() -> tuple[Generation | None, dict[str, tuple], int, int | None, list[int],
                              dict[str, dict[str, int]]]:
            gen = self.store.current()
            if gen is None:
                return None, {}, 0, None, self.store.generations(), {}
            known = self.store.known_files(gen.number)
            return (
                gen,
                known,
                self.store.count(self.store.chunks(gen.number)),
                self.store.with_vectors(gen.number),
                self.store.generations(),
                self.count_by_source(known, lambda source: self.store.count_source(gen.number, source)),
            )

        gen, known, chunks, vectors, generations, by_source = await self.run_blocking(counts)
        return self.status_of(
            gen,
            files=len(known),
            chunks=chunks,
            source_counts=by_source,
            known=known,
            where=self.store.where,
            how="Qdrant (BM25 sparse vectors; dense cosine)",
            fts_search="qdrant-bm25-sparse",
            vector={"rows": vectors, "search": "qdrant dense cosine"},
            index={
                "qdrant": {
                    "where": self.store.where,
                    "mode": "server" if self.config.url else "local",
                    "generation": gen.number if gen else None,
                    "generations": generations,
                }
            },
        )

    async def aclose(self) -> None:
        await super().aclose()
        if self._store is not None:
            self._store.close()
