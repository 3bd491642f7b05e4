"""OpenClaw 2026.9 configs carry over: `memory.search`, `agents.entries`, a whole `openclaw.json`
(its other sections, `$include`, `${VAR}`), an OpenClaw file under memsift's own
(`--openclaw-config`), and `memsift config show` naming the file and key of every setting; the
keys and the warnings reach every door."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest

from memsift.engine.config import load_config, resolve_agent
from memsift.engine.errors import ConfigError
from provider_server import ProviderServer

FIXTURE = Path(__file__).parents[1] / "fixtures" / "openclaw"


def _load(path: Path, *, agent: str | None = None, env: dict[str, str] | None = None, openclaw: Path | None = None):
    config, found = load_config(path, environ=env or {}, openclaw_config=openclaw)
    return resolve_agent(config, agent_id=agent, config_path=found, environ=env or {})


def _write(folder: Path, name: str, data: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_a_whole_openclaw_config_written_by_openclaw_loads(tmp_path):
    """The file OpenClaw 2026.9.6 wrote (plugin linked, slot switched): only its memory keys count."""
    ws = tmp_path / "ws"
    ws.mkdir()
    text = (FIXTURE / "openclaw.json").read_text(encoding="utf-8").replace("<WORKSPACE>", str(ws))
    settings = _load(_write(tmp_path, "openclaw.json", text))
    assert settings.workspace == ws and settings.memory_search.query.max_results == 2
    assert settings.notes == ()  # every section is OpenClaw's: nothing to warn about


def test_memory_search_and_agent_entries_with_their_precedence(tmp_path):
    ws = tmp_path / "ws"
    (ws / "ops").mkdir(parents=True)
    path = _write(tmp_path, "openclaw.json", {
        "memorySearch": {"query": {"minScore": 0.1}, "extraPaths": ["oldest"]},
        "agents": {
            "defaults": {"workspace": str(ws), "systemAgent": {"agentId": "main"},
                         "memorySearch": {"query": {"maxResults": 9, "minScore": 0.2}, "extraPaths": ["legacy"]}},
            "entries": {
                "main": {"memory": {"search": {"extraPaths": ["mine"]}}},
                "Ops": {"memorySearch": {"query": {"maxResults": 4}, "chunking": {"tokens": 300}},
                        "memory": {"search": {"query": {"maxResults": 3}}}},
            },
        },
        "memory": {"search": {"query": {"maxResults": 2}, "extraPaths": ["shared"]}},
    })
    main = _load(path)
    assert main.agent_id == "main" and main.workspace == ws
    q = main.memory_search.query
    assert (q.max_results, q.min_score) == (2, 0.2)  # memory.search > agents.defaults.memorySearch > memorySearch
    assert main.memory_search.extra_paths == ["oldest", "legacy", "shared", "mine"]  # added up, defaults' first
    ops = _load(path, agent="ops")  # ids match case-insensitively
    assert ops.memory_search.query.max_results == 3  # memory.search beats the agent's older memorySearch
    assert ops.memory_search.chunking.tokens == 300  # ... which still counts where the new key is silent
    assert ops.workspace == ws / "ops"  # an agent of several without its own workspace: OpenClaw's subfolder
    assert ops.sources["memorySearch.query.maxResults"] == f"{path}: agents.entries.Ops.memory.search.query.maxResults"
    assert main.sources["memorySearch.query.minScore"] == f"{path}: agents.defaults.memorySearch.query.minScore"
    assert main.sources["workspace"] == f"{path}: agents.defaults.workspace"


def test_the_default_agent_of_an_entries_roster(tmp_path):
    ws = tmp_path / "ws"
    (ws / "home").mkdir(parents=True)
    two = {"agents": {"defaults": {"workspace": str(ws)}, "entries": {"home": {}, "ops": {"workspace": str(ws)}}}}
    with pytest.raises(ConfigError) as err:
        _load(_write(tmp_path, "two.json", two))
    assert "home, ops" in str(err.value) and "systemAgent" in str(err.value) and "-a" in str(err.value)
    assert _load(_write(tmp_path, "two.json", two), agent="home").workspace == ws / "home"
    one = {"agents": {"defaults": {"workspace": str(ws)}, "entries": {"solo": {}}}}
    solo = _load(_write(tmp_path, "one.json", one))
    assert solo.agent_id == "solo" and solo.workspace == ws  # the sole agent keeps the shared workspace


def test_openclaw_file_under_memsifts_own(tmp_path):
    """The plugin's case: OpenClaw's keys apply, memsift's own file (backend, QMD, ranker) adds and wins."""
    ws = tmp_path / "ws"
    ws.mkdir()
    openclaw = _write(
        tmp_path / "oc",
        "openclaw.json",
        {
            "agents": {
                "defaults": {"workspace": str(ws)},
                "entries": {"main": {"memory": {"search": {"query": {"minScore": 0.3}}}}},
            },
            "memory": {"search": {"query": {"maxResults": 2}, "provider": "none"}},
        },
    )
    own = _write(
        tmp_path / "ms",
        "config.json5",
        {
            "memory": {"backend": "builtin", "search": {"query": {"maxResults": 5}}},
            "agents": {"defaults": {"memorySearch": {"query": {"ranker": {"enabled": False}}}}},
        },
    )
    settings = _load(own, openclaw=openclaw)
    q = settings.memory_search.query
    assert q.max_results == 5 and settings.memory_search.provider == "none" and not q.ranker.enabled
    assert q.min_score == 0.3  # OpenClaw's per-agent key is more specific than memsift's defaults
    assert settings.sources["memorySearch.query.maxResults"] == f"{own}: memory.search.query.maxResults"
    assert settings.sources["memorySearch.provider"] == f"{openclaw}: memory.search.provider"
    assert settings.openclaw_config == openclaw and settings.workspace == ws
    via_env = _load(own, env={"MEMSIFT_OPENCLAW_CONFIG": str(openclaw)})
    assert via_env.memory_search.provider == "none"


