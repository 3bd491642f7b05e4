"""One agent's collections in Qdrant: two per generation (`<base>_g<N>_chunks`, `<base>_g<N>_files`)
and a pointer collection (`<base>_pointer`, one point) naming the generation searches read and
its fingerprint.

A full rebuild fills generation N+1 beside N and then replaces the pointer's one point (a single
upsert): a search reads the old generation or the new one, never half of one; the oldest are
dropped once `keepGenerations` newer ones exist. Incremental syncs change the current
generation in place: a changed file's points are deleted and written again, its file point last,
so a sync cut short is redone by the next one.

A chunk point holds a dense vector (`dense`, cosine; none without an embedding provider) and a
sparse one (`bm25`): each FTS5 token of the chunk (memsift.engine.search.terms) hashed to an
index, weighted by BM25's term-frequency part, with Qdrant's IDF modifier supplying the rest, so a
sparse query scores BM25 over the same terms as the builtin index. Its payload keeps the chunk
(path, lines, text, day), its tokens (for "which notes hold this word") and the first and last
day it speaks of as day numbers (range filters).

Damage heals from the Markdown files, as the index is derived from them: a local folder whose
`meta.json` Qdrant cannot read is moved aside (one set-aside copy kept, `db.damaged`) and built
anew; a generation whose chunks collection lost its points (the file records say how many each
file has) is rebuilt by the next sync or search (manager.py).

Local mode (no `url`) keeps the collections in a folder that one Qdrant client may open at a
time: memsift opens it for a piece of work and closes it `LOCAL_LINGER_S` after its last use (a
burst of searches loads it once), and processes take turns through a lock file, so `memsift
watch`, the CLI and an MCP server share it. A server (`url`) is
opened once per process and shared by any number of them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import threading
import uuid
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from memsift.engine.kit import BackendError, flock_within, get_logger, make_private_dir

__all__ = ["QdrantStore", "Generation", "point_id", "LOCAL_WAIT_S"]

log = get_logger("memsift.qdrant")

LOCAL_WAIT_S = 30.0  # how long a process waits for another one's turn at the local folder
# Local mode loads the whole folder when it opens it: a process keeps it this long after its last
# use, so a burst of searches loads it once, and then hands the turn over.
LOCAL_LINGER_S = 1.0
POINTER_ID = 1
CLAIM_TRIES = 20  # new generations looked for before a sync gives up (each taken by another writer meanwhile)
# Beside the pointer, in its collection: why the current generation's chunks wait for vectors (an
# incremental sync records it here, never rewriting the pointer another process may have moved on).
VECTORS_STATE_ID = 2


def point_id(key: str) -> str:
    """Qdrant wants an integer or a UUID: the key's hash made one (chunk ids are sha256 hex)."""
    return (
        str(uuid.UUID(hex=key[:32]))
        if re.fullmatch(r"[0-9a-f]{32,}", key)
        else str(uuid.uuid5(uuid.NAMESPACE_URL, key))
    )


@dataclass(frozen=True)
class Generation:
    number: int
    meta: dict[str, Any]


