"""Images and audio of extra paths on Postgres, as on builtin (gemini-embedding-2-preview on a
loopback server): one request per file with its bytes, what is not what its name says skipped,
a provider's "too large" keeps the file with no chunks, and hits name the file."""

from __future__ import annotations


import anyio
import pytest

from helpers import NO_POSTGRES_EXTRA, make_settings, tiny_png, tiny_wav

psycopg = pytest.importorskip("psycopg", reason=NO_POSTGRES_EXTRA)

from memsift.backends.builtin import BuiltinSearchManager  # noqa: E402
from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.engine.errors import PathNotAllowedError  # noqa: E402
from provider_server import ProviderServer  # noqa: E402

KEY = "test-key-123456789"






def test_multimodal_files_are_indexed_as_on_builtin(tmp_path, pg_dsn):
    ws = tmp_path / "w"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "notes.md").write_text("- the whiteboard photo shows the ledger architecture\n")
    (ws / "memory" / "ignored.png").write_bytes(tiny_png())  # memory/ never yields multimodal files
    media = ws / "media"
    media.mkdir()
    (media / "whiteboard.png").write_bytes(tiny_png())
    (media / "standup.wav").write_bytes(tiny_wav())
    (media / "fake.png").write_text("this is text, not an image")
    (media / "huge.jpg").write_bytes(b"\xff\xd8\xff" + b"\x00" * 5000)
    (media / "big.png").write_bytes(tiny_png() + b"\x00" * 3000)  # the server refuses it (413)
    with ProviderServer("gemini") as server:
        server.reject_inline_over = 2500
        ms = {"provider": "gemini", "remote": {"baseUrl": server.base_url, "apiKey": KEY},
              "model": "gemini-embedding-2-preview", "outputDimensionality": 768, "extraPaths": ["media"],
              "multimodal": {"enabled": True, "modalities": "all", "maxFileBytes": 4000}, "sync": {"onSearch": False}}
        settings = make_settings(tmp_path, ws, ms, memory={"backend": "postgres", "postgres": {"dsn": pg_dsn}})

        async def run() -> None:
            async with PostgresSearchManager(settings) as p, BuiltinSearchManager(settings) as b:
                await p.sync()
                await b.sync()
                with psycopg.connect(pg_dsn) as conn:
                    rows = conn.execute("SELECT path, text, embedding IS NOT NULL FROM memsift_chunks").fetchall()
                    files = {f for (f,) in conn.execute("SELECT path FROM memsift_files").fetchall()}
                assert {r[0] for r in rows} == {"memory/notes.md", "media/whiteboard.png", "media/standup.wav"}
                assert {r[1] for r in rows if r[0].startswith("media/")} == {"Image file: media/whiteboard.png",
                                                                              "Audio file: media/standup.wav"}
                assert all(r[2] for r in rows)  # every chunk has its vector
                assert "media/big.png" in files  # recorded with no chunks after the provider refused it
                skipped = {s["path"]: s["reason"] for s in (await p.status()).skipped}
                assert "not image" in skipped["media/fake.png"] and "maxFileBytes" in skipped["media/huge.jpg"]
                assert "refused" in skipped["media/big.png"]
                for m in (p, b):  # just synced: nothing pending (builtin counted every image as removed)
                    status = await m.status()
                    assert not status.dirty and status.index["pendingChanges"] == 0, (m.backend, status.index)
                got = await p.search("Image file whiteboard", min_score=0, mode="keyword")
                want = await b.search("Image file whiteboard", min_score=0, mode="keyword")
                assert [h.path for h in got.results] == [h.path for h in want.results]
                assert "media/whiteboard.png" in [h.path for h in got.results]
                with pytest.raises(PathNotAllowedError):
                    await p.read("media/whiteboard.png")  # memory_get stays Markdown only
            inline = [part["inlineData"]["mimeType"] for req in server.embedding_requests()
                      for r in req.body.get("requests", []) for part in r["content"]["parts"] if "inlineData" in part]
            assert sorted(set(inline)) == ["audio/wav", "image/png"]

        anyio.run(run)
