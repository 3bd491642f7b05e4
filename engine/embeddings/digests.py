"""SHA-256 digests of the model files, remembered across processes.

Every cold `memsift search` needs the local model's fingerprint (is the index's vectors' model the
configured one?), which hashes the 22 MB model file, and the int8 graph's check hashes the 22 MB
graph: about 100 ms of a keyword search that runs neither. So a digest is kept in
`<model cache>/digests.json`, keyed by the file's path and identity (device, inode, size, mtime
and ctime in ns), and computed again when any of them changes. ctime cannot be set from user
space, so a file edited in place (even with its mtime restored) or replaced is hashed anew; what a
remembered digest cannot see is a bit flipped by the disk itself under an unchanged inode.

The file is derived, safe to delete, written atomically, and best effort: a missing folder, an
unwritable or a damaged file only means hashing again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

__all__ = ["sha256_of", "DIGESTS_FILE"]

DIGESTS_FILE = "digests.json"
_MAX_ENTRIES = 64  # model files, tokenizers and graphs: a handful; a bound all the same


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


@lru_cache(maxsize=16)
def _hash(path: str, stamp: tuple[int, ...]) -> str:  # noqa: ARG001  (the stamp is the cache key)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read(book: Path) -> dict[str, list]:
    try:
        data = json.loads(book.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(book: Path, data: dict[str, list]) -> None:
    try:  # into the model cache only once it exists (made private where the int8 graph is built)
        fd, tmp = tempfile.mkstemp(dir=book.parent, prefix=f".{book.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, book)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a read-only cache: hashed again next time


def sha256_of(path: Path, cache_dir: Path | None) -> str:
    """The file's SHA-256 (hex), from `cache_dir`'s book when the file is unchanged since it was
    hashed. OSError when the file cannot be read."""
    key = os.path.abspath(path)
    stamp = _stamp(os.stat(key))
    book = cache_dir / DIGESTS_FILE if cache_dir is not None else None
    data = _read(book) if book is not None else {}
    entry = data.get(key)
    if isinstance(entry, list) and len(entry) == 2 and entry[0] == stamp and isinstance(entry[1], str):
        return entry[1]
    digest = _hash(key, tuple(stamp))
    if book is not None:
        data = {k: v for k, v in data.items() if k != key and isinstance(v, list)}
        data = dict(list(data.items())[-(_MAX_ENTRIES - 1):])
        data[key] = [stamp, digest]
        _write(book, data)
    return digest
