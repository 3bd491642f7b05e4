"""One agent's Lance database: two tables per generation (`chunks_g<N>`, `files_g<N>`) and a
pointer file, `current.json`, naming the generation searches read and its fingerprint.

A full rebuild writes generation N+1 beside N and then replaces the pointer (write, fsync, rename):
a search reads one generation from start to end, the old one or the new one, never half of one;
the oldest generations are dropped once `keepGenerations` newer ones exist. Incremental syncs
change the current generation in place: a changed file's rows are deleted and written again,
its file row last, so a sync cut short is redone by the next one.

The `tokens` column holds the chunk's FTS5 tokens (memsift.engine.search.terms) joined by spaces,
indexed by LanceDB's full-text index with a plain whitespace tokenizer: the same terms as the
builtin index (stems, folded diacritics, CJK characters), ranked by LanceDB's BM25.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import lancedb
import pyarrow as pa
from lancedb.index import FTS

from memsift.engine.kit import make_private_dir

from .sql import quote

__all__ = ["LanceStore", "Generation", "chunk_schema", "FILE_SCHEMA", "quote"]

FILE_SCHEMA = pa.schema([("path", pa.string()), ("source", pa.string()), ("hash", pa.string()),
                         ("mtime_ns", pa.int64()), ("size", pa.int64())])


def chunk_schema(dims: int | None) -> pa.Schema:
    fields = [("id", pa.string()), ("path", pa.string()), ("source", pa.string()), ("start_line", pa.int32()),
              ("end_line", pa.int32()), ("text", pa.string()), ("tokens", pa.string()), ("day", pa.string()),
              ("day_source", pa.string()), ("first_day", pa.string()), ("last_day", pa.string())]
    if dims:
        fields.append(("vector", pa.list_(pa.float32(), dims)))
    return pa.schema(fields)


@dataclass(frozen=True)
class Generation:
    number: int
    meta: dict[str, Any]


class LanceStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        # The chunks are private notes: the folders this creates are 0700, as builtin's state folder
        # (the files LanceDB writes inside take the umask, unreachable behind them).
        make_private_dir(root / "db")
        self._connect()

    def _connect(self) -> None:
        # Every read checks for a newer version: another process (`memsift index`, a second gateway)
        # may have written since this one opened the table.
        self.db = lancedb.connect(str(self.root / "db"), read_consistency_interval=timedelta(0))
        self._tables: dict[str, Any] = {}
        self._seen_db = _identity(self.root / "db")

    # --- the pointer ----------------------------------------------------------------------------

    @property
    def pointer(self) -> Path:
        return self.root / "current.json"

    def current(self) -> Generation | None:
        """The generation searches read; None when there is none or the pointer is damaged (not
        JSON, not a positive whole number, or naming tables that are not there): the next sync
        builds a new generation, and nothing of the Markdown files is touched."""
        if _identity(self.root / "db") != self._seen_db:
            self._connect()  # the database folder was replaced under this process: open the new one
        try:
            raw = json.loads(self.pointer.read_text(encoding="utf-8"))
            number, meta = raw["generation"], raw.get("meta") or {}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if isinstance(number, bool) or not isinstance(number, int) or number < 1 or not isinstance(meta, dict):
            return None
        if number not in self.generations():
            return None
        return Generation(number, meta)

    def next_generation(self) -> int:
        """A number no table has: a rebuild never overwrites a generation a search may be reading."""
        return max(self.generations(), default=0) + 1

    def publish(self, gen: Generation) -> None:
        tmp = self.pointer.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"generation": gen.number, "meta": gen.meta}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.pointer)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """One writer per agent across processes (the tables' own commits are atomic; a sync's
        several steps are not)."""
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # --- tables ---------------------------------------------------------------------------------

    def chunks(self, gen: int) -> Any:
        return self._table(f"chunks_g{gen}")

    def files(self, gen: int) -> Any:
        return self._table(f"files_g{gen}")

    def _table(self, name: str) -> Any:
        if name not in self._tables:
            self._tables[name] = self.db.open_table(name)
        return self._tables[name]

    def create(self, gen: int, dims: int | None) -> None:
        for name, schema in ((f"chunks_g{gen}", chunk_schema(dims)), (f"files_g{gen}", FILE_SCHEMA)):
            self._tables[name] = self.db.create_table(name, schema=schema, mode="overwrite")
        self._seen_db = _identity(self.root / "db")

    def index_text(self, gen: int) -> None:
        """(Re)build the full-text index over `tokens`: rows added since are searched too, unindexed."""
        fts = FTS(with_position=True, base_tokenizer="whitespace", max_token_length=None, lower_case=False, stem=False,
                  remove_stop_words=False, ascii_folding=False)  # the tokens are FTS5's already
        self.chunks(gen).create_index("tokens", config=fts, replace=True)

    def has_text_index(self, gen: int) -> bool:
        return any("tokens" in (getattr(i, "columns", None) or []) for i in self.chunks(gen).list_indices())

    def generations(self) -> list[int]:
        """The generations whose two tables both exist."""
        names = set(self.db.list_tables().tables)
        numbers = {n.split("_g", 1)[1] for n in names if n.startswith(("chunks_g", "files_g"))}
        return sorted(int(g) for g in numbers if g.isdigit() and {f"chunks_g{g}", f"files_g{g}"} <= names)

    def drop_before(self, keep_from: int) -> None:
        """Drop older generations, and any half of one a rebuild cut short left behind."""
        for name in self.db.list_tables().tables:
            number = name.split("_g", 1)[1] if name.startswith(("chunks_g", "files_g")) else ""
            if number.isdigit() and int(number) < keep_from:
                self._tables.pop(name, None)
                try:
                    self.db.drop_table(name)
                except (FileNotFoundError, ValueError):
                    pass

    def known_files(self, gen: int) -> dict[str, tuple[str, int, int, str]]:
        """path → (hash, mtime_ns, size, source) as indexed."""
        rows = self.files(gen).to_arrow().to_pylist()
        return {r["path"]: (r["hash"], r["mtime_ns"], r["size"], r["source"]) for r in rows}

    def forget_paths(self, gen: int, paths: list[str], *, keep_chunks: bool = False) -> None:
        """Delete the files' rows, and their chunks unless `keep_chunks`."""
        for i in range(0, len(paths), 500):
            where = f"path IN ({', '.join(quote(p) for p in paths[i : i + 500])})"
            if not keep_chunks:
                self.chunks(gen).delete(where)
            self.files(gen).delete(where)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino
