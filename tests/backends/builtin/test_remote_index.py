"""The builtin index with remote providers on loopback: CLI end to end, fallback, cache, multimodal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from helpers import make_settings, tiny_png, tiny_wav
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.store import open_db
from memsift.engine.errors import PathNotAllowedError
from provider_server import Fault, ProviderServer

KEY = "test-key-123456789"


def run(fn, *args, **kw):
    return anyio.run(lambda: fn(*args, **kw))


def _rows(db: Path, sql: str):
    conn, _ = open_db(db, readonly=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _remote(server: ProviderServer, provider: str, **extra) -> dict:
    return {"provider": provider, "remote": {"baseUrl": server.base_url, "apiKey": KEY}, **extra}


def _cli(tmp_path: Path, cfg: dict, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT_NO_RESIDENT": "1",
    }
    env.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state")})
    return subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(path), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )


def test_cli_index_and_search_through_a_loopback_openai_server(tmp_path, example_workspace):
    with ProviderServer("openai") as server:
        cfg = {"agents": {"defaults": {"workspace": str(example_workspace), "memorySearch": _remote(server, "openai")}}}
        r = _cli(tmp_path, cfg, "-vv", "index", "--json")
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["chunksEmbedded"] == report["chunksWritten"] >= 6
        n_embed = len(server.embedding_requests())
        assert n_embed >= 1

        r2 = _cli(tmp_path, cfg, "-vv", "search", "dark roast coffee oat milk", "--json")
        assert r2.returncode == 0, r2.stderr
        answer = json.loads(r2.stdout)
        assert (
            answer["provider"] == "openai"
            and answer["model"] == "text-embedding-3-small"
            and answer["mode"] == "hybrid"
        )
        assert answer["results"][0]["path"] == "MEMORY.md"
        assert len(server.embedding_requests()) == n_embed + 1  # only the query was embedded

        r3 = _cli(tmp_path, cfg, "status", "--deep", "--json")
        assert r3.returncode == 0, r3.stderr
        st = json.loads(r3.stdout)
        assert st["provider"] == "openai" and st["dimensions"] == 48
        assert st["deep"]["embedding"]["ok"] and st["deep"]["embedding"]["dimensions"] == 48
        assert st["deep"]["embedding"]["latencyMs"] >= 0 and st["requests"]["requests"] >= 1

        for out in (r, r2, r3):
            assert KEY not in out.stdout + out.stderr and KEY[:12] not in out.stdout + out.stderr
        assert all(req.headers["authorization"] == f"Bearer {KEY}" for req in server.embedding_requests())


def test_cli_wrong_key_is_exit_5_and_never_printed(tmp_path, example_workspace):
    with ProviderServer("openai", key="the-right-key-000000") as server:
        cfg = {"agents": {"defaults": {"workspace": str(example_workspace), "memorySearch": _remote(server, "openai")}}}
        r = _cli(tmp_path, cfg, "-vv", "index")
        assert r.returncode == 5 and "HTTP 401" in r.stderr
        assert KEY not in r.stdout + r.stderr and KEY[:12] not in r.stdout + r.stderr
    cfg = {"agents": {"defaults": {"workspace": str(example_workspace), "memorySearch": {"provider": "voyage"}}}}
    r = _cli(tmp_path, cfg, "search", "x")
    assert r.returncode == 5 and "VOYAGE_API_KEY" in r.stderr


def test_failing_provider_switches_to_the_fallback_and_recovers(tmp_path, example_workspace):
    with ProviderServer("openai") as server:
        server.faults = [Fault(500, headers={"Retry-After": "0"}) for _ in range(4)]
        settings = make_settings(tmp_path, example_workspace, {**_remote(server, "openai"), "fallback": "local"})
        m = BuiltinSearchManager(settings)
        report = run(m.sync)
        assert report.full_reindex
        answer = run(m.search, "peanut allergy")
        assert answer.provider == "local" and answer.fallback.from_ == "openai" and "HTTP 500" in answer.fallback.reason
        st = run(m.status)
        assert st.fallback.from_ == "openai" and st.provider == "local"
        assert '"fallback"' in _rows(m.db_path, "SELECT value FROM meta")[0][0]
        run(m.aclose)

        # A new process (a CLI search) answers from the fallback-built index with the fallback.
        m2 = BuiltinSearchManager(settings)
        answer = run(m2.search, "peanut allergy")
        assert answer.provider == "local" and answer.mode == "hybrid" and answer.fallback.from_ == "openai"
        # An explicit sync tries the configured provider again; the server is healthy now.
        report = run(m2.sync)
        assert report.full_reindex and "provider" in report.reindex_cause
        answer = run(m2.search, "peanut allergy")
        assert answer.provider == "openai" and answer.fallback is None
        run(m2.aclose)


def test_query_embedding_failure_degrades_to_keywords_visibly(tmp_path, example_workspace):
    with ProviderServer("openai") as server:
        settings = make_settings(tmp_path, example_workspace, _remote(server, "openai"))
        m = BuiltinSearchManager(settings)
        run(m.sync)
        server.faults = [Fault(503, headers={"Retry-After": "0"}) for _ in range(4)]
        answer = run(m.search, "PostgreSQL ledger")
        assert answer.mode == "fts-only" and "HTTP 503" in answer.degraded.vector
        assert answer.results and answer.results[0].path in ("MEMORY.md", "memory/2026-11-02.md")
        run(m.aclose)


def test_cache_endpoint_and_dimension_changes(tmp_path, example_workspace):
    with ProviderServer("gemini") as server:
        base = {**_remote(server, "gemini"), "model": "gemini-embedding-2-preview", "outputDimensionality": 768}
        m = BuiltinSearchManager(make_settings(tmp_path, example_workspace, base))
        run(m.sync)
        first = len(server.embedding_requests())
        run(m.sync, force=True)  # a forced rebuild re-embeds nothing: the cache answers
        assert len(server.embedding_requests()) == first
        run(m.aclose)

        m = BuiltinSearchManager(make_settings(tmp_path, example_workspace, {**base, "outputDimensionality": 1536}))
        report = run(m.sync)
        assert report.full_reindex and report.chunks_embedded == report.chunks_written
        assert "float[1536]" in _rows(m.db_path, "SELECT sql FROM sqlite_master WHERE name='chunks_vec'")[0][0]
        run(m.aclose)

        # Back to 768: the cache (kept across rebuilds) holds those vectors already.
        m = BuiltinSearchManager(make_settings(tmp_path, example_workspace, base))
        report = run(m.sync)
        assert report.full_reindex and report.chunks_embedded == 0
        run(m.aclose)

        with ProviderServer("gemini") as other:
            moved = {**base, "remote": {"baseUrl": other.base_url, "apiKey": KEY}}
            m = BuiltinSearchManager(make_settings(tmp_path, example_workspace, moved))
            report = run(m.sync)
            assert report.full_reindex and report.chunks_embedded > 0 and other.embedding_requests()
            run(m.aclose)


def test_chunks_over_the_provider_input_limit_are_split(tmp_path):
    ws = tmp_path / "w"
    (ws / "memory").mkdir(parents=True)
    long_line = " ".join(f"word{i}" for i in range(900))  # ~7 KB on one line
    (ws / "memory" / "big.md").write_text(f"# big\n{long_line}\nlast line\n")
    with ProviderServer("gemini") as server:
        settings = make_settings(
            tmp_path, ws, {**_remote(server, "gemini"), "chunking": {"tokens": 4000, "overlap": 0}}
        )
        m = BuiltinSearchManager(settings)
        run(m.sync)
        for req in server.embedding_requests():
            for r in req.body["requests"]:
                assert len(r["content"]["parts"][0]["text"].encode()) <= 2048  # gemini-embedding-001 limit
        rows = _rows(m.db_path, "SELECT start_line, end_line, text FROM chunks ORDER BY rowid")
        assert len(rows) >= 4 and {(s, e) for s, e, _ in rows} == {(1, 3)}  # three lines: the file ends with line 3
        assert "".join(t for _, _, t in rows).replace("\n", "") == f"# big{long_line}last line"
        run(m.aclose)






def test_multimodal_images_and_audio_with_gemini_embedding_2(tmp_path):
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
        ms = {
            **_remote(server, "gemini"),
            "model": "gemini-embedding-2-preview",
            "outputDimensionality": 768,
            "extraPaths": ["media"],
            "multimodal": {"enabled": True, "modalities": "all", "maxFileBytes": 4000},
        }
        m = BuiltinSearchManager(make_settings(tmp_path, ws, ms))
        run(m.sync)
        paths = {p for (p,) in _rows(m.db_path, "SELECT path FROM chunks")}
        assert paths == {"memory/notes.md", "media/whiteboard.png", "media/standup.wav"}
        labels = {t for (t,) in _rows(m.db_path, "SELECT text FROM chunks WHERE path LIKE 'media/%'")}
        assert labels == {"Image file: media/whiteboard.png", "Audio file: media/standup.wav"}
        files = {p for (p,) in _rows(m.db_path, "SELECT path FROM files")}
        assert "media/big.png" in files  # recorded with no chunks after the provider refused it
        inline = [
            p["inlineData"]["mimeType"]
            for req in server.embedding_requests()
            for r in req.body.get("requests", [])
            for p in r["content"]["parts"]
            if "inlineData" in p
        ]
        assert sorted(set(inline)) == ["audio/wav", "image/png"]
        skipped = {s["path"]: s["reason"] for s in run(m.status).skipped}
        assert "not image" in skipped["media/fake.png"]
        assert "maxFileBytes" in skipped["media/huge.jpg"]
        assert "refused" in skipped["media/big.png"]
        answer = run(m.search, "Image file whiteboard", min_score=0)
        assert "media/whiteboard.png" in [h.path for h in answer.results]
        with pytest.raises(PathNotAllowedError):
            run(m.read, "media/whiteboard.png")  # memory_get stays Markdown only
        run(m.aclose)
