"""memsift in a real OpenClaw 2026.9.6 Gateway (CI installs it: .ci/run): the plugin installed as
an operator installs it (copied into the Gateway, never linked: from the npm tarball named by
$MEMSIFT_TEST_OPENCLAW_PLUGIN, as CI's release job does, else by `memsift openclaw install`), loaded
in the memory slot, and memory_search / memory_get answered through the
Gateway's `POST /tools/invoke` and through a real agent turn against a scripted model on loopback.

Three Gateways, each in a HOME of its own, started side by side:
- `exact`: the issue's setup: `openclaw.json` holds only agents.defaults.workspace,
  memory.search.query.maxResults 2 and logging.file; memsift on PATH; nothing else configured;
- `model`: the same, plus a scripted model provider, for an agent turn;
- `no_memsift`: the same as `exact`, with no memsift on PATH.

Skipped, saying why, without OpenClaw 2026.9 on PATH (or at $MEMSIFT_TEST_OPENCLAW). Every Gateway
process started here is stopped (found by its HOME; the Gateway re-spawns itself on a config
change), and `logging.file` keeps its log inside the test's folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import EXAMPLE_WORKSPACE, REPO, extract_tar, free_port, git, previous_release
from openai_fake import FakeModel

PLUGIN = REPO / "contrib" / "openclaw-plugin"
TARBALL = os.environ.get("MEMSIFT_TEST_OPENCLAW_PLUGIN")  # the release's npm tarball
VERSION = json.loads((PLUGIN / "package.json").read_text())["version"]
QUESTION = "why did we pick Postgres for the ledger?"  # README command 1
TOKEN = "memsift-test-token"
EXIT_SPY = Path(__file__).resolve().parents[1] / "fixtures" / "openclaw" / "exit_listeners.cjs"
GROUP_KEY = "agent:main:discord:group:42"


def _openclaw() -> str | None:
    exe = os.environ.get("MEMSIFT_TEST_OPENCLAW") or shutil.which("openclaw")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if "2026.9." in out else None


OPENCLAW = _openclaw()
pytestmark = pytest.mark.skipif(
    OPENCLAW is None,
    reason="OpenClaw 2026.9 is not on PATH (CI installs openclaw@2026.9.6 on "
    "Node 24: .ci/run); set MEMSIFT_TEST_OPENCLAW to its launcher",
)



def _memsift_bin(folder: Path) -> Path:
    """A folder holding `memsift` (this interpreter's), to put on the Gateway's PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "memsift"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m memsift.engine.cli.main \"$@\"\n")
    shim.chmod(0o755)
    return folder


