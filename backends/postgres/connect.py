"""Postgres connections: the DSN (config or $MEMSIFT_POSTGRES_DSN) with its secrets kept out of
every message, connection pools with timeouts, and driver errors turned into clear BackendErrors."""

from __future__ import annotations

import os
import re
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import unquote

import anyio

from memsift.engine.config.models import PostgresConfig
from memsift.engine.errors import BackendError, ConfigError
from memsift.engine.secrets import redact, register_secret

__all__ = [
    "Dsns",
    "resolve_dsns",
    "shown_dsn",
    "new_pool",
    "shared_pool",
    "release_pools",
    "drop_pools",
    "schema_checked",
    "mark_schema_checked",
    "connect_once",
    "driver_error",
    "ENV_DSN",
    "import_driver",
    "cached_hnsw_names",
    "remember_hnsw_names",
    "add_hnsw_name",
    "forget_hnsw_names",
]

ENV_DSN = "MEMSIFT_POSTGRES_DSN"
INSTALL_HINT = 'the Postgres backend needs its extra: pip install "memsift[postgres]"'
_KV_PASSWORD_RE = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)


def import_driver() -> Any:
    """psycopg, or a ConfigError with the install command (the default install is SQLite only)."""
    try:
        import psycopg  # noqa: PLC0415
        import psycopg_pool  # noqa: F401, PLC0415
        import pgvector.psycopg  # noqa: F401, PLC0415
    except ImportError as exc:
        raise ConfigError(f"{INSTALL_HINT} ({exc})", key_path="memory.backend") from None
    return psycopg


@dataclass(frozen=True)
class Dsns:
    write: str
    read: str | None  # a replica; None: searches read the primary

    @property
    def shown(self) -> str:
        return shown_dsn(self.write)


_URI_PREFIX_RE = re.compile(r"(?i)^\s*(postgres(?:ql)?://)")
_URI_PARAM_RE = re.compile(r"([?&])([^=&#]*)=([^&]*)")


# libpq's connection keywords (PostgreSQL 18). A DSN with any other key (`passwd=`, a typo) is not
# understood: what it holds may be a password, so only its host and database are ever shown.
_LIBPQ_KEYS = frozenset("""host hostaddr port dbname user password passfile require_auth channel_binding
    connect_timeout client_encoding options application_name fallback_application_name keepalives keepalives_idle
    keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl sslnegotiation
    sslcompression sslcert sslkey sslkeylogfile sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer
    ssl_min_protocol_version ssl_max_protocol_version min_protocol_version max_protocol_version krbsrvname gsslib
    gssdelegation service target_session_attrs load_balance_hosts scram_client_key scram_server_key oauth_issuer
    oauth_client_id oauth_client_secret oauth_scope""".split())
_SECRET_KEYS = frozenset({"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"})
_KV_PAIR_RE = re.compile(r"\s*([^\s=]+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")


def _key(name: str) -> str:
    """libpq decodes a parameter's name too: `pass%77ord=` is `password=`."""
    return unquote(name).strip().lower()


def _is_password_param(name: str) -> bool:
    """A parameter whose value is a secret, or one libpq does not know (a mistyped `passwd=`)."""
    return _key(name) in _SECRET_KEYS or _key(name) not in _LIBPQ_KEYS


def _kv_pairs(dsn: str) -> list[tuple[str, str]] | None:
    """The key=value form's pairs, quotes removed, or None when it does not read as pairs."""
    pairs, pos = [], 0
    for m in _KV_PAIR_RE.finditer(dsn):
        if m.start() != pos:
            return None
        value = m.group(2)
        if value.startswith("'"):
            value = value[1:-1].replace("\\'", "'").replace("\\\\", "\\")
        pairs.append((m.group(1), value))
        pos = m.end()
    return pairs if dsn[pos:].strip() == "" else None


def _host_and_database(dsn: str) -> str:
    """`postgresql://HOST:PORT/DB`, from a DSN that is not understood whole: nothing else of it."""
    uri = _split_uri(dsn)
    if uri is not None:
        where = uri[3].split("?", 1)[0]
        hostport, _, db = where.partition("/")
        return f"{uri[0]}{hostport}/{db}" if db else f"{uri[0]}{hostport}"
    found = {_key(k): v for k, v in (_kv_pairs(dsn) or [])}
    host = found.get("host", "") + (f":{found['port']}" if found.get("port") else "")
    return f"postgresql://{host}/{found.get('dbname', '')}"


def _understood(dsn: str) -> bool:
    """Every key of the DSN is libpq's own."""
    uri = _split_uri(dsn)
    if uri is not None:
        return all(_key(m.group(2)) in _LIBPQ_KEYS for m in _URI_PARAM_RE.finditer(uri[3]))
    pairs = _kv_pairs(dsn)
    return pairs is not None and all(_key(k) in _LIBPQ_KEYS for k, _v in pairs)


def _uri_param_passwords(rest: str) -> list[str]:
    return [m.group(3) for m in _URI_PARAM_RE.finditer(rest) if _is_password_param(m.group(2))]


