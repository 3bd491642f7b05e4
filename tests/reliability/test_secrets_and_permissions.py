"""Secrets: API keys and Authorization headers never appear in logs, errors, status or --json
output (captured output is scanned), nor in the index files. Permissions: the index, its WAL/SHM,
the lock file and the state directories memsift creates are user-only."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from figures import FIGURES
from helpers import QMD_SAMPLES, make_settings
from memory_guard import assert_untouched, snapshot
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.qmd import QmdSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from provider_server import Fault, ProviderServer

KEY = "sk-live-Zq8vN3xT7pL2mK9wR4yB6cD1"
FAKEBIN = Path(__file__).resolve().parents[1] / "backends" / "qmd" / "fakebin"


def _leaks(text: str | bytes) -> list[str]:
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    needles = [KEY.encode(), KEY[:12].encode(), f"Bearer {KEY}".encode(), KEY[-12:].encode()]
    return [n.decode() for n in needles if n in data]


def _cli(tmp_path: Path, ws: Path, cfg: dict, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT_NO_RESIDENT": "1",
    }
    env.update(env_extra or {})
    proc = subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", "-vv", "-c", str(path), "-w", str(ws), *args],
        capture_output=True,
        env=env,
        timeout=300,
    )
    FIGURES["outputs scanned for secrets"] += 1
    return proc


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    (w / "memory").mkdir(parents=True)
    (w / "MEMORY.md").write_text("# Memory\n- the user drinks dark roast coffee\n")
    (w / "memory" / "keys.md").write_text("- rotate the API key every quarter (the header is Authorization)\n")
    return w


@pytest.mark.parametrize("where", ["config", "env"])
def test_keys_never_appear_in_output_errors_or_index(tmp_path, ws, where):
    with ProviderServer("openai", key=KEY) as server:
        remote = {"baseUrl": server.base_url} | ({"apiKey": KEY} if where == "config" else {})
        cfg = {
            "stateDir": str(tmp_path / "state"),
            "agents": {"defaults": {"memorySearch": {"provider": "openai", "remote": remote}}},
        }
        env = {"OPENAI_API_KEY": KEY} if where == "env" else {}
        outputs = []
        for args in (["index"], ["search", "coffee"], ["search", "--json", "coffee"], ["status", "--deep", "--json"],
                     ["status", "--deep"], ["config", "show"], ["get", "MEMORY.md"]):
            proc = _cli(tmp_path, ws, cfg, *args, env_extra=env)
            assert proc.returncode == 0, proc.stderr[-2000:]
            outputs.append(proc)
        assert server.embedding_requests()  # the key was really used
        # Failures whose bodies echo the key back, as some APIs do.
        echo = {"error": {"message": f"Incorrect API key provided: {KEY}. Authorization: Bearer {KEY}"}}
        # (5xx bodies go through the same error path as 4xx ones; they are left out only because
        # their retries with backoff make each call take seconds.)
        for fault in (Fault(401, echo), Fault(400, echo), Fault(200, raw=f"not json {KEY}".encode())):
            server.faults = [fault] * 8
            (ws / "memory" / f"new-{fault.status}.md").write_text(f"- note added before a {fault.status}\n")
            for args in (["index", "--force"], ["search", "--json", "coffee"]):
                outputs.append(_cli(tmp_path, ws, cfg, *args, env_extra=env))
                FIGURES["faults injected: provider error echoing the key"] += 1
        for proc in outputs:
            assert not _leaks(proc.stdout) and not _leaks(proc.stderr), (
                proc.args[-3:],
                _leaks(proc.stdout + proc.stderr),
            )
        assert any(b"401" in p.stderr or b"401" in p.stdout for p in outputs)  # the errors were shown...
        assert any(b"***" in p.stderr or b"***" in p.stdout for p in outputs)  # ...masked
    for f in (tmp_path / "state").rglob("*"):
        if f.is_file():
            assert not _leaks(f.read_bytes()), f


def test_index_files_and_state_dirs_are_user_only(tmp_path, ws):
    old = os.umask(0o022)  # a typical umask: without care, files would be 0644 and dirs 0755
    try:
        state = tmp_path / "fresh-state"
        settings = make_settings(tmp_path, ws, stateDir=str(state))
        m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
        anyio.run(m.sync)
        anyio.run(lambda: m.sync(force=True))  # the rebuilt (swapped-in) file too
        db = settings.store_path
        files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}.lock")]
        for f in files:
            if f.exists():
                assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        d = db.parent
        while True:
            assert stat.S_IMODE(d.stat().st_mode) == 0o700, d  # every directory memsift created
            if d == state:
                break
            d = d.parent
        anyio.run(m.aclose)
        # The QMD home (config, cache, index) of the agent.
        env = {
            "PATH": f"{FAKEBIN}:{os.environ['PATH']}",
            "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
            "HOME": os.environ.get("HOME", "/root"),
        }
        qsettings = make_settings(
            tmp_path, ws, stateDir=str(state), memory={"backend": "qmd", "qmd": {"update": {"onBoot": False}}}
        )
        q = QmdSearchManager(qsettings, environ=env)
        anyio.run(q.sync)
        home = state / "agents" / "main" / "qmd"
        for d in [
            state / "agents",
            state / "agents" / "main",
            home,
            *[p for p in home.rglob("*") if p.is_dir() and not p.is_symlink()],
        ]:
            assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
        anyio.run(q.aclose)
    finally:
        os.umask(old)


# Canaries: a key, header values (with an Authorization header of a gateway), each distinct from
# its first 10 characters on, so a leaked prefix is found too.
GATEWAY_TOKEN = "gwtok-Hq3ZpL8vXn2Rk7Ty5Bm9"
HEADER_CANARIES = {"api-key": "hdrkey-Wc4Ns8Jd2Fq6Lp0Vz3", "X-Custom-Token": "hdrtok-Ym7Gb1Kx5Rt9Qe3Ua8"}
CANARIES = [KEY, GATEWAY_TOKEN, *HEADER_CANARIES.values()]


def _canary_leaks(text: str | bytes) -> list[str]:
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    return [c for c in CANARIES for needle in (c, c[:10], c[-10:]) if needle.encode() in data]


@pytest.mark.parametrize("auth", ["apiKey", "Authorization header"])
def test_header_values_and_keys_echoed_late_in_an_error_never_leak(tmp_path, ws, auth):
    """`remote.headers` values are secrets too, and error text is masked before it is cut (a key
    echoed after 290 characters used to leak its first 10)."""
    token = KEY if auth == "apiKey" else GATEWAY_TOKEN
    notes = snapshot(ws)
    with ProviderServer("openai", key=token) as server:
        headers = dict(HEADER_CANARIES)
        remote = {"baseUrl": server.base_url, "headers": headers}
        if auth == "apiKey":
            remote["apiKey"] = KEY
        else:  # a gateway's own token in the header (the openai adapter still wants a key)
            headers["Authorization"] = f"Bearer {GATEWAY_TOKEN}"
            remote["apiKey"] = "placeholder-key-unused"
        cfg = {
            "stateDir": str(tmp_path / "state"),
            "agents": {"defaults": {"memorySearch": {"provider": "openai", "remote": remote}}},
        }
        outputs = [
            _cli(tmp_path, ws, cfg, *args) for args in (["config", "show"], ["index"], ["search", "--json", "coffee"])
        ]
        assert all(p.returncode == 0 for p in outputs), [p.stderr[-1500:] for p in outputs]
        assert (
            server.embedding_requests()[-1].headers["x-custom-token"] == HEADER_CANARIES["X-Custom-Token"]
        )  # really sent
        # A provider that echoes every header it got, and one secret again at character 290 (where
        # error text is cut at 300).
        echo = "headers: " + " ".join(f"{k}={v}" for k, v in [("Authorization", token), *HEADER_CANARIES.items()])
        commands = (
            ["search", "--json", "coffee"],
            ["status", "--json"],
            ["status", "--deep"],
            ["status", "--deep", "--json"],
            ["search", "coffee"],
            ["index", "--force"],
            ["search", "--json", "tea"],
            ["status", "--deep", "--json"],
        )
        for i, args in enumerate(commands):
            late = [token, *HEADER_CANARIES.values()][i % 3]
            body = {"error": {"message": echo.ljust(290, "x") + late}}
            server.faults = [Fault(401, body)] * 8
            (ws / "memory" / f"edit-{len(outputs)}.md").write_text(f"- a new note, number {len(outputs)}\n")
            outputs.append(_cli(tmp_path, ws, cfg, *args))
        shown = json.loads(outputs[0].stdout)["memorySearch"]["remote"]["headers"]
        assert set(shown) == set(headers) and all(v == "**********" for v in shown.values())
        assert any(b"HTTP 401" in p.stdout + p.stderr for p in outputs[3:])  # the errors were shown
        for proc in outputs:
            FIGURES["secret canaries (API key, header values) checked in outputs"] += len(CANARIES)
            leaks = _canary_leaks(proc.stdout) + _canary_leaks(proc.stderr)
            FIGURES["secret canaries leaked"] += len(leaks)
            assert not leaks, (proc.args[-3:], leaks)
    for f in (tmp_path / "state").rglob("*"):
        if f.is_file():
            assert not _canary_leaks(f.read_bytes()), f
    assert_untouched(notes, ws, new_files_allowed=True)  # the test adds notes itself


def test_a_password_in_a_base_url_is_masked_everywhere(tmp_path, ws):
    """`remote.baseUrl: http://user:PASSWORD@host/v1` (embeddings and rerank): config show, status,
    the provider's connection errors and -vv logs never print the password."""
    password = "Pw-9sQz-url-secret"
    url = f"http://bob:{password}@127.0.0.1:9/v1"
    cfg = {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {
        "provider": "openai", "remote": {"baseUrl": url, "apiKey": "k-not-the-point"},
        "query": {"rerank": {"enabled": True, "provider": "endpoint", "remote": {"baseUrl": url}}}}}}}
    runs = [_cli(tmp_path, ws, cfg, *args) for args in (("config", "show"), ("status", "--json"), ("status", "--deep"),
                                                          ("search", "coffee"), ("index",))]
    for run in runs:
        out = run.stdout + run.stderr
        assert password.encode() not in out and b"Traceback" not in out, out[-1500:]
    shown = json.loads(runs[0].stdout)["memorySearch"]
    assert shown["remote"]["baseUrl"] == "http://bob:***@127.0.0.1:9/v1"
    assert shown["query"]["rerank"]["remote"]["baseUrl"] == "http://bob:***@127.0.0.1:9/v1"