class Home:
    """One OpenClaw HOME: its config, environment and Gateway."""

    def __init__(self, root: Path, *, memsift_on_path: bool) -> None:
        self.root = root
        self.port = free_port()
        path = [
            str(Path(OPENCLAW).parent),
            str(Path(shutil.which("node") or "/usr/bin/node").parent),
            "/usr/bin",
            "/bin",
        ]
        if memsift_on_path:
            path.insert(0, str(_memsift_bin(root / "bin")))
        self.env = {
            "HOME": str(root),
            "PATH": os.pathsep.join(path),
            "LANG": "C.UTF-8",
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(root / ".cache")),  # the session's int8 graph
            "OPENCLAW_GATEWAY_PORT": str(self.port),
            "OPENCLAW_GATEWAY_TOKEN": TOKEN,
        }
        self.config = root / ".openclaw" / "openclaw.json"

    def openclaw(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run(
            [OPENCLAW, *args], capture_output=True, text=True, env=self.env, cwd=self.root, timeout=timeout
        )

    def start(self) -> None:
        self.log = open(self.root / "gateway.out", "w")
        subprocess.Popen(
            [
                OPENCLAW,
                "gateway",
                "run",
                "--allow-unconfigured",
                "--bind",
                "loopback",
                "--port",
                str(self.port),
                "--auth",
                "token",
                "--token",
                TOKEN,
            ],
            # Who adds a listener for the process's exit is recorded (EXIT_SPY), and a warning names its cause.
            env={**self.env, "NODE_OPTIONS": f"--trace-warnings --require {EXIT_SPY}",
                 "MEMSIFT_TEST_EXIT_SPY": str(self.root / "exit-listeners.log")},
            cwd=self.root,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.post(f"http://127.0.0.1:{self.port}/tools/invoke", json={"tool": "memsift_probe"},
                              headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).status_code in (400, 404):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise AssertionError(f"the Gateway did not start: {(self.root / 'gateway.out').read_text()[-3000:]}")

    def invoke(self, tool: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
        answer = httpx.post(f"http://127.0.0.1:{self.port}/tools/invoke", json={"tool": tool, "args": args, **extra},
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300)
        body = answer.json()
        assert answer.status_code == 200 and body.get("ok"), body
        return body["result"]["details"]

    def processes(self) -> list[int]:
        """Every process of this HOME (the Gateway, its workers, memsift)."""
        mine = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if f"HOME={self.root}\0".encode() in (entry / "environ").read_bytes():
                        mine.append(int(entry.name))
                except OSError:
                    pass
        return mine

    def stop(self) -> list[int]:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            for pid in self.processes():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while self.processes() and time.monotonic() < deadline:
                time.sleep(0.2)
        return self.processes()


def _prepare(root: Path) -> Home:
    """The issue's HOME: a copy of the example workspace, three keys, the plugin linked."""
    home = Home(root, memsift_on_path=True)
    shutil.copytree(EXAMPLE_WORKSPACE, root / "ws")
    home.config.parent.mkdir(parents=True)
    home.config.write_text(json.dumps({"agents": {"defaults": {"workspace": str(root / "ws")}},
                                       "memory": {"search": {"query": {"maxResults": 2}}},
                                       "logging": {"file": str(root / "openclaw.log")}}))
    installed = _install_plugin(home, keep_command=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return home


def _plugin_copy(home: Home) -> Path:
    """Where the Gateway runs the plugin from: the tarball's copy in extensions/, else memsift's own."""
    state = home.root / ".openclaw"
    return state / "extensions" / "memsift" if TARBALL else state / "memsift-plugin"


def _install_plugin(home: Home, *, keep_command: bool) -> subprocess.CompletedProcess:
    """The plugin copied into the HOME's Gateway: the release's tarball, else `memsift openclaw install`."""
    if TARBALL:  # OpenClaw 2026.9: memory-core (kept for dreaming) loads first and shadows the slot plugin's tools
        done = home.openclaw("plugins", "install", "--force", "--accept-capabilities", TARBALL)
        return done if done.returncode else home.openclaw("plugins", "disable", "memory-core")
    return _memsift_openclaw(home, "install", *(["--keep-command"] if keep_command else []), "--json")


def _memsift_openclaw(home: Home, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "openclaw", *args, "--openclaw", OPENCLAW],
                          capture_output=True, text=True, env={**home.env, "PATH": os.environ["PATH"]}, timeout=600)


def _sibling(exact: Home, root: Path, *, memsift_on_path: bool) -> Home:
    """Another HOME with the same OpenClaw state (the plugin linked), its own workspace."""
    shutil.copytree(exact.root / ".openclaw", root / ".openclaw")
    shutil.copytree(EXAMPLE_WORKSPACE, root / "ws")
    home = Home(root, memsift_on_path=memsift_on_path)
    config = json.loads(home.config.read_text())
    config["agents"]["defaults"]["workspace"] = str(root / "ws")
    config["logging"]["file"] = str(root / "openclaw.log")
    home.config.write_text(json.dumps(config))
    return home


def _parity(home: Home) -> subprocess.CompletedProcess:
    """`memsift parity --against openclaw` with the HOME's OpenClaw config: memory-core beside memsift."""
    queries = home.root / "queries.txt"
    queries.write_text(f"{QUESTION}\na828e60\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memsift.engine.cli.main",
            "-c",
            str(home.config),
            "parity",
            str(queries),
            "--against",
            "openclaw",
            "--openclaw-command",
            OPENCLAW,
            "-k",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **home.env, "PATH": os.environ["PATH"], "MEMSIFT_STATE_DIR": str(home.root / "state")},
        timeout=600,
    )


@pytest.fixture(scope="module")
def gateways(tmp_path_factory):
    base = tmp_path_factory.mktemp("openclaw")
    exact = _prepare(base / "exact")
    model = FakeModel(QUESTION)
    with_model = _sibling(exact, base / "model", memsift_on_path=True)
    config = json.loads(with_model.config.read_text())
    config["models"] = {"mode": "merge", "providers": {"fake": {
        "baseUrl": f"http://127.0.0.1:{model.port}/v1", "apiKey": "sk-local", "api": "openai-completions",
        "models": [{"id": "fake-1", "name": "Fake", "reasoning": False, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": 32000, "maxTokens": 1024}]}}}
    config["agents"]["defaults"]["model"] = {"primary": "fake/fake-1"}
    with_model.config.write_text(json.dumps(config))
    missing = _sibling(exact, base / "no_memsift", memsift_on_path=False)
    homes = {"exact": exact, "model": with_model, "no_memsift": missing}
    try:
        for home in homes.values():
            home.start()
        # `plugins inspect` is a CLI of its own, which a running Gateway's state lock keeps out: it
        # runs meanwhile on an untouched copy of the HOME (the same config, the same state).
        shutil.copytree(exact.root / ".openclaw", base / "inspect" / ".openclaw")
        inspector = Home(base / "inspect", memsift_on_path=True)
        with ThreadPoolExecutor(4) as pool:
            inspected = pool.submit(inspector.openclaw, "plugins", "inspect", "memsift", "--runtime", "--json")
            parity = pool.submit(_parity, inspector)
            list(pool.map(lambda h: h.wait_ready(), homes.values()))
            inspected, parity = inspected.result(), parity.result()
        yield {**homes, "inspected": inspected, "parity": parity, "fake_model": model}
    finally:
        left = {name: home.stop() for name, home in homes.items()}
        model.close()
        assert not any(left.values()), f"processes left behind: {left}"


def test_the_plugin_loads_in_the_memory_slot_with_no_diagnostics(gateways):
    inspected = gateways["inspected"]
    assert inspected.returncode == 0, inspected.stderr
    report = json.loads(inspected.stdout)
    plugin = report["plugin"]
    assert plugin["status"] == "loaded" and plugin["kind"] == "memory" and plugin["memorySlotSelected"] is True
    assert plugin["activationReason"] == "selected memory slot"
    assert sorted(plugin["toolNames"]) == ["memory_get", "memory_search"] and plugin["cliCommands"] == ["memsift"]
    assert report["diagnostics"] == [] and not plugin.get("diagnostics")
    assert plugin["version"] == VERSION  # the plugin's version is memsift's
    config = json.loads(gateways["exact"].config.read_text())
    assert config["plugins"]["slots"]["memory"] == "memsift"
    assert "config" not in config["plugins"]["entries"]["memsift"]  # nothing configured for memsift
    # A copy in the Gateway's own folder (the tarball's in extensions/), nothing pointing into the checkout.
    copied = _plugin_copy(gateways["exact"])
    assert (copied / "index.js").read_bytes() == (PLUGIN / "index.js").read_bytes() and not (copied / "test").exists()
    assert not [p for p in config["plugins"].get("load", {}).get("paths", []) if str(REPO) in p]


def test_memory_search_through_tools_invoke(gateways):
    found = gateways["exact"].invoke("memory_search", {"query": QUESTION})
    hits = found["results"]
    assert 1 <= len(hits) <= 2  # memory.search.query.maxResults in openclaw.json
    decision = [h for h in hits if "PostgreSQL 16" in h["snippet"]]
    assert decision and decision[0] is hits[0] and hits[0]["path"] == "MEMORY.md", [h["path"] for h in hits]
    assert decision[0]["citation"] == f"MEMORY.md#L{decision[0]['startLine']}-L{decision[0]['endLine']}"
    assert found["debug"]["backend"] == "memsift:builtin" and found["provider"] == "local"
    # ... and memory_get of that citation's file from its first line returns its text.
    got = gateways["exact"].invoke("memory_get", {"path": "MEMORY.md", "from": decision[0]["startLine"]})
    assert got["status"] == "ok" and "PostgreSQL 16" in got["text"] and got["path"] == "MEMORY.md"
    cited = gateways["exact"].invoke("memory_get", {"path": decision[0]["citation"]})
    assert cited["status"] == "ok" and cited["text"].startswith("## Decisions")


def test_a_time_question_through_tools_invoke(gateways):
    # A week named by a day, a month and a year (no clock: the Gateway runs in real time), read as
    # every door reads it: that day's Monday to Sunday, and its notes first (was the day alone).
    found = gateways["exact"].invoke("memory_search", {"query": "what happened the week of the 2nd of November 2026?"})
    assert [w.split(" ", 1)[0] for w in found["timeWindows"]] == ["2026-11-02..2026-11-08"], found["timeWindows"]
    assert {h["path"] for h in found["results"]} == {"memory/2026-11-02.md", "memory/2026-11-05.md"}, found["results"]


def test_a_denied_session_key_gets_no_memory(gateways):
    denied = gateways["exact"].invoke("memory_search", {"query": QUESTION}, sessionKey=GROUP_KEY)
    assert denied["results"] == [] and denied["disabled"] is True and denied["unavailable"] is True
    assert "default deny" in denied["error"] and denied["warning"] and denied["action"]
    read = gateways["exact"].invoke("memory_get", {"path": "MEMORY.md"}, sessionKey=GROUP_KEY)
    assert read["status"] == "error" and read["text"] == "" and read["code"] == "MEMORY_ACCESS_DENIED"


def test_memsift_missing_is_a_clear_tool_answer(gateways):
    down = gateways["no_memsift"].invoke("memory_search", {"query": QUESTION})
    assert down["results"] == [] and down["unavailable"] is True
    assert "memsift was not found" in down["error"] and "PATH" in down["action"]


def test_one_memsift_per_gateway_answers_every_call(gateways):
    exact = gateways["exact"]
    for _ in range(3):
        exact.invoke("memory_search", {"query": "a828e60"})
    children = [pid for pid in exact.processes()
                if b"memsift.engine.cli.main" in Path(f"/proc/{pid}/cmdline").read_bytes()
                and b"\0mcp" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(children) == 1, children


def _memsift_children(home: Home) -> list[int]:
    found = []
    for pid in home.processes():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"memsift.engine.cli.main" in cmdline and b"\0mcp" in cmdline:
            found.append(pid)
    return found


def test_edits_of_memory_search_that_restart_the_gateway_keep_one_memsift_per_agent(gateways):
    """An edit of memory.search restarts the Gateway in its process (once, three `memsift mcp`
    children served one agent, and each registration added an exit listener): after each of three
    edits, a search is answered, one child serves the agent, and the plugin holds one listener."""
    exact = gateways["exact"]
    exact.invoke("memory_search", {"query": "a828e60"})
    original = exact.config.read_text()
    try:
        _edit_three_times(exact)
    finally:  # the module's other tests expect the HOME's own config (maxResults 2)
        exact.config.write_text(original)
        time.sleep(6)
        exact.wait_ready()
    # The plugin adds one exit listener to a Gateway process, however often it registers. (Node's
    # "11 exit listeners added" warning can still come from OpenClaw's own, which come and go: its
    # state leases and SQLite handles; a run under load once reached 11 with memsift's one.)
    added = (exact.root / "exit-listeners.log").read_text().splitlines()
    # The plugin's entry as the stack names it: its copy (memsift-plugin/index.js), or for the tarball's
    # install the Gateway's capture of it (.openclaw/tmp/plugin-captures/…/node_modules/memsift/index.js).
    plugin = re.compile(r"/(memsift-plugin|node_modules/memsift|extensions/memsift)/index\.js:")
    ours: dict[str, int] = {}
    for line in added:
        if plugin.search(line):
            ours[line.split()[0]] = ours.get(line.split()[0], 0) + 1
    assert ours and set(ours.values()) == {1}, (ours, added)


def _edit_three_times(exact: Home) -> None:
    for n in range(3):
        config = json.loads(exact.config.read_text())
        config["memory"]["search"]["query"]["maxResults"] = 3 + n
        exact.config.write_text(json.dumps(config))
        time.sleep(6)  # the Gateway notices the edit and restarts
        exact.wait_ready()
        answer = exact.invoke("memory_search", {"query": "a828e60"})
        assert answer["results"], (n, answer)
        deadline = time.monotonic() + 20  # a child of the Gateway before the restart ends with its stdin
        while len(_memsift_children(exact)) > 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(_memsift_children(exact)) == 1, (n, _memsift_children(exact))


def test_an_agent_turn_reaches_the_model_with_memory(gateways):
    home, model = gateways["model"], gateways["fake_model"]
    turn = home.openclaw("agent", "--agent", "main", "--message", "What database did we pick for the ledger?", "--json",
                         timeout=300)
    assert turn.returncode == 0, turn.stdout[-2000:] + turn.stderr[-2000:]
    assert "## Memory Recall" in model.system_prompt()  # the plugin's prompt section
    results = model.tool_results()
    assert any("PostgreSQL 16" in r and "MEMORY.md" in r for r in results), results[-2:]


def test_the_plugins_cli_namespace(gateways):
    """`openclaw memsift …` runs memsift on the agent's workspace with the Gateway's settings."""
    with ThreadPoolExecutor(2) as pool:  # each OpenClaw CLI call spends seconds starting
        shown = pool.submit(gateways["exact"].openclaw, "memsift", "search", QUESTION, "--json")
        missing = pool.submit(gateways["no_memsift"].openclaw, "memsift", "status")
        shown, missing = shown.result(), missing.result()
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    assert len(answer["results"]) == 2 and any("PostgreSQL 16" in h["snippet"] for h in answer["results"])
    assert answer["maxResults"] == 2  # memory.search.query.maxResults, read from the Gateway's openclaw.json
    assert missing.returncode != 0 and "memsift was not found" in missing.stderr


@pytest.mark.skipif(
    bool(TARBALL),
    reason="memory-core is turned off beside the tarball's install (OpenClaw 2026.9 lets it "
    "shadow memsift's tools otherwise), so there is no memory-core to compare with",
)
def test_parity_with_openclaws_own_memory_search(gateways):
    """What changes before the slot is switched: memory-core and memsift on the same files and questions."""
    run = gateways["parity"]
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["against"] == "openclaw" and report["comparable"] is True, report["warnings"]
    rows = {r["query"]: r for r in report["queries"]}
    for row in rows.values():
        assert row["openclaw"]["hits"] and row["builtin"]["hits"] and not row["openclaw"].get("error")
    assert rows["a828e60"]["overlap"] > 0  # both find the commit's note
    assert any("keywords alone" in n for n in report["notes"])  # memory-core has no embedding key here
    assert "indexing with OpenClaw's memory-core" in run.stderr  # progress, step by step


def test_memsift_openclaw_install_points_the_gateway_at_this_memsift_and_uninstall_undoes_it(tmp_path):
    """A Gateway with no memsift on its PATH (a service's): `memsift openclaw install` copies the plugin,
    selects it and sets its command to this memsift, saying what it changed; `openclaw memsift` then
    answers; `memsift openclaw uninstall` gives the slot back to memory-core."""
    home = Home(tmp_path, memsift_on_path=False)
    shutil.copytree(EXAMPLE_WORKSPACE, tmp_path / "ws")
    home.config.parent.mkdir(parents=True)
    home.config.write_text(json.dumps({"agents": {"defaults": {"workspace": str(tmp_path / "ws")}}}))
    done = _memsift_openclaw(home, "install", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    changes = {c["key"]: c for c in report["changes"]}
    assert report["installed"] == VERSION and report["config"] == str(home.config)
    assert changes["plugins.slots.memory"] == {"key": "plugins.slots.memory", "after": "memsift"}
    assert changes["plugins.entries.memsift.enabled"]["after"] is True
    command = changes["plugins.entries.memsift.config.command"]["after"]
    assert command == report["command"][0] or command == report["command"]
    assert Path(report["command"][0]).is_absolute()
    shown = home.openclaw("memsift", "search", QUESTION, "--json")
    assert shown.returncode == 0, shown.stderr
    assert any("PostgreSQL 16" in h["snippet"] for h in json.loads(shown.stdout)["results"])

    removed = _memsift_openclaw(home, "uninstall", "--json")
    assert removed.returncode == 0, removed.stderr
    gone = {c["key"]: c for c in json.loads(removed.stdout)["changes"]}
    assert gone["plugins.slots.memory"] == {"key": "plugins.slots.memory", "before": "memsift"}
    assert not (tmp_path / ".openclaw" / "memsift-plugin").exists()
    assert json.loads(home.config.read_text())["agents"]["defaults"]["workspace"] == str(
        tmp_path / "ws"
    )  # the rest kept


def test_memsift_openclaw_install_replaces_the_plugin_of_the_release_before(tmp_path):
    """An upgrade from 0.1, whose docs linked the plugin from the clone: `memsift openclaw install`
    replaces that link by its own copy, keeps the plugin's settings, leaves the clone's folder where it
    is, and the Gateway loads this release's plugin in the slot with no diagnostics."""
    found = previous_release()
    if found is None:
        pytest.skip("no earlier release in this clone's git history (a tarball of the tree, or a shallow clone)")
    archive = git("archive", "--format=tar", "-o", str(tmp_path / "old.tar"), found[0], "contrib/openclaw-plugin")
    assert archive.returncode == 0, archive.stderr
    extract_tar(tmp_path / "old.tar", tmp_path / "old")
    old = tmp_path / "old" / "contrib" / "openclaw-plugin"
    home = Home(tmp_path / "home", memsift_on_path=True)
    shutil.copytree(EXAMPLE_WORKSPACE, home.root / "ws")
    home.config.parent.mkdir(parents=True)
    home.config.write_text(json.dumps({"agents": {"defaults": {"workspace": str(home.root / "ws")}},
                                       "plugins": {"entries": {"memsift": {"config": {"callTimeoutMs": 45000}}}}}))
    linked = home.openclaw("plugins", "install", "--link", "--force", "--accept-capabilities", str(old))
    assert linked.returncode == 0, linked.stdout + linked.stderr

    done = _memsift_openclaw(home, "install", "--keep-command")
    assert done.returncode == 0, done.stderr
    assert f"replacing the memsift plugin {found[1]} at {old}" in done.stderr
    assert f'plugins.load.paths: ["{old}"] → ["{home.config.parent / "memsift-plugin"}"]' in done.stdout
    config = json.loads(home.config.read_text())
    assert config["plugins"]["entries"]["memsift"] == {"enabled": True, "config": {"callTimeoutMs": 45000}}
    assert (
        config["plugins"]["slots"]["memory"] == "memsift" and (old / "index.js").is_file()
    )  # the clone's folder stays
    inspected = home.openclaw("plugins", "inspect", "memsift", "--runtime", "--json")
    report = json.loads(inspected.stdout)
    assert report["plugin"]["version"] == VERSION and report["plugin"]["memorySlotSelected"] is True
    assert report["plugin"]["status"] == "loaded" and report["diagnostics"] == []