def _mask_uri_params(rest: str) -> str:
    return _URI_PARAM_RE.sub(
        lambda m: f"{m.group(1)}{m.group(2)}=***" if _is_password_param(m.group(2)) else m.group(0), rest
    )


def _split_uri(dsn: str) -> tuple[str, str | None, str | None, str] | None:
    """A URI as libpq splits it: (scheme, user, password, the rest after the `@`), or None for the
    key=value form. libpq ends the credentials at the first `@` or `/` and knows no fragment:
    a `#` is part of the password (urlsplit would cut it there and show the rest)."""
    m = _URI_PREFIX_RE.match(dsn)
    if not m:
        return None
    rest = dsn[m.end():]
    end = next((i for i, ch in enumerate(rest) if ch in "@/"), len(rest))
    if end == len(rest) or rest[end] != "@":
        return m.group(1), None, None, rest
    user, colon, password = rest[:end].partition(":")
    return m.group(1), user, password if colon else None, rest[end + 1:]


def _register(dsn: str) -> None:
    """The password counts as a secret, as written and as libpq decodes it (`%23` is `#`), in a
    URI's credentials, its `password=` parameter, or the key=value form."""
    found: list[str] = []
    uri = _split_uri(dsn)
    if uri is not None:
        _scheme, _user, password, rest = uri
        found += [password] if password else []
        found += _uri_param_passwords(rest)
    else:
        found += [m.group(2).strip("'") for m in _KV_PASSWORD_RE.finditer(dsn)]
        found += [m.group(2)[1:-1].replace("\\'", "'").replace("\\\\", "\\") for m in _KV_PASSWORD_RE.finditer(dsn)
                  if m.group(2).startswith("'")]
        found += [v for k, v in (_kv_pairs(dsn) or []) if _is_password_param(k)]
    for value in found:
        register_secret(value)
        register_secret(unquote(value))


def shown_dsn(dsn: str) -> str:
    """The DSN with any password masked: `postgresql://memsift:***@db:5432/memsift`; one that is not
    understood whole (a key libpq does not know, which may be a mistyped password key) shows its
    host and database only."""
    if not _understood(dsn):
        return redact(_host_and_database(dsn)) + " (the rest not shown: it has a setting libpq does not know)"
    uri = _split_uri(dsn)
    if uri is None:
        return redact(_KV_PASSWORD_RE.sub(r"\1***", dsn))
    scheme, user, password, rest = uri
    creds = "" if user is None else f"{user}{':***' if password is not None else ''}@"
    return redact(scheme + creds + _mask_uri_params(rest))


def resolve_dsns(cfg: PostgresConfig, environ: Mapping[str, str] | None = None) -> Dsns:
    env = os.environ if environ is None else environ
    dsn = cfg.dsn.get_secret_value() if cfg.dsn else env.get(ENV_DSN, "")
    if not dsn.strip():
        raise ConfigError(
            f"memory.backend is \"postgres\" but no database is configured: set memory.postgres.dsn or ${ENV_DSN} "
            "(postgresql://user:password@host:5432/dbname)",
            key_path="memory.postgres.dsn",
        )
    read = cfg.read_dsn.get_secret_value() if cfg.read_dsn else None
    for d in (dsn, read):
        if d:
            _register(d)
    return Dsns(dsn.strip(), read.strip() if read and read.strip() else None)


def _kwargs(cfg: PostgresConfig) -> dict[str, Any]:
    # prepare_threshold None: no server-side prepared statements (psycopg prepares after 5 runs,
    # which pins one plan per statement and breaks behind PgBouncer in transaction mode).
    return {
        "connect_timeout": max(1, round(cfg.connect_timeout_ms / 1000)),
        "options": f"-c statement_timeout={cfg.statement_timeout_ms} -c idle_in_transaction_session_timeout=60000",
        "prepare_threshold": None,
        "application_name": "memsift",
    }


async def _configure(conn: Any) -> None:
    from pgvector.psycopg import register_vector_async  # noqa: PLC0415

    await register_vector_async(conn)
    await conn.set_autocommit(True)


def new_pool(dsn: str, cfg: PostgresConfig, name: str) -> Any:
    """An async pool, not yet open; connections have the pgvector adapter and autocommit
    (transactions are explicit)."""
    import logging  # noqa: PLC0415

    import psycopg_pool  # noqa: PLC0415

    # The pool logs each failed reconnect; memsift says what failed on the answer, once.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    pool = psycopg_pool.AsyncConnectionPool(
        dsn,
        kwargs=_kwargs(cfg),
        min_size=min(cfg.pool.min_size, cfg.pool.max_size),
        max_size=cfg.pool.max_size,
        open=False,
        configure=_configure,
        check=psycopg_pool.AsyncConnectionPool.check_connection,  # a server restart drops idle connections
        timeout=cfg.connect_timeout_ms / 1000,
        reconnect_timeout=max(1.0, cfg.connect_timeout_ms / 1000),
        name=name,
    )
    return pool


