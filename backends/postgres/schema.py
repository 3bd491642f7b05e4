"""The Postgres schema memsift owns: numbered migrations, the applied version recorded in the database.

Every per-agent table has `agent_id` leading its primary key, so the schema shards by agent on
Citus (distribution column `agent_id`, co-located); `memsift_schema` is the one reference table.

- `memsift_agents(agent_id, generation, meta, skipped)`: the generation searches read (an atomic
  rebuild writes generation+1, then switches this row in one transaction) and the index fingerprint.
- `memsift_files(agent_id, generation, path, …)`: what was indexed, by content hash.
- `memsift_chunks(agent_id, generation, chunk, …, doc_len, embedding vector)`: `chunk` is a 64-bit
  number derived from the chunk id; `doc_len` the chunk's token count for BM25.
- `memsift_postings(agent_id, generation, term, chunk, tf, doc_len, positions)`: the keyword
  index (BM25 in plain SQL; positions for phrases).
- `memsift_embedding_cache(agent_id, provider_key, hash, embedding, …)`.
"""

from __future__ import annotations

from typing import Any

from memsift.engine.errors import BackendError

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "migrate", "TABLES", "MIGRATION_LOCK", "chunk_number", "HALF_SCAN_MAX_DIMS"]

TABLES = (
    "memsift_agents",
    "memsift_files",
    "memsift_chunks",
    "memsift_postings",
    "memsift_embedding_cache",
    "memsift_stats",
)
MIGRATION_LOCK = 7_301_905_001  # one advisory lock for schema changes, whatever the agent

_M1 = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE memsift_agents(
    agent_id text NOT NULL,
    generation bigint NOT NULL DEFAULT 0,
    meta jsonb,
    skipped jsonb NOT NULL DEFAULT '[]',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id)
);
CREATE TABLE memsift_files(
    agent_id text NOT NULL,
    generation bigint NOT NULL,
    path text NOT NULL,
    source text NOT NULL DEFAULT 'memory',
    hash text NOT NULL,
    mtime_ns bigint NOT NULL,
    size bigint NOT NULL,
    indexed_at double precision NOT NULL,
    PRIMARY KEY (agent_id, generation, path)
);
CREATE TABLE memsift_chunks(
    agent_id text NOT NULL,
    generation bigint NOT NULL,
    chunk bigint NOT NULL,
    id text NOT NULL,
    path text NOT NULL,
    source text NOT NULL DEFAULT 'memory',
    start_line integer NOT NULL,
    end_line integer NOT NULL,
    hash text NOT NULL,
    model text NOT NULL,
    text text NOT NULL,
    doc_len integer NOT NULL,
    embedding vector,
    updated_at double precision NOT NULL,
    PRIMARY KEY (agent_id, generation, chunk)
);
CREATE INDEX memsift_chunks_path ON memsift_chunks(agent_id, generation, path);
CREATE INDEX memsift_chunks_stats ON memsift_chunks(agent_id, generation) INCLUDE (doc_len);
CREATE TABLE memsift_postings(
    agent_id text NOT NULL,
    generation bigint NOT NULL,
    term text NOT NULL,
    chunk bigint NOT NULL,
    tf integer NOT NULL,
    doc_len integer NOT NULL,
    positions integer[] NOT NULL,
    PRIMARY KEY (agent_id, generation, term, chunk)
);
CREATE INDEX memsift_postings_chunk ON memsift_postings(agent_id, generation, chunk);
CREATE TABLE memsift_embedding_cache(
    agent_id text NOT NULL,
    provider_key text NOT NULL,
    hash text NOT NULL,
    embedding vector NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (agent_id, provider_key, hash)
);
CREATE INDEX memsift_embedding_cache_updated ON memsift_embedding_cache(agent_id, updated_at);
"""

# Each chunk's day (engine/files/note_dates.py) and where it came from: time windows, since/until, decay.
_M2 = """
ALTER TABLE memsift_chunks ADD COLUMN day text, ADD COLUMN day_source text;
CREATE INDEX memsift_chunks_day ON memsift_chunks(agent_id, generation, day);
"""

# Every day a chunk's lines speak of, when more than its `day` (engine/files/note_dates.py): a filter
# or a time window finds a chunk by any of them.
_M3 = """
ALTER TABLE memsift_chunks ADD COLUMN days text[];
CREATE INDEX memsift_chunks_multiday ON memsift_chunks(agent_id, generation) WHERE days IS NOT NULL;
"""

# BM25 at a large agent's size. The collection's size and total length are kept per (agent,
# generation), written in the transactions that write chunks, instead of counted on every search
# (a scan of the agent's rows: 30–120 ms at a million chunks). A term's postings carry tf and
# doc_len in the key's index, so ranking a term reads its index entries in order, not one heap
# page per posting (12,000 pages for three mid-frequency words at a million chunks). On a large
# existing database the postings' key is rebuilt once, which takes minutes.
_M4 = """
CREATE TABLE memsift_stats(
    agent_id text NOT NULL,
    generation bigint NOT NULL,
    chunks bigint NOT NULL,
    total_len bigint NOT NULL,
    PRIMARY KEY (agent_id, generation)
);
INSERT INTO memsift_stats(agent_id, generation, chunks, total_len)
    SELECT agent_id, generation, count(*), coalesce(sum(doc_len), 0) FROM memsift_chunks GROUP BY agent_id, generation;
