"""The MCP server through the `mcp` package's own client: stdio and HTTP, builtin and QMD."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pytest

from helpers import QMD_SAMPLES, free_port, make_settings

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

from memsift.backends.builtin import BuiltinSearchManager  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402
from memsift.engine.errors import ProviderError  # noqa: E402
from memsift.engine.config.models import QueryConfig  # noqa: E402
from memsift.engine.mcp.server import MemoryServer, build_server  # noqa: E402

FAKEBIN = Path(__file__).parents[1] / "backends" / "qmd" / "fakebin"
TOOLS = {"memory_search", "memory_get", "memory_status"}


def _real_qmd() -> bool:
    exe = shutil.which("qmd")
    if not exe:
        return False
    try:
        return "2.8.3" in subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def _stdio(ws: Path, state: Path, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memsift.engine.cli.main", "-w", str(ws), *args],
        env={"MEMSIFT_STATE_DIR": str(state), "XDG_CONFIG_HOME": str(state / "xdg"), **(env or {})},
    )


async def _exercise(client: Client, *, query: str, expect_path: str, backend: str) -> dict:
    """List and call the three tools; return the search payload for backend-specific checks."""
    listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.annotations.read_only_hint is True and t.annotations.destructive_hint is False
        assert t.output_schema is not None  # structured output
    assert (
        "decisions" in tools["memory_search"].description and "before answering" in tools["memory_search"].description
    )
    assert set(tools["memory_get"].input_schema["properties"]) == {"path", "from", "lines", "offset", "sessionKey"}

    found = await client.call_tool("memory_search", {"query": query, "maxResults": 5})
    assert not found.is_error
    payload = found.structured_content
    assert payload["backend"] == backend and not payload["disabled"]
    paths = [h["path"] for h in payload["results"]]
    assert expect_path in paths, json.dumps(payload)
    hit = payload["results"][paths.index(expect_path)]
    assert hit["citation"].startswith(f"{expect_path}#L") and hit["snippet"].endswith(f"Source: {hit['citation']}")

    got = await client.call_tool("memory_get", {"path": hit["path"], "from": hit["startLine"], "lines": 2})
    assert not got.is_error and got.structured_content["lines"] == 2 and got.structured_content["text"]

    outside = await client.call_tool("memory_get", {"path": "../../etc/passwd"})
    assert not outside.is_error  # an outage is a value, not a tool error
    assert outside.structured_content["disabled"] is True and "not allowed" in outside.structured_content["error"]
    assert "root:" not in json.dumps(outside.structured_content)

    status = await client.call_tool("memory_status", {})
    assert not status.is_error and status.structured_content["status"]["backend"] == backend
    return payload


def test_stdio_builtin_lists_and_calls_all_three_tools(example_workspace, tmp_path):
    async def go():
        async with Client(_stdio(example_workspace, tmp_path / "state", "mcp")) as client:
            payload = await _exercise(client, query="which database did we choose for the ledger service",
                                      expect_path="MEMORY.md", backend="builtin")
            assert payload["mode"] == "hybrid" and payload["provider"] == "local"
            bad = await client.call_tool("memory_search", {"query": "x", "maxResults": 0})
            assert bad.is_error  # invalid arguments are refused with the schema's message
            # Refused by the schema or by memsift's own checks, the message says so once.
            for args in ({"query": "x", "maxResults": "abc"}, {"query": "x", "since": "garbage-date"},
                         {"query": "x", "mode": "nope"}):
                refused = await client.call_tool("memory_search", args)
                text = refused.content[0].text
                assert refused.is_error and text.startswith(
                    "Error executing tool memory_search: invalid arguments: "
                ), text
                assert text.count("Error executing tool") == 1, text

    anyio.run(go)


def test_stdio_qmd_backend_lists_and_calls_all_three_tools(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    real = _real_qmd()
    env = {"PATH": os.environ["PATH"]} if real else {
        "PATH": f"{FAKEBIN}:{os.environ['PATH']}", "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
        "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"), "FAKE_QMD_PIDS": str(tmp_path / "pids"),
    }
    config = tmp_path / "memsift.json5"
    config.write_text(json.dumps({"memory": {"backend": "qmd", "qmd": {
        "includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}], "update": {"debounceMs": 0}}}}))

    async def go():
        async with Client(_stdio(ws, tmp_path / "state", "-c", str(config), "mcp", "--no-watch", env=env)) as client:
            payload = await _exercise(client, query="aurora telemetry", expect_path="MEMORY.md", backend="qmd")
            assert "fallback" not in payload and payload["mode"] == "search"  # nothing null is sent
            group = await client.call_tool(
                "memory_search", {"query": "aurora telemetry", "sessionKey": "agent:main:discord:group:42"}
            )
            denied = group.structured_content
            assert not group.is_error and denied["results"] == [] and denied["disabled"] is True
            assert denied["denied"]["chatType"] == "group" and denied["denied"]["channel"] == "discord"

    anyio.run(go)



def test_http_transport_serves_on_loopback(example_workspace, tmp_path):
    port = free_port()
    state = tmp_path / "state"
    runtime = Path(tempfile.mkdtemp(prefix="msr"))  # a short folder for the resident socket
    env = {
        **{k: v for k, v in os.environ.items() if k != "MEMSIFT_NO_RESIDENT"},
        "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false",
        "MEMSIFT_STATE_DIR": str(state),
        "XDG_CONFIG_HOME": str(state / "xdg"),
        "XDG_RUNTIME_DIR": str(runtime),
        "MEMSIFT_LOG_LEVEL": "info",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memsift.engine.cli.main",
            "-w",
            str(example_workspace),
            "mcp",
            "--http",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                time.sleep(0.2)

        async def go():
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await _exercise(
                    client, query="what is my sister allergic to", expect_path="MEMORY.md", backend="builtin"
                )

        anyio.run(go)
        # The server also answers `memsift search` from a terminal (resident searches).
        deadline = time.monotonic() + 30
        while not list((runtime / "memsift").glob("*.sock")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list((runtime / "memsift").glob("*.sock"))
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "memsift.engine.cli.main",
                "-w",
                str(example_workspace),
                "search",
                "what is my sister allergic to",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 0 and json.loads(cli.stdout)["results"][0]["path"] == "MEMORY.md"
        # DNS-rebinding protection: a request naming another host is refused before any tool runs.
        import httpx

        rebound = httpx.post(f"http://127.0.0.1:{port}/mcp", headers={"Host": f"evil.example:{port}"},
                             json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
        assert rebound.status_code in (400, 403, 421) and "memory_search" not in rebound.text
        # The authority is parsed strictly: user info, another port or a path are another server.
        for headers in ({"Host": f"localhost:{port}@evil.com"}, {"Origin": f"http://localhost:{port}@evil.com"},
                        {"Host": f"127.0.0.1:{port + 1}"}, {"Origin": f"http://127.0.0.1:{port}/x"},
                        {"Origin": f"http://localhost:{port}.evil.com"}, {"Host": f"localhost:{port} evil"},
                        {"Origin": "null"}, {"Host": "localhost"}):
            refused = httpx.post(f"http://127.0.0.1:{port}/mcp", headers=headers, timeout=10,
                                 json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert refused.status_code in (403, 421) and "memory_search" not in refused.text, (
                headers,
                refused.status_code,
            )
        # Bound to loopback only: the port is not open on another local address of this host.
        other = _non_loopback_address()
        if other:
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=1).close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(runtime, ignore_errors=True)
    assert "answered a CLI search" in proc.stderr.read().decode()


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; this picks the outgoing interface
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


# In-process: the output bound, paging, session keys and outages as values.


def _server(tmp_path, ws, **kw):
    settings = make_settings(tmp_path, ws, memory={"citations": "on"})
    manager = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    return manager, MemoryServer(manager, settings, **kw)


def test_answers_are_bounded_and_long_files_come_in_pages(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    lines = [f"- line {i}: the deploy pipeline for service {i} uses canary releases" for i in range(1, 301)]
    (ws / "memory" / "2026-11-01.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manager, memory = _server(tmp_path, ws, max_chars=1000)

    async def go():
        await manager.sync()
        found = await memory.search("canary releases deploy pipeline", max_results=20, min_score=0.0)
        assert sum(len(h.snippet) for h in found.results) <= 1000
        assert found.truncated is True and found.results

        pages, start = [], 1
        while True:
            page = await memory.get("memory/2026-11-01.md", from_line=start)
            assert len(page.text) <= 1000 and not page.disabled
            pages.append(page.text)
            if not page.truncated:
                break
            assert page.next_from == start + page.lines
            start = page.next_from
        assert len(pages) > 5
        assert "".join(pages) == (ws / "memory" / "2026-11-01.md").read_text(encoding="utf-8")
        await manager.aclose()

    anyio.run(go)


def test_server_session_key_wins_over_a_per_call_key(tmp_path, example_workspace):
    manager, memory = _server(tmp_path, example_workspace, session_key="agent:main:telegram:group:7")

    async def go():
        answer = await memory.search("PostgreSQL", session_key="agent:main:main")
        assert answer.warning and "fixed by the server" in answer.warning
        assert memory._key(None) == ("agent:main:telegram:group:7", None)
        await manager.aclose()

    anyio.run(go)


class _FailingManager:
    """Raises what a provider outage raises; deterministic stand-in for a quota-exhausted API."""

    query_config = QueryConfig()

    def __init__(self, message: str) -> None:
        self.message = message

    async def answer(self, request):
        raise ProviderError(self.message)

    async def read(self, path, from_line=None, lines=None, **kw):
        raise OSError("disk gone")

    async def status(self, *, deep=False):
        raise ProviderError(self.message)


@pytest.mark.parametrize(("message", "warning"), [
    ("openai embeddings failed: 429 insufficient_quota", "quota is exhausted"),
    ("gemini embeddings failed: 500 internal", "memory search failed"),
])
def test_outages_come_back_as_values_through_the_client(tmp_path, example_workspace, message, warning):
    settings = make_settings(tmp_path, example_workspace)
    server = build_server(MemoryServer(_FailingManager(message), settings))

    async def go():
        async with Client(server) as client:
            found = await client.call_tool("memory_search", {"query": "anything"})
            assert not found.is_error
            body = found.structured_content
            assert body["disabled"] and body["unavailable"] and body["results"] == []
            assert warning in body["warning"] and body["action"] and message in body["error"]
            got = await client.call_tool("memory_get", {"path": "MEMORY.md"})
            assert (
                not got.is_error
                and got.structured_content["disabled"]
                and "disk gone" in got.structured_content["error"]
            )
            st = await client.call_tool("memory_status", {})
            assert (
                not st.is_error and "status" not in st.structured_content and message in st.structured_content["error"]
            )

    anyio.run(go)


def test_a_note_written_just_before_memory_search_is_found(example_workspace, tmp_path):
    # Issue 17: over MCP, 6 of 9 searches missed a note written a moment earlier, and no answer
    # carried syncPending or stale. The server keeps the index fresh (its watcher runs).
    from memsift.engine.files.notes import append_note

    async def go():
        misses = []
        async with Client(_stdio(example_workspace, tmp_path / "state", "mcp")) as client:
            await client.call_tool("memory_search", {"query": "warm up"})
            for i in range(9):
                word = f"heron{i}"
                append_note(example_workspace, f"Order {word} supplies")
                if i % 3 == 2:
                    await anyio.sleep(0.3)  # inside the watcher's debounce window
                found = (await client.call_tool("memory_search", {"query": word})).structured_content
                if not any(word in h["snippet"] for h in found["results"]) and not found.get("syncPending"):
                    misses.append(word)
        return misses

    assert anyio.run(go) == []


def test_memory_get_takes_citations_and_continues_inside_a_long_line(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    long_line = "- " + " ".join(f"word{i}" for i in range(700))  # ~5,500 characters on one line
    text = f"# 2026-11-01\n\n{long_line}\n- a short line\n"
    (ws / "memory" / "2026-11-01.md").write_text(text, encoding="utf-8")
    manager, memory = _server(tmp_path, ws, max_chars=1000)

    async def go():
        cited = await memory.get("memory/2026-11-01.md#L1-L2")
        assert (cited.path, cited.text, cited.from_, cited.lines) == ("memory/2026-11-01.md", "# 2026-11-01\n", 1, 2)
        header = await memory.get("memory/2026-11-01.md:4-4")
        assert header.text == "- a short line" and header.from_ == 4

        # Page through the whole file, continuing inside the long line where a page cut it.
        pages, start, offset = [], 1, None
        for _ in range(50):
            page = await memory.get("memory/2026-11-01.md", from_line=start, offset=offset)
            assert len(page.text) <= 1000 and not page.disabled and page.text
            pages.append(page.text)
            if not page.truncated:
                break
            start, offset = page.next_from, page.next_offset
        assert "".join(pages) == text
        await manager.aclose()

    anyio.run(go)


def test_bad_arguments_and_an_empty_query_are_explained_plainly(tmp_path, example_workspace):
    manager, memory = _server(tmp_path, example_workspace)

    async def go():
        async with Client(build_server(memory)) as client:
            bad = await client.call_tool("memory_search", {"query": "x", "maxResults": 0})
            text = bad.content[0].text
            assert bad.is_error and "maxResults" in text and "greater than or equal to 1" in text and "(got 0)" in text
            assert "pydantic" not in text and "http" not in text and "type=" not in text, text
            bad = await client.call_tool("memory_get", {"path": "MEMORY.md", "from": "abc"})
            assert bad.is_error and "from" in bad.content[0].text and "pydantic" not in bad.content[0].text
            empty = (await client.call_tool("memory_search", {"query": "  "})).structured_content
            assert empty["results"] == [] and "empty" in empty["warning"] and empty["action"]
        await manager.aclose()

    anyio.run(go)


def test_since_and_until_filter_memory_search_and_a_bad_date_says_what_to_pass(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-10-01.md").write_text("- the deploy pipeline moved to canary releases\n")
    (ws / "memory" / "2026-11-01.md").write_text("- the deploy pipeline gained a canary dashboard\n")
    manager, memory = _server(tmp_path, ws)

    async def go():
        await manager.sync()
        found = await memory.search("canary deploy pipeline", min_score=0.0, since="2026-10-15")
        assert [h.path for h in found.results] == ["memory/2026-11-01.md"]
        assert found.time_filter == "2026-10-15..… ('since 2026-10-15')"
        bad = await memory.search("canary deploy pipeline", until="next blue moon")
        assert bad.results == [] and "until 'next blue moon' is not a date" in bad.error and "YYYY-MM-DD" in bad.error
        assert bad.invalid == "until" and bad.error.startswith("until: ")  # as every door names it
        await manager.aclose()

    anyio.run(go)


def test_memory_search_shows_every_answer_field_the_result_model_has():
    """MCP's output is derived from SearchAnswer: a field the answer gains reaches memory_search by
    itself, and one filled in on an answer is what the tool returns."""
    from memsift.engine.mcp.server import _NOT_SHOWN, SearchOutput, _from_answer
    from memsift.engine.results import SearchAnswer

    assert _NOT_SHOWN == {"query", "min_score", "max_results", "relaxed", "pending_files"}
    missing = set(SearchAnswer.model_fields) - _NOT_SHOWN - set(SearchOutput.model_fields)
    assert not missing, missing
    answer = SearchAnswer(query="q", results=[], backend="builtin", mode="hybrid", min_score=0.35, max_results=6,
                          took_ms=3.5, sync_error="the disk is full", time_note="no notes that week",
                          notes=["an update is still running"])
    shown = _from_answer(answer, 4000).model_dump(by_alias=True, exclude_none=True)
    assert shown["syncError"] == "the disk is full" and shown["timeNote"] == "no notes that week"
    assert shown["notes"] == ["an update is still running"] and shown["tookMs"] == 3.5 and shown["backend"] == "builtin"
    assert "query" not in shown and "minScore" not in shown and "degraded" not in shown


def test_a_path_typed_in_another_unicode_form_reads_back_through_memory_get_and_get(tmp_path, example_workspace):
    """A note synced from a Mac has a decomposed name ("cafe" + U+0301); the model asking memory_get
    types "café" composed: the file was "missing". Also the CLI's `get`, typed as a person types it."""
    import unicodedata

    ws = tmp_path / "mac-synced"
    shutil.copytree(example_workspace, ws)
    on_disk = unicodedata.normalize("NFD", "memory/projects/café-ledger.md")
    (ws / on_disk).write_text("# Café\n\nThe café ledger moved to PostgreSQL 16.\n", encoding="utf-8")
    typed = unicodedata.normalize("NFC", on_disk)

    async def go():
        async with Client(_stdio(ws, tmp_path / "state", "mcp")) as client:
            got = await client.call_tool("memory_get", {"path": typed})
            return got.structured_content or json.loads(got.content[0].text)

    payload = anyio.run(go)
    assert payload["path"] == on_disk and "PostgreSQL 16" in payload["text"] and not payload.get("missing")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
           "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "state" / "xdg")}
    cli = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "get", f"{typed}#L3"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert cli.returncode == 0 and cli.stdout == "The café ledger moved to PostgreSQL 16.\n", cli.stderr
