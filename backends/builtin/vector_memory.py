"""Nearest chunks from vectors held in memory: an exact scan for long-running processes, and a
1-bit first pass with exact rescoring for large indexes.

sqlite-vec's vec0 scans every stored float on every query: 14 ms at 19k chunks, about 0.75 s at
1M, and its bit vectors are no faster (0.5 s for 400 neighbours of 1M, measured). So:

- `exact`: the normalised float32 vectors in one matrix; a query is one matrix-vector product.
  Used by a long-running host (watch, the resident helper, MCP) below `quantizeAbove` chunks.
- `quantized`: above `quantizeAbove`, each vector becomes a 1-bit code of 4·d random hyperplanes
  (SimHash: sign(x·R), R a fixed seeded Gaussian matrix, so no training and no state to store).
  The Hamming distance between codes estimates the angle; the `pool` nearest codes are then
  rescored exactly from the float embeddings in the index. 192 bytes a chunk at 384 dimensions:
  192 MB at 1M chunks. Measured on 1M vectors mixed from real embeddings (contrib/bench/
  million.py): recall@10 of the exact scan 0.92 with a pool of 400, 0.96 with 800, 0.97 with
  1,600; the first pass takes 55-80 ms there, rescoring 1,000 rows 9-15 ms.

The index file stays the truth: the vectors are loaded from it in a background thread when first
wanted (at 1M chunks that takes about 10 s; searches use sqlite-vec meanwhile, so none waits for
it), and kept current from `vector_log` (schema migration 3: triggers log every chunk row added,
re-embedded or deleted, in commit order), so an incremental sync costs only its own rows. A log
pruned past what this process has seen, or an index without the log, loads everything again
(in the background too); a rebuilt index is a new file and gets new MemoryVectors.
"""

from __future__ import annotations

import os
import threading
from itertools import islice
from typing import Any

import apsw
from memsift.engine.lazy import np  # numpy on first use: a keyword search never needs it

from memsift.engine.config.models import VectorStoreConfig

from .store import blob_to_vec, row_cosines, row_estimate, scalar

__all__ = ["MemoryVectors", "SIMHASH_SEED", "BITS_PER_DIM"]

SIMHASH_SEED = 20261124
BITS_PER_DIM = 4  # 1536 bits at 384 dimensions: recall 0.99 at pool 400 (768 bits: 0.94)
LOAD_BATCH = 8192
SCAN_BLOCK = 32768  # rows per Hamming block: the temporaries stay in cache