ALTER TABLE memsift_postings DROP CONSTRAINT memsift_postings_pkey;
ALTER TABLE memsift_postings ADD CONSTRAINT memsift_postings_pkey PRIMARY KEY (agent_id, generation, term, chunk) INCLUDE (tf, doc_len);
"""  # noqa: E501

# The exact vector scan without reading the rows. An agent below hnswAbove is searched by an exact
# scan of its vectors; read from the rows, that scan reads every row of the agent (text and all),
# and once a row outgrows 2 kB (a real chunk's text and a 384-d vector do) the vector is stored
# apart (TOAST) and each one is fetched on its own: 55 ms at 10,000 chunks here. Each vector is
# kept a second time, normalized in half precision (cosine ignores the length, and a unit
# vector cannot overflow a half), in an index that covers the scan: half the bytes, read in key
# order, no row touched; the nearest few are then put in exact order by their full vectors
# (search.vector_candidates). A half vector of more than 1,024 dimensions would not fit an index
# entry: those vectors keep the scan of the rows. The full vector stays in its row (storage MAIN:
# a long text is moved out first), so those few are read without a TOAST lookup each; the half
# copy in the row is only the index's source and may be moved out. The column is computed by
# Postgres, so nothing that writes chunks changes; on an existing database the table is rewritten once.
_M5 = """
ALTER TABLE memsift_chunks ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE memsift_chunks ADD COLUMN embedding_half halfvec GENERATED ALWAYS AS
    (CASE WHEN vector_dims(embedding) <= 1024 THEN l2_normalize(embedding)::halfvec END) STORED;
CREATE INDEX memsift_chunks_scan ON memsift_chunks(agent_id, generation, chunk) INCLUDE (embedding_half)
    WHERE embedding_half IS NOT NULL;
"""
HALF_SCAN_MAX_DIMS = 1024  # _M5's bound
PGVECTOR_MIN = (0, 7)  # halfvec and l2_normalize (_M5)

MIGRATIONS: list[str] = [_M1, _M2, _M3, _M4, _M5]
SCHEMA_VERSION = len(MIGRATIONS)


async def migrate(conn: Any) -> int:
    """Create or upgrade the schema (under an advisory lock, so two processes never both migrate).
    Returns the version. A database newer than this memsift is refused, untouched."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS memsift_schema(id integer PRIMARY KEY CHECK (id = 1), version integer NOT "
            "NULL, "
            "updated_at timestamptz NOT NULL DEFAULT now())"
        )
        row = await (await conn.execute("SELECT version FROM memsift_schema WHERE id = 1")).fetchone()
        version = row[0] if row else 0
        if version > SCHEMA_VERSION:
            raise BackendError(
                f"the Postgres schema is at version {version}, newer than this memsift ({SCHEMA_VERSION}); upgrade "
                f"memsift"
            )
        for number in range(version, SCHEMA_VERSION):
            if MIGRATIONS[number] is _M5:
                await _require_pgvector(conn, PGVECTOR_MIN)
            await conn.execute(MIGRATIONS[number])
        if version != SCHEMA_VERSION:
            await conn.execute(
                "INSERT INTO memsift_schema(id, version) VALUES (1, %s) ON CONFLICT (id) DO UPDATE "
                "SET version = excluded.version, updated_at = now()",
                (SCHEMA_VERSION,),
            )
    return SCHEMA_VERSION


async def _require_pgvector(conn: Any, least: tuple[int, ...]) -> None:
    row = await (await conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).fetchone()
    found = tuple(int(p) for p in row[0].split(".") if p.isdigit()) if row else ()
    if found < least:
        want = ".".join(map(str, least))
        raise BackendError(f"memsift needs pgvector {want} or newer (this database has {row[0] if row else 'none'}): "
                           "run ALTER EXTENSION vector UPDATE as the database owner, or install a newer pgvector")


def chunk_number(chunk_id: str) -> int:
    """The chunk's key in its agent's rows (`memsift_chunks.chunk`): a 64-bit number from its
    (sha256) id. Searches look chunks up by it (the primary key), never by the id column, which
    has no index."""
    return int(chunk_id[:16], 16) - 2**63