@pytest.mark.parametrize("written", ["$MY_TEAM_KEY", "${MY_TEAM_KEY}", {"source": "env", "id": "MY_TEAM_KEY"}])
def test_an_api_key_written_as_a_variable_reads_it_and_an_unset_one_says_which(tmp_path, ws, written):
    """OpenClaw's SecretInput forms for `remote.apiKey`: `$NAME` (before, sent as the key itself: a 401),
    `${NAME}` and `{source: "env", id}` read the variable; unset, the error names it, exit 5."""
    with ProviderServer("openai", key=KEY) as server:
        cfg = {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {
            "provider": "openai", "fallback": "none", "remote": {"baseUrl": server.base_url, "apiKey": written}}}}}
        done = _cli(tmp_path, ws, cfg, "index", env_extra={"MY_TEAM_KEY": KEY})
        assert done.returncode == 0 and not _leaks(done.stdout + done.stderr), done.stderr[-1500:]
        assert server.embedding_requests()
        unset = _cli(tmp_path, ws, cfg, "index", "--force")
        assert unset.returncode == 5, unset.stderr[-1500:]
        assert b"MY_TEAM_KEY" in unset.stderr and b"not set" in unset.stderr and b"Traceback" not in unset.stderr


@pytest.mark.parametrize("flavour", ["gemini", "openai"])
def test_a_key_in_a_base_url_query_authenticates_and_is_masked_everywhere(tmp_path, ws, flavour):
    """`remote.baseUrl: https://host/v1beta?key=KEY` (Google's APIs take the key so; proxies and Azure
    Functions' `?code=` too), no apiKey: every request goes to the base's path with its query, and
    config show, status, search, the cache and -vv logs never print the key."""
    with ProviderServer(flavour, key=KEY if flavour == "gemini" else None) as server:
        url = f"{server.base_url}/?key={KEY}&api-version=2024-02-01"  # a trailing / before the query too
        cfg = {"stateDir": str(tmp_path / "state"), "agents": {"defaults": {"memorySearch": {
            "provider": flavour, "remote": {"baseUrl": url}, "fallback": "none"}}}}
        runs = [_cli(tmp_path, ws, cfg, *args) for args in (("index",), ("search", "--json", "coffee"),
                                                              ("status", "--deep", "--json"), ("config", "show"))]
        for run in runs:
            assert run.returncode == 0 and not _leaks(run.stdout + run.stderr), (run.args[-2:], run.stderr[-1500:])
        asked = server.embedding_requests()
        assert asked and {r.path for r in asked} <= {
            "/v1/embeddings", "/v1beta/models/gemini-embedding-001:embedContent",
            "/v1beta/models/gemini-embedding-001:batchEmbedContents"}, {r.path for r in asked}
        assert all(r.query == {"key": [KEY], "api-version": ["2024-02-01"]} for r in asked)
        assert json.loads(runs[1].stdout)["results"][0]["path"] == "MEMORY.md"
        shown = json.loads(runs[3].stdout)["memorySearch"]["remote"]["baseUrl"]
        assert shown == f"{server.base_url}/?key=***&api-version=2024-02-01"
        assert json.loads(runs[2].stdout)["provider"] == flavour
    for f in (tmp_path / "state").rglob("*"):
        if f.is_file():
            assert not _leaks(f.read_bytes()), f
