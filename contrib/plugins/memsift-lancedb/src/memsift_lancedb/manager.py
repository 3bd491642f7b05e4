"""`LanceSearchManager`: one agent's memory in an embedded LanceDB database, behind memsift's
`SearchManager`.

What is LanceDB's: storage (a Lance dataset per table), the full-text index (BM25 over the
chunk's FTS5 tokens) and vector search (exact cosine; nulls skipped). Everything else is
memsift's, most of it through the kit's `IndexedManager`, used as its own backends use it: which files are memory and
how they are read and chunked (engine/files), the query plan, the time filters and windows, the ranking pipeline
(weighted merge, decay, MMR, minScore, keyword rescue), snippets, citations and explain (engine/search), and reads
through the memory rules. Above it memsift adds the evidence ranker, rerank, scope rules and the doors.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from memsift.engine.kit import (BackendError, ChunkRow, Degraded, IndexedAnswer, IndexedManager, IndexUnusableError,
                                ManagerStatus, QueryEmbedding, ResolvedConfig, SearchRequest, Sides, SyncReport,
                                fingerprint_diff, get_logger)

from .candidates import LanceCandidates
from .sql import quote

__all__ = ["LanceSearchManager"]

log = get_logger("memsift.lancedb")

# What LanceDB raises for a damaged dataset: a missing or truncated file, a corrupt page ("lance
# error: …", a panic in a reader task). Disk errors (OSError) are not damage: the data is intact.
DAMAGE = (RuntimeError, ValueError)


class LanceSearchManager(IndexedManager):
    backend = "lancedb"
    schema = 1

    def __init__(self, settings: ResolvedConfig, config: Any, progress: Any = None) -> None:
        super().__init__(settings, progress, config)
        self.root = self.agent_folder("lancedb")
        self._store: Any = None

    @property
    def store(self) -> Any:
        """The agent's Lance database, opened at first use: importing lancedb takes most of a second,
        and `read` (memory_get) never needs it."""
        if self._store is None:
            from .store import LanceStore  # noqa: PLC0415

            self._store = LanceStore(self.root)
        return self._store

    # --- sync -----------------------------------------------------------------------------------

    async def sync(self, *, force: bool = False, reason: str = "manual", **_: Any) -> SyncReport:
        self.ensure_provider()
        async with self._lock:
            started = self.sync_started()
            report = SyncReport(reason=reason, backend=self.backend)
            try:
                with self.store.writing():
                    report = await self._sync_or_heal(report, force, reason)
            except OSError as exc:  # a full disk, a read-only folder: the data as it is stays searchable
                raise IndexUnusableError(f"cannot write the LanceDB dataset at {self.store.root}: {_os_error(exc)}; "
                                         "searches answer from it as it is until it can be updated") from None
            return self.synced(report, started)

    async def _sync_or_heal(self, report: SyncReport, force: bool, reason: str) -> SyncReport:
        try:
            await self._sync(report, force)
        except DAMAGE as exc:
            if (storage := _storage_error(exc)) is not None:
                raise storage from None  # the disk's or the folder's failure: the data is intact
            if force:
                raise BackendError(_damaged(self.store.root, exc, again=True)) from None
            # The files are the truth: a new generation is built from them beside the damaged one
            # (dropped once `keepGenerations` newer ones exist).
            log.error("LanceDB dataset damaged; rebuilding from the Markdown files", error=_short(exc))
            report = SyncReport(reason=reason, backend=self.backend)
            await self._sync(report, True, cause=f"the dataset was damaged ({_short(exc)})")
        return report

    async def _sync(self, report: SyncReport, force: bool, cause: str | None = None) -> None:
        current = self.store.current()
        wanted = await self.wanted_meta_with_dims(current.meta if current else None)
        if force:
            cause = cause or "forced"
        elif current is None:
            cause = "the index pointer (current.json) was damaged" if self.store.pointer.exists() else "no index yet"
        else:
            cause = fingerprint_diff(current.meta, wanted)
        full = cause is not None
        gen = self.store.next_generation() if full else current.number
        if full:
            report.full_reindex, report.reindex_cause = True, cause
            await anyio.to_thread.run_sync(self.store.create, gen, wanted["dims"])
            known: dict[str, tuple] = {}
        else:
            known = await anyio.to_thread.run_sync(self.store.known_files, gen)
        changes = self.file_changes(known, report)
        chunks = self.chunk_rows(changes.changed)
        reuse = current.number if full and current is not None and self.reusable(current.meta, wanted) else None
        rows = await self._rows(chunks, report, await self._stored_vectors(reuse, [c.id for c in chunks]))
        file_rows = [{"path": f.rel_path, "source": f.source, "hash": got.hash, "mtime_ns": st.st_mtime_ns,
                      "size": st.st_size} for f, st, got in changes.changed]
        file_rows += [{"path": f.rel_path, "source": f.source, "hash": h, "mtime_ns": m, "size": s}
                      for f, h, m, s in changes.touched]
        stale = changes.gone + [f.rel_path for f, _st, _got in changes.changed]
        # A touched file (a new time, the same text) keeps its chunks (and gets the vectors they lack,
        # as any other file); its row is replaced (no upsert here).
        touched = [t[0].rel_path for t in changes.touched]
        refilled = [] if full else await self._refill(gen, set(stale), report)

        def write() -> None:
            import pyarrow as pa  # noqa: PLC0415

            from .store import Generation  # noqa: PLC0415

            if stale and not full:
                self.store.forget_paths(gen, stale)
            if touched and not full:
                self.store.forget_paths(gen, touched, keep_chunks=True)
            if rows:
                self.store.chunks(gen).add(pa.Table.from_pylist(rows, schema=self.store.chunks(gen).schema))
            if refilled:  # the same chunks, now with their vectors
                table = self.store.chunks(gen)
                table.merge_insert("id").when_matched_update_all().execute(
                    pa.Table.from_pylist(refilled, schema=table.schema))
            if file_rows:
                self.store.files(gen).add(pa.Table.from_pylist(file_rows, schema=self.store.files(gen).schema))
            if full or (rows and not self.store.has_text_index(gen)):
                if self.store.chunks(gen).count_rows():
                    self.store.index_text(gen)
            elif rows or stale:
                self.store.chunks(gen).optimize()  # folds new rows into the indexes, drops deleted ones
            if full:
                self.store.publish(Generation(gen, {**wanted, **self.vectors_error_record()}))
                self.store.drop_before(gen - self.config.keep_generations + 1)
            elif current is not None and (meta := self.meta_with_vectors_error(current.meta)) is not None:
                self.store.publish(Generation(gen, meta))  # the same generation (under the writers' lock)

        await anyio.to_thread.run_sync(write)
        report.files_indexed = len(changes.changed)
        report.chunks_written = len(rows)

    async def _refill(self, gen: int, replaced: set[str], report: SyncReport) -> list[dict]:
        """The chunks an earlier provider failure left without vectors (outside the files this sync
        rewrites), with their vectors now, or none."""
        if self.provider is None:
            return []

        def missing() -> list[dict]:
            table = self.store.chunks(gen)
            if "vector" not in table.schema.names:  # made before the vectors' size was known: a rebuild comes
                return []
            count = table.count_rows("vector IS NULL")
            found = table.search().where("vector IS NULL").limit(count).to_list() if count else []
            return [r for r in found if r["path"] not in replaced]

        rows = await anyio.to_thread.run_sync(missing)
        made = dict(await self.backfill([(r["id"], r["text"]) for r in rows], report))
        for r in rows:
            r["vector"] = np.asarray(made[r["id"]], dtype=np.float32) if r["id"] in made else None
        return [r for r in rows if r["vector"] is not None]

    async def _stored_vectors(self, gen: int | None, ids: list[str]) -> dict[str, Any]:
        """id → vector of generation `gen` (the one a rebuild replaces) for these chunk ids."""
        if gen is None or not ids:
            return {}

        def read() -> dict[str, Any]:
            table, found = self.store.chunks(gen), {}
            for i in range(0, len(ids), 500):  # ids are sha256 hex: nothing to quote
                part = ids[i : i + 500]
                where = f"vector IS NOT NULL AND id IN ({', '.join(repr(x) for x in part)})"
                for r in table.search().where(where).select(["id", "vector"]).limit(len(part)).to_list():
                    found[r["id"]] = r["vector"]
            return found

        try:
            return await anyio.to_thread.run_sync(read)
        except (*DAMAGE, OSError) as exc:  # the old generation cannot help: everything is embedded again
            log.warning("cannot reuse the vectors of the index being replaced", error=_short(exc))
            return {}

    async def _rows(self, chunks: list[ChunkRow], report: SyncReport, stored: dict[str, Any]) -> list[dict]:
        rows = [{"id": c.id, "path": c.path, "source": c.source, "start_line": c.start_line, "end_line": c.end_line,
                 "text": c.text, "tokens": " ".join(c.tokens), "day": c.day.day, "day_source": c.day.source,
                 "first_day": c.first_day, "last_day": c.last_day} for c in chunks]
        if self.provider is not None and rows:
            for r, v in zip(rows, await self.vectors_for(chunks, stored, report)):
                r["vector"] = None if v is None else np.asarray(v, dtype=np.float32)
        return rows

    # --- search ---------------------------------------------------------------------------------

    async def generation(self) -> Any:
        return self.store.current()

    def candidates(self, generation: Any) -> LanceCandidates:
        return LanceCandidates(
            self.store.chunks(generation.number), self.store.files(generation.number), self.tokenizer
        )

    async def search_published(self, req: SearchRequest, degraded: Degraded, sides: Sides,
                      embedding: QueryEmbedding | None) -> IndexedAnswer:
        try:
            return await super().search_published(req, degraded, sides, embedding)
        except DAMAGE as exc:  # rebuilt from the files once, then asked again
            log.error("LanceDB dataset damaged; rebuilding from the Markdown files", error=_short(exc))
            await self.sync(force=True, reason=f"the dataset was damaged ({_short(exc)})")
        try:
            return await super().search_published(req, degraded, sides, embedding)
        except DAMAGE as exc:
            raise BackendError(_damaged(self.store.root, exc, again=True)) from None

    # --- status ---------------------------------------------------------------------------------

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        self.ensure_provider()
        gen = self.store.current()
        files = chunks = vectors = 0
        by_source: dict[str, dict[str, int]] = {}
        known: dict[str, tuple] = {}
        if gen is not None:
            known = self.store.known_files(gen.number)
            files = len(known)
            table = self.store.chunks(gen.number)
            chunks = table.count_rows()
            vectors = table.count_rows("vector IS NOT NULL") if "vector" in table.schema.names else 0
            by_source = self.count_by_source(known, lambda source: table.count_rows(f"source = {quote(source)}"))
        return self.status_of(gen, files=files, chunks=chunks, where=str(self.store.root), source_counts=by_source,
                              known=known,
                            how="LanceDB (its BM25 full-text index; exact cosine)", fts_search="lancedb-bm25",
                            vector={"rows": vectors, "search": "lancedb exact cosine"},
                            index={"lancedb": {"generation": gen.number if gen else None,
                                               "generations": self.store.generations()}})


def _os_error(exc: OSError) -> str:
    hint = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied", errno.EDQUOT: "the disk quota is used up"}.get(exc.errno or 0)
    return hint or exc.strerror or str(exc)


def _storage_error(exc: BaseException) -> OSError | None:
    """LanceDB reports an operating-system error inside its own ("… (os error 28)"): that one is the
    disk's or the folder's, not damage, and is raised as the OSError it is."""
    found = re.search(r"\(os error (\d+)\)", str(exc))
    if found is None:
        return None
    number = int(found.group(1))
    return OSError(number, os.strerror(number))


def _short(exc: BaseException) -> str:
    """LanceDB's message without the Rust source location it appends."""
    text = str(exc).split(", /root/.cargo/", 1)[0].split(", /home/", 1)[0]
    return re.sub(r", [^ ]*\.rs:\d+:\d+$", "", text)[:300]


def _damaged(root: Path, exc: BaseException, *, again: bool) -> str:
    when = " again after a rebuild" if again else ""
    return (f"the LanceDB dataset at {root} is damaged{when}: {_short(exc)}; move the folder aside and run "
            "`memsift index --force` (the Markdown files are the truth: nothing of them is lost)")