def test_includes_and_variables_as_openclaw_resolves_them(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    root = tmp_path / "oc"
    _write(root / "parts", "agents.json5", {"defaults": {"workspace": "${MY_WS}"}})
    _write(root / "parts", "memory.json5", {"search": {"query": {"maxResults": 3}, "remote": {"apiKey": "${MY_KEY}"}}})
    path = _write(root, "openclaw.json", '{agents: {$include: "./parts/agents.json5"},'
                                         ' memory: {$include: ["./parts/memory.json5"], citations: "off"},'
                                         ' channels: {$include: "./missing.json5"}}')  # a foreign section: never read
    settings = _load(path, env={"MY_WS": str(ws), "MY_KEY": "sk-secret"})
    assert settings.workspace == ws and settings.memory_search.query.max_results == 3
    assert (
        settings.memory_search.remote.api_key.get_secret_value() == "sk-secret" and settings.memory.citations == "off"
    )
    unset = _load(path, env={"MY_WS": str(ws)})
    assert any("${MY_KEY} is not set" in n for n in unset.notes)
    outside = _write(root, "out.json", {"memory": {"$include": "../elsewhere.json5"}})
    _write(tmp_path, "elsewhere.json5", {})
    with pytest.raises(ConfigError, match="outside .*OPENCLAW_INCLUDE_ROOTS"):
        _load(outside, env={})
    assert _load(outside, env={"OPENCLAW_INCLUDE_ROOTS": str(tmp_path)}).memory.citations == "auto"
    _write(root, "a.json5", {"$include": "./b.json5"})
    _write(root, "b.json5", {"$include": "./a.json5"})
    with pytest.raises(ConfigError, match="includes itself"):
        _load(_write(root, "loop.json", {"memory": {"$include": "./a.json5"}}))


def test_openclaw_2026_9_value_forms(tmp_path):
    path = _write(tmp_path, "openclaw.json", {"memory": {"search": {
        "provider": "openai-compatible", "rememberAcrossConversations": True, "inputType": "query",
        "extraPaths": ["a", {"path": "b"}, {"path": "c", "pattern": "**/*.md"}],
        "remote": {"apiKey": {"source": "env", "provider": "default", "id": "MY_OPENAI_KEY"}}}}})
    ms = _load(path).memory_search
    assert ms.provider == "openai" and ms.extra_paths == ["a", "b", "c"]
    assert ms.remote.api_key.get_secret_value() == "MY_OPENAI_KEY"  # read as the variable's name
    with pytest.raises(ConfigError, match=r"extraPaths.*runbooks.*'docs/runbooks'"):
        _load(
            _write(
                tmp_path,
                "p.json",
                {"memory": {"search": {"extraPaths": [{"path": "docs", "pattern": "runbooks/**/*.md"}]}}},
            )
        )
    with pytest.raises(ConfigError, match="'exec' secret reference"):
        _load(
            _write(
                tmp_path,
                "s.json",
                {"memory": {"search": {"remote": {"apiKey": {"source": "exec", "provider": "x", "id": "y"}}}}},
            )
        )


def test_models_providers_give_the_embedding_provider_its_endpoint_key_and_headers(tmp_path):
    """OpenClaw's `models.providers.<id>` (a proxy for OpenAI, a remote Ollama): the embedding provider of
    that id takes its baseUrl, apiKey and headers where `memorySearch.remote` leaves them unset, as
    OpenClaw does (before: not read, so memsift went to api.openai.com or 127.0.0.1:11434 instead).
    A whole `openclaw.json`'s other providers cost nothing: no warning for their unset variables."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- the user drinks dark roast coffee\n")
    key = "sk-proxy-Zq8vN3xT7pL2"
    with ProviderServer("openai", key=key) as server:
        path = _write(tmp_path, "openclaw.json", {
            "models": {"providers": {
                "openai": {"baseUrl": server.base_url, "apiKey": "$TEAM_OPENAI", "api": "openai-completions",
                           "headers": {"X-Team": "support", "X-Org": "acme"}, "models": [{"id": "gpt-x"}]},
                "anthropic": {"apiKey": "${ANTHROPIC_API_KEY}"},
                "ollama": {"baseUrl": 11434, "apiKey": {"source": "exec", "provider": "vault", "id": "k"}}}},
            "agents": {"defaults": {"workspace": str(ws), "memorySearch": {
                "provider": "openai", "fallback": "none", "remote": {"headers": {"X-Org": "mine"}}}}},
        })
        settings = _load(path, env={"TEAM_OPENAI": key})
        remote = settings.memory_search.remote
        assert remote.base_url == server.base_url and remote.headers == {"X-Team": "support", "X-Org": "mine"}
        assert settings.sources["memorySearch.remote.baseUrl"] == f"{path}: models.providers.openai.baseUrl"
        assert settings.notes == ()  # anthropic's unset variable is OpenClaw's business
        own = _write(tmp_path, "own.json", {"agents": {"defaults": {"memorySearch": {
            "remote": {"baseUrl": "http://127.0.0.1:9/v1"}}}}})
        assert _load(own, openclaw=path, env={"TEAM_OPENAI": key}).memory_search.remote.base_url == \
            "http://127.0.0.1:9/v1"  # memorySearch.remote wins
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
               "MEMSIFT_NO_RESIDENT": "1", "TEAM_OPENAI": key, "MEMSIFT_STATE_DIR": str(tmp_path / "state")}
        done = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "--openclaw-config", str(path),
                               "index"], capture_output=True, text=True, env=env, timeout=180)
        assert done.returncode == 0, done.stderr[-1500:]
        asked = server.embedding_requests()
        assert asked and asked[0].headers["x-team"] == "support" and asked[0].headers["x-org"] == "mine"
        assert key not in done.stdout + done.stderr


def test_what_memsift_sets_aside_is_said_and_near_misses_are_refused(tmp_path):
    path = _write(
        tmp_path, "c.json", {"memory": {"search": {}, "lanced": {"x": 1}}, "fancy": 1, "mcp": {"servers": {}}}
    )
    notes = _load(path).notes
    assert any("'fancy'" in n and "ignored" in n for n in notes)
    assert any(n.startswith("memory.lanced") and "no installed backend" in n for n in notes)
    assert not any("'mcp'" in n for n in notes)  # OpenClaw's own section: set aside quietly
    with pytest.raises(ConfigError, match="did you mean 'memory'"):
        _load(_write(tmp_path, "typo.json", {"memroy": {}}))
    with pytest.raises(ConfigError, match="did you mean 'memory'"):
        _load(_write(tmp_path, "typo2.json", {"agents": {"entries": {"main": {"memroy": {"search": {}}}}}}))


def _cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "MEMSIFT_NO_RESIDENT": "1"}
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_config_show_and_warnings_at_the_default_verbosity(tmp_path, example_workspace):
    path = _write(tmp_path, "openclaw.json", {"agents": {"defaults": {"workspace": str(example_workspace)}},
                                               "memory": {"search": {"query": {"maxResults": 2}, "provider": "none"},
                                                          "weaviate": {"x": 1}}})
    shown = _cli("-c", str(path), "config", "show", tmp_path=tmp_path)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["sources"]["memorySearch.query.maxResults"] == f"{path}: memory.search.query.maxResults"
    assert data["sources"]["workspace"] == f"{path}: agents.defaults.workspace"
    assert data["memorySearch"]["query"]["maxResults"] == 2 and data["workspace"] == str(example_workspace)
    searched = _cli("-c", str(path), "search", "ledger", tmp_path=tmp_path)  # no -v
    assert searched.returncode == 0 and "memory.weaviate" in searched.stderr and "memsift: warning:" in searched.stderr
    assert len(re.findall(r"^\d\.\d{3} ", searched.stdout, re.M)) == 2  # memory.search.query.maxResults


def test_openclaw_2026_9_keys_reach_every_door(tmp_path, example_workspace):
    """memory.search.query.maxResults from an OpenClaw 2026.9 file, and its warning, through the
    cold CLI, the resident helper, `watch`, MCP over stdio and the Python API."""
    from memsift.engine import open_manager
    from helpers import RESIDENT_DRIVER, stop_helpers, wait_for_socket

    path = _write(tmp_path, "openclaw.json", {"agents": {"entries": {"main": {"workspace": str(example_workspace)}}},
                                               "memory": {"search": {"query": {"maxResults": 2}, "provider": "none"},
                                                          "weaviate": {"x": 1}},
                                               "plugins": {"slots": {"memory": "memsift"}}})
    argv = ["-c", str(path), "search", "ledger", "--json"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}
    env = {**base, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    counted = lambda out: len(json.loads(out)["results"])  # noqa: E731

    cold = _cli(*argv, tmp_path=tmp_path)
    assert counted(cold.stdout) == 2 and "memory.weaviate" in cold.stderr

    # Short folders: a socket's path must fit 107 bytes (tmp_path's do not).
    runtimes = {door: Path(tempfile.mkdtemp(prefix=f"mso{door[0]}")) for door in ("helper", "watch")}
    helper_env = {**env, "XDG_RUNTIME_DIR": str(runtimes["helper"])}
    watch_env = {**env, "XDG_RUNTIME_DIR": str(runtimes["watch"]), "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false"}
    cli = [sys.executable, "-m", "memsift.engine.cli.main"]
    subprocess.run([*cli, *argv], env=helper_env, capture_output=True, timeout=300)  # starts the helper
    watch = subprocess.Popen([*cli, "-c", str(path), "watch"], env=watch_env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        for door, door_env in (("helper", helper_env), ("watch", watch_env)):
            wait_for_socket(runtimes[door])
            answered = subprocess.run([sys.executable, "-c", RESIDENT_DRIVER, *argv], env=door_env, capture_output=True,
                                      text=True, timeout=300)
            assert answered.returncode == 0, (
                door,
                answered.returncode,
                answered.stderr,
            )  # answered there, not declined
            assert counted(answered.stdout) == 2 and "memory.weaviate" in answered.stderr, door
    finally:
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=60)
        stop_helpers(runtimes["helper"])
        for runtime in runtimes.values():
            shutil.rmtree(runtime, ignore_errors=True)

    mcp = subprocess.Popen([*cli, "-c", str(path), "mcp", "--no-watch"], env={**env, "MEMSIFT_NO_RESIDENT": "1"},
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for message in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "memory_search", "arguments": {"query": "ledger"}},
            },
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_status", "arguments": {}}},
        ):
            mcp.stdin.write((json.dumps(message) + "\n").encode())
        mcp.stdin.flush()
        answers = {}
        while len(answers) < 3:
            line = json.loads(mcp.stdout.readline())
            answers[line["id"]] = line
        assert len(answers[2]["result"]["structuredContent"]["results"]) == 2
        assert "memory.weaviate" in answers[3]["result"]["structuredContent"]["warning"]
    finally:
        mcp.kill()
        mcp.wait()

    async def api() -> int:
        manager = open_manager(config_path=path)
        try:
            return len((await manager.search("ledger")).results)
        finally:
            await manager.aclose()

    assert anyio.run(api) == 2


def test_session_transcripts_are_read_from_openclaws_state_folder(tmp_path):
    """With an OpenClaw config, `sources: ["memory", "sessions"]` reads the transcripts the Gateway
    writes: `$OPENCLAW_STATE_DIR/agents/<id>/sessions`, else `~/.openclaw/…` (memsift looked in its
    own state folder, where there are none, and found nothing); without one, memsift's own. `status`
    says which folder."""
    from memsift.engine.files.transcripts import sessions_folder

    ws = tmp_path / "ws"
    ws.mkdir()
    gateway = _write(tmp_path, "openclaw.json", {"agents": {"defaults": {"workspace": str(ws), "memorySearch": {
        "sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}}}}})
    memsift_state = {"MEMSIFT_STATE_DIR": str(tmp_path / "memsift-state")}
    mine = _write(tmp_path, "memsift.json5", {})
    told = _load(mine, env={**memsift_state, "OPENCLAW_STATE_DIR": str(tmp_path / "oc")}, openclaw=gateway)
    assert sessions_folder(told) == tmp_path / "oc" / "agents" / "main" / "sessions"
    home = _load(mine, env=memsift_state, openclaw=gateway)  # OpenClaw's default, under this user's home
    assert sessions_folder(home).parts[-4:] == (".openclaw", "agents", "main", "sessions")
    own = _load(gateway, env=memsift_state)  # the same file as memsift's own config: no OpenClaw state folder
    assert sessions_folder(own) == (tmp_path / "memsift-state").resolve() / "agents" / "main" / "sessions"

    from memsift.engine.compose.factory import open_manager
    from memsift.engine.cli.render import render_status

    async def status() -> str:
        async with open_manager(told) as manager:
            return render_status(await manager.status())

    text = anyio.run(status)
    assert f"memory, sessions (transcripts: {tmp_path / 'oc' / 'agents' / 'main' / 'sessions'})" in text, text
