"""Session transcripts on Postgres, as on builtin: the same hits with JSONL line numbers, secrets
redacted, picked up by explicit syncs (never waited on by a search), counted by status, and
removed when sessions are no longer a source."""

from __future__ import annotations


import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings, write_transcript

pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.builtin import BuiltinSearchManager  # noqa: E402
from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.engine.compose.factory import open_manager  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402

SESSIONS = {"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}}




def _settings(tmp_path, ws, dsn, ms=None):
    return make_settings(tmp_path, ws, ms if ms is not None else SESSIONS,
                         memory={"backend": "postgres", "postgres": {"dsn": dsn}})


def _hit(answer):
    h = answer.results[0]
    return h.path, h.source, h.start_line, h.end_line


def test_transcripts_are_indexed_and_searched_as_on_builtin(tmp_path, example_workspace, pg_dsn):
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    write_transcript(sessions / "abc.jsonl", [("user", "what is the wifi password for the cabin"),
                                          ("assistant", "It is on the fridge, token: sk-abcdefghijklmnopqrstuvwx")])
    (sessions / "abc.jsonl.bak.1").write_text("ignored")
    settings = _settings(tmp_path, example_workspace, pg_dsn)
    provider = FakeEmbeddingProvider()

    async def run() -> None:
        async with BuiltinSearchManager(settings, provider=provider) as b, \
                PostgresSearchManager(settings, provider=provider) as p:
            await b.sync()
            report = await p.sync()
            assert report.files_indexed == 7  # the six memory files and the transcript
            want = await b.search("wifi password cabin", min_score=0)
            got = await p.search("wifi password cabin", min_score=0)
            assert _hit(got) == _hit(want) == ("sessions/abc.jsonl", "sessions", 2, 4)
            assert got.results[0].snippet == want.results[0].snippet
            assert "sk-abc" not in got.results[0].snippet and "[redacted]" in got.results[0].snippet
            st = await p.status()
            assert (
                st.source_counts["sessions"] == {"files": 1, "chunks": 1} and st.source_counts["memory"]["files"] == 6
            )
            assert st.sources == ["memory", "sessions"]

            # A search's sync never waits on transcripts (as on builtin); an explicit one reads their growth.
            write_transcript(
                sessions / "abc.jsonl",
                [
                    ("user", "what is the wifi password for the cabin"),
                    ("assistant", "fridge"),
                    ("user", "and the boat key? under the mat"),
                ],
            )
            p.mark_dirty()
            before = await p.search("boat key mat", min_score=0)
            assert "boat" not in " ".join(h.snippet for h in before.results)
            assert (await p.search("wifi password cabin", min_score=0)).results[0].path == "sessions/abc.jsonl"  # kept
            grown = await p.sync()
            assert grown.files_indexed == 1
            assert (await p.search("boat key mat", min_score=0)).results[0].path == "sessions/abc.jsonl"

        # No longer a source: the next sync removes the transcript's rows.
        async with PostgresSearchManager(_settings(tmp_path, example_workspace, pg_dsn, ms={}), provider=provider) as p:
            await p.sync()
            st = await p.status()
            assert "sessions" not in st.source_counts and st.source_counts["memory"]["files"] == 6

    anyio.run(run)


def test_the_watchers_session_sync_reaches_postgres_through_the_composed_manager(tmp_path, example_workspace, pg_dsn):
    """`watch` and `mcp` sync transcripts by passing include_sessions through every wrapper above
    the backend (scope rules, ranker, the Postgres fallback wrapper)."""
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    write_transcript(sessions / "s1.jsonl", [("user", "remember the harbour code 4417")])
    settings = _settings(tmp_path, example_workspace, pg_dsn, ms={**SESSIONS, "provider": "none"})

    async def run() -> None:
        manager = open_manager(settings)
        try:
            from memsift.engine.compose.host import _accepts_sessions  # noqa: PLC0415

            assert _accepts_sessions(manager)
            await manager.sync(reason="session-delta", include_sessions=True)
            answer = await manager.search("harbour code", min_score=0)
            assert answer.backend == "postgres" and answer.results[0].path == "sessions/s1.jsonl"
        finally:
            await manager.aclose()

    anyio.run(run)