# --- one pool per database, shared by every agent a process serves -------------------------------
# A gateway serving a hundred agents opens one manager per agent: each used to open its own pool
# (a connection, the pgvector type lookup and a migration check on its first search). The pools
# live here instead, one per database and pool settings per event loop (a pool belongs to one
# loop), held while any manager uses them; a lost connection drops the database's pool for all.


@dataclass
class _Shared:
    pool: Any
    owners: set[int] = field(default_factory=set)


_pools_by_loop: "weakref.WeakKeyDictionary[Any, dict[tuple, _Shared]]" = weakref.WeakKeyDictionary()
_schema_checked: set[str] = set()  # databases whose schema this process has migrated (or found current)
# The database's usable per-agent HNSW indexes, listed once for every agent this process serves
# (a new agent's first search asks no catalog), with when they were listed.
_hnsw_names: dict[str, tuple[frozenset[str], float]] = {}


def _pool_key(dsn: str, cfg: PostgresConfig, name: str) -> tuple:
    return (dsn, name, cfg.pool.min_size, cfg.pool.max_size, cfg.connect_timeout_ms, cfg.statement_timeout_ms)


def _loop_pools() -> dict[tuple, _Shared]:
    import asyncio  # noqa: PLC0415

    return _pools_by_loop.setdefault(asyncio.get_running_loop(), {})


async def shared_pool(dsn: str, cfg: PostgresConfig, name: str, owner: object) -> Any:
    """The database's pool for this event loop, opened at first use; `owner` holds it until
    `release_pools`."""
    pools = _loop_pools()
    key = _pool_key(dsn, cfg, name)
    entry = pools.get(key)
    if entry is None:
        entry = pools[key] = _Shared(new_pool(dsn, cfg, name))  # registered before the await: one pool, not two
        await entry.pool.open(wait=False)
    entry.owners.add(id(owner))
    return entry.pool


async def release_pools(owner: object) -> None:
    """`owner` is done: the pools nobody else holds are closed."""
    pools = _loop_pools()
    for key, entry in list(pools.items()):
        entry.owners.discard(id(owner))
        if not entry.owners:
            del pools[key]
            await entry.pool.close()


async def drop_pools(dsns: set[str]) -> None:
    """After a lost connection: the pools of these databases are closed for every owner, so the next
    call opens new ones and reaches a server that came back at once."""
    pools = _loop_pools()
    for key in [k for k in pools if k[0] in dsns]:
        entry = pools.pop(key)
        with anyio.CancelScope(shield=True), anyio.move_on_after(1):
            await entry.pool.close(timeout=0.5)
    _schema_checked.difference_update(dsns)  # a restored or replaced server is checked again
    for dsn in dsns:
        forget_hnsw_names(dsn)


def schema_checked(dsn: str) -> bool:
    return dsn in _schema_checked


def mark_schema_checked(dsn: str) -> None:
    _schema_checked.add(dsn)


def cached_hnsw_names(dsn: str, max_age_s: float) -> frozenset[str] | None:
    """The HNSW indexes listed for this database, unless the listing is older than `max_age_s`."""
    listed = _hnsw_names.get(dsn)
    return listed[0] if listed is not None and time.monotonic() - listed[1] <= max_age_s else None


def remember_hnsw_names(dsn: str, names: frozenset[str]) -> None:
    _hnsw_names[dsn] = (names, time.monotonic())


def add_hnsw_name(dsn: str, name: str) -> None:
    """This process's sync found or built an agent's index: listed at once, not at the next listing."""
    listed = _hnsw_names.get(dsn)
    if listed is not None and name not in listed[0]:
        _hnsw_names[dsn] = (listed[0] | {name}, listed[1])


def forget_hnsw_names(dsn: str) -> None:
    """The server was lost (it may come back restored): the next search lists them again."""
    _hnsw_names.pop(dsn, None)


async def connect_once(dsn: str, cfg: PostgresConfig, *, vectors: bool = True) -> Any:
    """One connection outside the pools (migrations, a sync's lock-holding writer). `vectors`:
    with the pgvector adapter (the extension must exist: not before the first migration)."""
    psycopg = import_driver()
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, **_kwargs(cfg))
        if vectors:
            await _configure(conn)
    except psycopg.Error as exc:
        raise driver_error(exc, dsn, "connecting") from None
    return conn


def driver_error(exc: BaseException, dsn: str, doing: str = "") -> BackendError:
    """A BackendError that says what failed, where (DSN without its password) and what to do."""
    what = f" while {doing}" if doing else ""
    text = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    outage = type(exc).__name__ in ("OperationalError", "PoolTimeout", "ConnectionTimeout") or isinstance(exc, OSError)
    hint = " (is the server up and reachable? check memory.postgres.dsn / $MEMSIFT_POSTGRES_DSN)" if outage else ""
    return BackendError(f"postgres at {shown_dsn(dsn)} failed{what}: {text}{hint}")