class MemoryVectors:
    """The vectors of one open index (one reader connection) in memory."""

    def __init__(
        self, config: VectorStoreConfig, db_path: str, *, resident: bool, file_id: tuple[int, int] | None = None
    ) -> None:
        self.config = config  # quantize_above, rescore_pool
        self.db_path = db_path
        self.file_id = file_id  # the index file these vectors came from (its device and inode)
        self._ready = threading.Event()  # set when a load finished: only then are the arrays read
        self._loader: threading.Thread | None = None
        self.load_error: str | None = None
        self.resident = resident  # a long-running host: the exact scan in memory pays off too
        self.mode: str | None = None  # "exact" | "quantized" | None (not loaded)
        self.dims = 0
        self._rowids = np.empty(0, dtype=np.int64)
        self._data = np.empty((0, 0), dtype=np.float32)  # unit vectors, or codes as uint64 words
        self._pos: dict[int, int] = {}
        self._dead = 0
        self._n = 0
        self._seq = 0  # the last vector_log entry applied
        self._version: int | None = None
        self._proj: np.ndarray | None = None
        self.full_loads = 0  # loads of every vector (the first, and after a pruned log or a mostly-dead cache)

    # --- which path -------------------------------------------------------------------------

    def _worth_holding(self, conn: apsw.Connection) -> bool:
        return self.resident or row_estimate(conn) > self.config.quantize_above

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Wait for a load under way (tests, benchmarks); True when the vectors are in memory."""
        loader = self._loader
        if loader is not None:
            loader.join(timeout)
        return self._ready.is_set()

    def _start_load(self) -> None:
        if (self._loader is not None and self._loader.is_alive()) or self.load_error is not None:
            return  # loading already, or it failed (an unreadable file): sqlite-vec answers
        self._ready.clear()
        self._loader = threading.Thread(target=self._load_in_background, name="memsift-vectors", daemon=True)
        self._loader.start()

    def _load_in_background(self) -> None:
        try:
            conn = apsw.Connection(self.db_path, flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error as exc:
            self.load_error = str(exc)
            return
        try:
            st = os.stat(self.db_path)
            if self.file_id is not None and (st.st_dev, st.st_ino) != self.file_id:
                return  # the file was swapped: the manager makes new MemoryVectors for it
            self._load_all(conn)
            self._version = None  # the searching connection reads the log once
            self._ready.set()
        except (apsw.Error, OSError, ValueError) as exc:
            self.load_error = str(exc)
        finally:
            conn.close()

    # --- loading and keeping current ---------------------------------------------------------

    def reconnected(self) -> None:
        """A new connection to the same file: its data_version says nothing of ours, so the next
        search reads the log (cheap when nothing is new)."""
        self._version = None

    def _refresh(self, conn: apsw.Connection) -> bool:
        """Apply what changed since the last search; False when everything must be loaded again
        (started in the background)."""
        version = scalar(conn, "PRAGMA data_version")
        if version == self._version:
            return True
        if not _has_log(conn) or not self._apply_log(conn):
            self._start_load()
            return False
        self._version = version
        return True

    def _load_all(self, conn: apsw.Connection) -> None:
        self.full_loads += 1
        conn.execute("BEGIN")  # one snapshot: the rows and the log position agree
        try:
            self._seq = _log_position(conn)
            total = row_estimate(conn)
            mode = "quantized" if total > self.config.quantize_above else "exact"
            self._reset(mode, 0)
            cursor = conn.execute("SELECT rowid, embedding FROM chunks WHERE embedding IS NOT NULL")
            while batch := list(islice(cursor, LOAD_BATCH)):
                self._put([r for r, _ in batch], [b for _, b in batch])
        finally:
            conn.execute("COMMIT")

    def _apply_log(self, conn: apsw.Connection) -> bool:
        """Apply the log after `_seq`; False when it no longer reaches back that far."""
        conn.execute("BEGIN")
        try:
            top = _log_position(conn)
            if top == self._seq:
                return True
            if conn.execute("SELECT 1 FROM vector_log WHERE seq = ?", (self._seq + 1,)).fetchone() is None:
                return False
            changed: dict[int, bool] = {}  # rowid -> present after the log (in commit order)
            for rowid, added in conn.execute(
                "SELECT chunk_rowid, added FROM vector_log WHERE seq > ? ORDER BY seq", (self._seq,)
            ):
                changed[rowid] = bool(added)
            for rowid, present in changed.items():
                if not present:
                    self._drop(rowid)
            wanted = [r for r, present in changed.items() if present]
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                marks = ",".join("?" * len(part))
                rows: list[Any] = conn.execute(
                    f"SELECT rowid, embedding FROM chunks WHERE embedding IS NOT NULL AND rowid IN ({marks})", part
                ).fetchall()
                for r, _ in rows:
                    self._drop(r)
                self._put([r for r, _ in rows], [b for _, b in rows])
            self._seq = top
        finally:
            conn.execute("COMMIT")
        if self._dead > max(1000, self._n // 4):
            return False  # mostly holes: reload compactly
        return True

    def _reset(self, mode: str, capacity: int) -> None:
        self.mode = mode
        self._rowids = np.full(capacity, -1, dtype=np.int64)
        self._data = np.empty((capacity, 0), dtype=np.float32)
        self._pos, self._dead, self._n, self.dims, self._proj = {}, 0, 0, 0, None

    def _put(self, rowids: list[int], blobs: list[bytes]) -> None:
        if self.dims == 0 and blobs:  # the first vector sets the size; others are skipped
            self.dims = len(blobs[0]) // 4
            if self.mode == "quantized":
                self._proj = simhash_projection(self.dims)
        keep = [i for i, b in enumerate(blobs) if len(b) == self.dims * 4]
        if not keep:
            return
        m = np.stack([blob_to_vec(blobs[i]) for i in keep]).astype(np.float32, copy=False)
        if self.mode == "exact":
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            data = np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
        else:
            data = simhash_codes(m, self._proj)
        need = self._n + len(keep)
        if need > len(self._rowids) or self._data.shape[1] != data.shape[1]:
            cap = max(need, 2 * len(self._rowids), 1024)
            ids = np.full(cap, -1, dtype=np.int64)
            ids[: self._n] = self._rowids[: self._n]
            grown = np.zeros((cap, data.shape[1]), dtype=data.dtype)
            if self._n:
                grown[: self._n] = self._data[: self._n]
            self._rowids, self._data = ids, grown
        at = self._n
        for i, k in enumerate(keep):
            self._pos[rowids[k]] = at + i
            self._rowids[at + i] = rowids[k]
        self._data[at:need] = data
        self._n = need

    def _drop(self, rowid: int) -> None:
        at = self._pos.pop(rowid, None)
        if at is not None:
            self._rowids[at] = -1
            self._data[at] = 0
            self._dead += 1

    # --- search -----------------------------------------------------------------------------

    def search(self, conn: apsw.Connection, query: np.ndarray, limit: int) -> list[tuple[int, float]] | None:
        """The `limit` nearest rows as (rowid, cosine), best first; None when this index is not
        held in memory (yet): the caller asks sqlite-vec."""
        if not self._ready.is_set():
            if self._worth_holding(conn):
                self._start_load()
            return None
        if not self._refresh(conn):
            return None
        live = self._n - self._dead
        if live <= 0 or len(query) != self.dims:
            return []
        q = np.asarray(query, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        if self.mode == "exact":
            scores = self._data[: self._n] @ q
            scores[self._rowids[: self._n] < 0] = -np.inf
            return _top(self._rowids[: self._n], scores, limit)
        pool = self._pool(simhash_codes(q[None, :], self._proj)[0], max(self.config.rescore_pool, 4 * limit))
        return rescore(conn, pool, q, limit)

    def _pool(self, code: np.ndarray, size: int) -> np.ndarray:
        """Rowids of the `size` codes nearest `code` by Hamming distance. (Split over two threads
        it was no faster on the 2-core benchmark machine: the scan is bound by memory.)"""
        rows, _dist = self._nearest_codes(code, 0, self._n, min(size, self._n))
        rows = self._rowids[rows]
        return rows[rows >= 0]

    def _nearest_codes(self, code: np.ndarray, start: int, end: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        words = self._data.shape[1]
        dist = np.empty(end - start, dtype=np.uint16)
        xor = np.empty((SCAN_BLOCK, words), dtype=np.uint64)
        ones = np.empty((SCAN_BLOCK, words), dtype=np.uint8)
        for s in range(start, end, SCAN_BLOCK):
            e = min(end, s + SCAN_BLOCK)
            n = e - s
            np.bitwise_xor(self._data[s:e], code, out=xor[:n])
            np.bitwise_count(xor[:n], out=ones[:n])
            ones[:n].sum(axis=1, dtype=np.uint16, out=dist[s - start : e - start])
        size = min(size, len(dist))
        best = np.argpartition(dist, size - 1)[:size] if size < len(dist) else np.arange(len(dist))
        return best + start, dist[best]


def simhash_projection(dims: int) -> np.ndarray:
    return np.random.default_rng(SIMHASH_SEED).standard_normal((dims, BITS_PER_DIM * dims)).astype(np.float32)


def simhash_codes(m: np.ndarray, proj: np.ndarray) -> np.ndarray:
    """One bit per hyperplane (x·r > 0), packed into uint64 words (one row per vector)."""
    bits = np.packbits((m @ proj) > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits).view(np.uint64)


def rescore(conn: apsw.Connection, rowids: np.ndarray, unit_query: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """Exact cosines of the pool from the stored float embeddings; rows since deleted drop out."""
    scored = row_cosines(conn, list(dict.fromkeys(rowids.tolist())), unit_query)
    if not scored:
        return []
    return _top(
        np.array([r for r, _ in scored], dtype=np.int64), np.array([c for _, c in scored], dtype=np.float32), limit
    )


def _top(rowids: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    if len(scores) > limit:
        idx = np.argpartition(-scores, limit - 1)[:limit]
    else:
        idx = np.arange(len(scores))
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    return [(int(rowids[i]), float(scores[i])) for i in idx if np.isfinite(scores[i])]


def _has_log(conn: apsw.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name='vector_log'").fetchone() is not None


def _log_position(conn: apsw.Connection) -> int:
    if not _has_log(conn):
        return 0
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='vector_log'").fetchone()
    return int(row[0]) if row else 0