class QdrantStore:
    def __init__(self, config: Any, root: Path, agent: str) -> None:
        self.config, self.root = config, root
        self.base = f"{config.collection_prefix}_{re.sub(r'[^A-Za-z0-9_-]', '_', agent)}"
        self.where = config.url or str(root / "db")
        self._mutex = threading.Lock()
        self._client: Any = None
        self._users = 0
        self._lock_fd: int | None = None
        self._linger: threading.Timer | None = None
        self.healed: str | None = None  # what was healed on opening, said once by the manager
        self.read_only: str | None = None  # why the local folder cannot be written (a copy of it is read)
        self._copy: str | None = None
        if not config.url:
            make_private_dir(root / "db")  # the chunks are private notes: 0700, as builtin's state folder

    # --- the client -----------------------------------------------------------------------------

    @contextmanager
    def client(self) -> Iterator[Any]:
        """The Qdrant client for a piece of work (nested uses share it)."""
        with self._mutex:
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            if self._client is None:
                self._client = self._open()
            self._users += 1
        try:
            yield self._client
        finally:
            with self._mutex:
                self._users -= 1
                if self._users == 0 and not self.config.url:
                    self._linger = threading.Timer(LOCAL_LINGER_S, self._close_if_idle)
                    self._linger.daemon = True
                    self._linger.start()

    def _close_if_idle(self) -> None:
        with self._mutex:
            if self._users == 0 and self._linger is not None:
                self._linger = None
                self._close_local()

    def _open(self) -> Any:
        from qdrant_client import QdrantClient  # noqa: PLC0415

        if self.config.url:
            key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
            if self.config.api_key_env and not key:
                raise BackendError(f"Qdrant's API key variable {self.config.api_key_env} is not set; set it or "
                                   "remove memory.qdrant.apiKeyEnv")
            if key and self.config.url.startswith("http://"):
                log.warning("Qdrant's API key travels unencrypted: use an https:// url", url=self.config.url)
            with warnings.catch_warnings():  # said above, once, in memsift's log
                warnings.simplefilter("ignore", UserWarning)
                # check_compatibility: no version request (and no warning) each time a process opens it
                return QdrantClient(url=self.config.url, api_key=key, timeout=max(1, round(self.config.timeout_s)),
                                    check_compatibility=False)
        try:
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:  # a read-only folder: turns are still taken through the lock file as it is
            if exc.errno not in (errno.EROFS, errno.EACCES) or not (self.root / ".lock").exists():
                raise
            fd = os.open(self.root / ".lock", os.O_RDONLY | os.O_NOFOLLOW)
        if not flock_within(fd, LOCAL_WAIT_S, poll_s=0.02):
            os.close(fd)
            raise BackendError(f"Qdrant's local folder {self.where} stayed in use by another memsift process "
                               f"for {LOCAL_WAIT_S:.0f} s; try again, or run a Qdrant server (memory.qdrant.url) "
                               "for several processes at once")
        try:
            try:
                client = QdrantClient(path=self.where)
            except ValueError as exc:  # meta.json is not JSON (json's errors are ValueErrors): heal, under the lock
                client = QdrantClient(path=self._set_aside(exc))
            except OSError as exc:  # a read-only folder (Qdrant opens its own lock file for writing): a copy is read
                if exc.errno not in (errno.EROFS, errno.EACCES):
                    raise
                client = QdrantClient(path=self._read_only_copy(exc))
        except Exception:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        self._lock_fd = fd
        return client

    def _read_only_copy(self, exc: OSError) -> str:
        """A private copy of the local folder, for searches while the folder cannot be written; syncs
        are refused (`read_only`), so nothing is written to the copy that matters."""
        import tempfile  # noqa: PLC0415

        self._copy = tempfile.mkdtemp(prefix="memsift-qdrant-ro-")
        shutil.copytree(self.where, os.path.join(self._copy, "db"), ignore=shutil.ignore_patterns(".lock"))
        self.read_only = "the file system is read-only" if exc.errno == errno.EROFS else "permission denied"
        return os.path.join(self._copy, "db")

    def _set_aside(self, exc: Exception) -> str:
        """The damaged local folder moved to `db.damaged` (replacing an older set-aside copy), an empty
        one in its place; the next sync builds it from the Markdown files."""
        db, aside = Path(self.where), Path(self.where + ".damaged")
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(db, aside)
        make_private_dir(db)
        self.healed = (
            f"Qdrant's local folder was damaged ({str(exc)[:160]}): moved aside to {aside}, rebuilt from the notes"
        )
        log.error(
            "Qdrant's local folder damaged; moved aside and rebuilt from the Markdown files",
            error=str(exc)[:300],
            moved_to=str(aside),
        )
        return self.where

    def _close_local(self) -> None:
        client, self._client = self._client, None
        try:
            if client is not None:
                client.close()
        finally:
            if self._copy is not None:
                shutil.rmtree(self._copy, ignore_errors=True)
                self._copy = None
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

    def close(self) -> None:
        with self._mutex:
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            if self._client is not None:
                if self.config.url:
                    self._client.close()
                    self._client = None
                else:
                    self._close_local()

    # --- names and the pointer ------------------------------------------------------------------

    def chunks(self, gen: int) -> str:
        return f"{self.base}_g{gen}_chunks"

    def files(self, gen: int) -> str:
        return f"{self.base}_g{gen}_files"

    @property
    def pointer(self) -> str:
        return f"{self.base}_pointer"

    def current(self) -> Generation | None:
        """The generation searches read; None when there is none or its collections are gone."""
        with self.client() as c:
            if not c.collection_exists(self.pointer):
                return None
            got = {p.id: p.payload or {} for p in c.retrieve(self.pointer, ids=[POINTER_ID, VECTORS_STATE_ID],
                                                             with_payload=True)}
            if POINTER_ID not in got:
                return None
            number, meta = got[POINTER_ID].get("generation"), dict(got[POINTER_ID].get("meta") or {})
            if isinstance(number, bool) or not isinstance(number, int) or number not in self.generations():
                return None
            state = got.get(VECTORS_STATE_ID)
            if state is not None and state.get("generation") == number:  # newer than the pointer's meta
                meta.pop("vectorsError", None)
                if state.get("vectorsError"):
                    meta["vectorsError"] = state["vectorsError"]
            return Generation(number, meta)

    def record_vectors_error(self, number: int, error: str | None) -> None:
        """Why generation `number`'s chunks wait for vectors (None: they do not), for `current()`."""
        from qdrant_client import models  # noqa: PLC0415

        with self.client() as c:
            c.upsert(self.pointer, points=[models.PointStruct(id=VECTORS_STATE_ID, vector={},
                                                              payload={"generation": number, "vectorsError": error})])

    def publish(self, gen: Generation) -> bool:
        """Point searches at `gen`; False, pointing nowhere new, where another writer's rebuild that
        claimed its generation later has already been published (both are whole: the later stays)."""
        from qdrant_client import models  # noqa: PLC0415

        with self.client() as c:
            if not c.collection_exists(self.pointer):
                c.create_collection(self.pointer, vectors_config={})
            elif (now := self.current()) is not None and now.number > gen.number:
                log.info("a later rebuild by another writer is published; keeping it", ours=gen.number,
                         theirs=now.number)
                return False
            c.upsert(self.pointer, points=[models.PointStruct(id=POINTER_ID, vector={},
                                                              payload={"generation": gen.number, "meta": gen.meta})])
        return True

    def generations(self) -> list[int]:
        """The generations whose two collections both exist."""
        with self.client() as c:
            names = {col.name for col in c.get_collections().collections}
        found = re.compile(re.escape(self.base) + r"_g(\d+)_chunks")
        numbers = {int(m.group(1)) for n in names if (m := found.fullmatch(n))}
        return sorted(g for g in numbers if self.files(g) in names)

    def next_generation(self) -> int:
        """A number no collection has: a rebuild never overwrites a generation a search may read."""
        with self.client() as c:
            names = [col.name for col in c.get_collections().collections]
        used = [
            int(m.group(1)) for n in names if (m := re.fullmatch(re.escape(self.base) + r"_g(\d+)_(?:chunks|files)", n))
        ]
        return max(used, default=0) + 1

    def claim(self, dims: int | None) -> int:
        """A new generation's collections, under a number no other writer holds: its chunks collection
        is made only where none exists (never deleted and made again), so gateways rebuilding one
        agent at once on a server (all of a fleet after an upgrade) each fill a generation of their
        own; one that finds its number taken between looking and making takes the next."""
        from qdrant_client import models  # noqa: PLC0415

        dense = {"dense": models.VectorParams(size=dims, distance=models.Distance.COSINE)} if dims else {}
        with self.client() as c:
            for _ in range(CLAIM_TRIES):
                gen = self.next_generation()
                try:
                    c.create_collection(self.chunks(gen), vectors_config=dense, sparse_vectors_config={
                        "bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)})
                    break
                except Exception:
                    if not c.collection_exists(self.chunks(gen)):
                        raise  # not another writer's: the server's own failure
                    log.info("generation taken by another writer; taking the next", generation=gen)
            else:
                raise BackendError(f"Qdrant at {self.where}: {CLAIM_TRIES} new generations were taken by other "
                                   "writers while this sync looked for one; run `memsift index` again")
            c.create_collection(self.files(gen), vectors_config={})
            if self.config.url:  # a server filters through payload indexes (local mode scans)
                for field, kind in (("path", "keyword"), ("tokens", "keyword"), ("first_day", "integer"),
                                    ("last_day", "integer"), ("day", "keyword"), ("source", "keyword")):
                    c.create_payload_index(self.chunks(gen), field, field_schema=kind)
                c.create_payload_index(self.files(gen), "path", field_schema="keyword")
        return gen

    def drop_before(self, keep_from: int) -> None:
        """Drop older generations, and any half of one a rebuild cut short left behind."""
        pattern = re.compile(re.escape(self.base) + r"_g(\d+)_(?:chunks|files)")
        with self.client() as c:
            for col in c.get_collections().collections:
                m = pattern.fullmatch(col.name)
                if m and int(m.group(1)) < keep_from:
                    c.delete_collection(col.name)

    # --- rows -----------------------------------------------------------------------------------

    def scroll(self, collection: str, flt: Any = None, *, fields: list[str] | bool = True, limit: int | None = None,
               vectors: Any = False) -> list[Any]:
        """Every point matching `flt` (up to `limit`)."""
        out: list[Any] = []
        offset = None
        with self.client() as c:
            while True:
                page = 1000 if limit is None else min(1000, limit - len(out))
                points, offset = c.scroll(collection, scroll_filter=flt, limit=page, offset=offset, with_payload=fields,
                                          with_vectors=vectors)
                out += points
                if offset is None or (limit is not None and len(out) >= limit):
                    return out

    def known_files(self, gen: int) -> dict[str, tuple[str, int, int, str]]:
        """path → (hash, mtime_ns, size, source) as indexed."""
        return {p.payload["path"]: (p.payload["hash"], p.payload["mtime_ns"], p.payload["size"], p.payload["source"])
                for p in self.scroll(self.files(gen))}

    def chunk_counts(self, gen: int) -> dict[str, int]:
        """path → how many chunk points its record says it has (records that do not say are left out)."""
        return {p.payload["path"]: p.payload["chunks"] for p in self.scroll(self.files(gen), fields=["path", "chunks"])
                if isinstance(p.payload.get("chunks"), int)}

    def without_vectors(self, gen: int) -> list[Any]:
        """The chunk points stored without a dense vector (a provider failed when they were written);
        none in a generation made before the vectors' size was known (a rebuild comes)."""
        from qdrant_client import models  # noqa: PLC0415

        with self.client() as c:
            if "dense" not in (c.get_collection(self.chunks(gen)).config.params.vectors or {}):
                return []
        flt = models.Filter(must_not=[models.HasVectorCondition(has_vector="dense")])
        return self.scroll(self.chunks(gen), flt, fields=["path", "text"])

    def dense_vectors(self, gen: int, ids: list[str]) -> dict[str, Any]:
        """chunk id → its dense vector in generation `gen`, for the ids that have one."""
        out: dict[str, Any] = {}
        with self.client() as c:
            for i in range(0, len(ids), 256):
                part = {point_id(key): key for key in ids[i : i + 256]}
                for p in c.retrieve(self.chunks(gen), ids=list(part), with_payload=False, with_vectors=["dense"]):
                    dense = (p.vector or {}).get("dense") if isinstance(p.vector, dict) else None
                    if dense is not None:
                        out[part[str(p.id)]] = dense
        return out

    def set_vectors(self, gen: int, vectors: list[tuple[Any, Any]]) -> None:
        from qdrant_client import models  # noqa: PLC0415

        with self.client() as c:
            for i in range(0, len(vectors), 256):
                c.update_vectors(self.chunks(gen), points=[
                    models.PointVectors(id=pid, vector={"dense": [float(x) for x in v]})
                    for pid, v in vectors[i : i + 256]])

    def forget_paths(self, gen: int, paths: list[str]) -> None:
        from qdrant_client import models  # noqa: PLC0415

        with self.client() as c:
            for i in range(0, len(paths), 500):
                flt = models.Filter(
                    must=[models.FieldCondition(key="path", match=models.MatchAny(any=paths[i : i + 500]))]
                )
                for name in (self.chunks(gen), self.files(gen)):
                    c.delete(name, points_selector=models.FilterSelector(filter=flt))

    def lost_chunks(self, gen: int) -> str | None:
        """Why generation `gen`'s chunks cannot be trusted (its collection lost points the file records
        say it has), or None. Records written before they counted their chunks are judged by an empty
        collection beside files that are not."""
        files = self.scroll(self.files(gen), fields=["chunks", "size"])
        counted = [p.payload.get("chunks") for p in files]
        held = self.count(self.chunks(gen))
        if all(isinstance(n, int) for n in counted):
            expected = sum(counted)
            return f"its chunks collection holds {held} of {expected} chunks" if held < expected else None
        if held == 0 and any((p.payload.get("size") or 0) > 0 for p in files):
            return f"its chunks collection is empty beside {len(files)} indexed files"
        return None

    def with_vectors(self, gen: int) -> int | None:
        """How many chunks of `gen` have a dense vector; None where that cannot be asked (no room for
        vectors in the collection, or a Qdrant server older than 1.13)."""
        from qdrant_client import models  # noqa: PLC0415

        try:
            with self.client() as c:
                if "dense" not in (c.get_collection(self.chunks(gen)).config.params.vectors or {}):
                    return None
            return self.count(self.chunks(gen), models.Filter(must=[models.HasVectorCondition(has_vector="dense")]))
        except Exception:  # noqa: BLE001 (status shows what it can)
            return None

    def count_source(self, gen: int, source: str) -> int:
        """How many chunks of `gen` come from `source` (memory, sessions)."""
        from qdrant_client import models  # noqa: PLC0415

        flt = models.Filter(must=[models.FieldCondition(key="source", match=models.MatchValue(value=source))])
        return self.count(self.chunks(gen), flt)

    def count(self, collection: str, flt: Any = None) -> int:
        with self.client() as c:
            return int(c.count(collection, count_filter=flt, exact=True).count)
