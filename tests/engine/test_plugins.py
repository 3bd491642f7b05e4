"""Plugins from other packages: a throwaway plugin package (tests/plugins/throwaway) is installed
into a folder of the test's own, as pip installs it (its modules and a dist-info holding its
entry points), and memsift run with that folder on its path finds it: listed with its version,
its config block validated by its own model, served through the doors like a built-in, and its
broken entries reported without breaking anything else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest

from helpers import REPO

PLUGIN_SRC = REPO / "tests" / "plugins" / "throwaway"
GROUP = "agent:main:discord:group:42"


def install_plugin(src: Path, target: Path) -> None:
    """What `pip install --target` leaves for a pure-Python package: its modules, and a dist-info
    with METADATA and entry_points.txt from its pyproject.toml (no build tools, no network)."""
    project = tomllib.loads((src / "pyproject.toml").read_text())["project"]
    for package in (src / "src").iterdir():
        shutil.copytree(package, target / package.name)
    info = target / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = []
    for group, points in project["entry-points"].items():
        lines += [f"[{group}]", *(f"{name} = {value}" for name, value in points.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))
    (info / "INSTALLER").write_text("memsift-tests\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    install_plugin(PLUGIN_SRC, target)
    return target


@pytest.fixture
def ws(tmp_path) -> Path:
    w = tmp_path / "ws"
    (w / "memory" / "projects").mkdir(parents=True)
    (w / "MEMORY.md").write_text("# Memory\n\n- Preferred editor: Helix.\n")
    (w / "memory" / "projects" / "garden.md").write_text(
        "# Garden\n\nPlanted a fig tree by the south wall.\nThe Fig is watered at dawn.\n"
    )
    return w


def _env(site: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "MEMSIFT_NO_RESIDENT": "1",
    }


def _config(tmp_path: Path, ws: Path, memory: dict, memory_search: dict | None = None) -> Path:
    cfg = tmp_path / "config.json5"
    cfg.write_text(
        json.dumps(
            {"memory": memory, "agents": {"defaults": {"workspace": str(ws), "memorySearch": memory_search or {}}}}
        )
    )
    return cfg


def _memsift(site: Path, tmp_path: Path, *args: str, cfg: Path | None = None) -> subprocess.CompletedProcess:
    base = [sys.executable, "-m", "memsift.engine.cli.main", *(["-c", str(cfg)] if cfg else [])]
    return subprocess.run([*base, *args], capture_output=True, text=True, env=_env(site, tmp_path), timeout=300)


def test_plugins_lists_memsifts_own_and_installed_ones_with_versions_and_errors(site, tmp_path):
    r = _memsift(site, tmp_path, "plugins", "--json")
    assert r.returncode == 0, r.stderr
    found = {(p["kind"], p["name"], p["package"]): p for p in json.loads(r.stdout)["plugins"]}
    for kind, names in {"backend": ("builtin", "qmd", "postgres"), "provider": ("local", "openai", "ollama"),
                        "reranker": ("local", "cohere")}.items():
        for name in names:
            assert found[(kind, name, "memsift")]["ok"] and found[(kind, name, "memsift")]["builtin"]
    grep = found[("backend", "notes-grep", "memsift-throwaway")]
    assert grep["ok"] and grep["version"] == "0.0.1" and not grep["builtin"] and "grep" in grep["description"]
    assert found[("provider", "tiny-hash", "memsift-throwaway")]["ok"]
    broken = found[("backend", "broken", "memsift-throwaway")]
    assert (
        not broken["ok"]
        and "ModuleNotFoundError" in broken["error"]
        and "memsift_throwaway_missing_dependency" in broken["error"]
    )
    assert (
        "not a memsift.engine.plugins.BackendPlugin" in found[("backend", "not-a-plugin", "memsift-throwaway")]["error"]
    )
    assert (
        "not a memsift.engine.plugins.RerankerPlugin"
        in found[("reranker", "builtin-shadow", "memsift-throwaway")]["error"]
    )
    shadowed = found[("backend", "builtin", "memsift-throwaway")]  # memsift's own name wins
    assert shadowed["shadowedBy"] == "memsift" and not shadowed["ok"]

    text = _memsift(site, tmp_path, "plugins")
    assert text.returncode == 0 and "notes-grep" in text.stdout and "memsift-throwaway 0.0.1" in text.stdout
    assert "FAILED to load: ModuleNotFoundError" in text.stdout and "Traceback" not in text.stdout + text.stderr
    assert "3 plugin(s) could not be loaded; the others work" in text.stdout


def test_a_plugin_backend_is_served_through_the_doors_under_memsifts_rules(site, tmp_path, ws):
    cfg = _config(tmp_path, ws, {"backend": "notes-grep", "notes-grep": {"caseSensitive": True, "maxHits": 3}})
    r = _memsift(site, tmp_path, "search", "Fig", "--json", cfg=cfg)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["backend"] == "notes-grep" and answer["mode"] == "grep"
    # caseSensitive from the plugin's own block: "Fig" is on line 4 only, not "fig tree" on line 3
    assert [(h["path"], h["startLine"]) for h in answer["results"]] == [("memory/projects/garden.md", 4)]
    got = _memsift(site, tmp_path, "get", answer["results"][0]["citation"], cfg=cfg)
    assert got.returncode == 0 and got.stdout.strip() == "The Fig is watered at dawn."
    # Scope rules live above every backend: a group chat is refused before the plugin runs.
    denied = _memsift(site, tmp_path, "search", "Fig", "--json", "--session-key", GROUP, cfg=cfg)
    assert denied.returncode == 0 and json.loads(denied.stdout)["denied"] and json.loads(denied.stdout)["results"] == []
    status = _memsift(site, tmp_path, "status", "--json", cfg=cfg)
    st = json.loads(status.stdout)
    assert st["backend"] == "notes-grep" and st["files"] == 2
    assert {(p["name"], p["package"]) for p in st["plugins"]} >= {("notes-grep", "memsift-throwaway")}
    # -b picks a backend for one call, plugin or built-in alike.
    builtin = json.loads(_memsift(site, tmp_path, "search", "fig tree", "--json", "-b", "builtin", cfg=cfg).stdout)
    assert builtin["backend"] == "builtin" and builtin["results"][0]["path"] == "memory/projects/garden.md"


def test_a_plugin_backend_answers_over_mcp_and_the_python_api(site, tmp_path, ws):
    mcp = pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK (a default dependency)")
    cfg = _config(tmp_path, ws, {"backend": "notes-grep"})
    env = _env(site, tmp_path)

    async def over_mcp() -> dict:
        params = mcp.StdioServerParameters(
            command=sys.executable, args=["-m", "memsift.engine.cli.main", "-c", str(cfg), "mcp"], env=env
        )
        async with mcp.Client(params) as client:
            found = await client.call_tool("memory_search", {"query": "fig"})
            return found.structured_content

    payload = anyio.run(over_mcp)
    assert payload["backend"] == "notes-grep" and payload["results"][0]["path"] == "memory/projects/garden.md"
    api = ("import anyio, sys\nfrom memsift.engine.compose.factory import open_manager\n"
           f"m = open_manager(config_path={str(cfg)!r})\n"
           "a = anyio.run(lambda: m.search('helix'))\nprint(a.backend, a.results[0].path)\n")
    r = subprocess.run([sys.executable, "-c", api], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["notes-grep", "MEMORY.md"]


def test_a_plugins_settings_are_checked_by_its_own_model_with_the_files_errors(site, tmp_path, ws):
    cfg = _config(tmp_path, ws, {"backend": "notes-grep", "notes-grep": {"caseSensitiv": True}})
    r = _memsift(site, tmp_path, "search", "fig", cfg=cfg)
    assert r.returncode == 3, r.stderr
    assert "memory.notes-grep.caseSensitiv: unknown key (did you mean 'caseSensitive'?)" in r.stderr
    cfg = _config(tmp_path, ws, {"backend": "notes-grep", "notes-grep": {"maxHits": 0}})
    r = _memsift(site, tmp_path, "search", "fig", cfg=cfg)
    assert r.returncode == 3 and "memory.notes-grep.maxHits: Input should be greater than or equal to 1" in r.stderr
    cfg = _config(tmp_path, ws, {"backend": "notes-grp"})
    r = _memsift(site, tmp_path, "search", "fig", cfg=cfg)
    assert r.returncode == 3 and "unknown backend 'notes-grp' (did you mean 'notes-grep'?)" in r.stderr
    assert "notes-grep" in r.stderr.split("installed:")[1] and "Traceback" not in r.stderr
    # A near miss of memsift's own key under `memory` is still a typo, not a plugin's block.
    cfg = _config(tmp_path, ws, {"citatons": "on"})
    r = _memsift(site, tmp_path, "search", "fig", cfg=cfg)
    assert r.returncode == 3 and "memory.citatons: unknown key (did you mean 'citations'?)" in r.stderr


def test_a_broken_plugin_never_breaks_the_builtins_and_says_what_failed(site, tmp_path, ws):
    r = _memsift(site, tmp_path, "search", "fig tree", "--json", cfg=_config(tmp_path, ws, {}))
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["path"] == "memory/projects/garden.md"
    r = _memsift(site, tmp_path, "search", "fig", cfg=_config(tmp_path, ws, {"backend": "broken"}))
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert ("the backend 'broken' (package memsift-throwaway 0.0.1) failed to load: ModuleNotFoundError" in r.stderr
            and "reinstall or remove that package" in r.stderr)


def test_a_plugin_for_an_older_protocol_is_told_before_any_search(site, tmp_path, ws):
    """A plugin whose manager answers only `search(query, ...)` (before searches came down as one
    request): a config error naming the package and the call it lacks, no traceback, on search and
    status alike; the other backends are untouched."""
    cfg = _config(tmp_path, ws, {"backend": "older-grep"})
    for args in (("search", "fig"), ("status",)):
        r = _memsift(site, tmp_path, *args, cfg=cfg)
        assert r.returncode == 3 and "Traceback" not in r.stderr, (args, r.stderr)
        assert (
            "the older-grep backend (memsift-throwaway 0.0.1) is no SearchManager for this memsift: it has no answer()"
            in r.stderr
            and "update that package" in r.stderr
        ), r.stderr
    assert (
        _memsift(site, tmp_path, "search", "fig", cfg=_config(tmp_path, ws, {"backend": "notes-grep"})).returncode == 0
    )


def test_a_crashing_plugin_is_told_in_one_line_naming_its_package(site, tmp_path, ws):
    cfg = _config(tmp_path, ws, {"backend": "notes-grep", "notes-grep": {"crashOn": "boom"}})
    r = _memsift(site, tmp_path, "search", "boom", cfg=cfg)
    assert r.returncode == 7 and "Traceback" not in r.stderr
    assert ("the notes-grep backend (memsift-throwaway 0.0.1) failed while searching: KeyError: 'a bug in the plugin'"
            in r.stderr)
    assert _memsift(site, tmp_path, "search", "fig", cfg=cfg).returncode == 0  # the next search is answered


def test_a_plugins_value_error_is_the_plugin_failing_and_a_bad_date_is_still_the_users(site, tmp_path, ws):
    cfg = _config(tmp_path, ws, {"backend": "notes-grep", "notes-grep": {"valueErrorOn": "lost table"}})
    r = _memsift(site, tmp_path, "search", "lost table", cfg=cfg)
    assert r.returncode == 7 and "Traceback" not in r.stderr
    assert (
        "the notes-grep backend (memsift-throwaway 0.0.1) failed while searching: ValueError: Table 'files_g7'"
        in r.stderr
    )
    r = _memsift(site, tmp_path, "search", "fig", "--since", "the day after never", cfg=cfg)
    assert r.returncode == 2 and "is not a date" in r.stderr and "notes-grep" not in r.stderr, r.stderr


def test_a_provider_plugin_embeds_for_the_builtin_backend(site, tmp_path, ws):
    cfg = _config(tmp_path, ws, {}, {"provider": "tiny-hash"})
    r = _memsift(site, tmp_path, "search", "fig tree", "--json", cfg=cfg)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["provider"] == "tiny-hash" and answer["model"] == "tiny-hash-32" and answer["mode"] == "hybrid"
    assert answer["results"][0]["path"] == "memory/projects/garden.md"
    r = _memsift(site, tmp_path, "search", "fig", cfg=_config(tmp_path, ws, {}, {"provider": "tiny-hsh"}))
    assert r.returncode == 3 and "unknown provider 'tiny-hsh' (did you mean 'tiny-hash'?)" in r.stderr
    # Its own settings, under memorySearch.<name>, checked by its model.
    cfg = _config(tmp_path, ws, {}, {"provider": "tiny-hash", "tiny-hash": {"dims": 16}})
    assert (
        json.loads(_memsift(site, tmp_path, "search", "fig tree", "--json", cfg=cfg).stdout)["model"] == "tiny-hash-16"
    )
    r = _memsift(
        site,
        tmp_path,
        "search",
        "fig",
        cfg=_config(tmp_path, ws, {}, {"provider": "tiny-hash", "tiny-hash": {"dimz": 8}}),
    )
    assert r.returncode == 3 and "memorySearch.tiny-hash.dimz: unknown key (did you mean 'dims'?)" in r.stderr, r.stderr


def test_a_plugins_read_is_judged_by_memsifts_rules_above_it_on_every_door(site, tmp_path, ws):
    """A plugin whose read opens whatever it is given serves nothing outside memory: the path is
    judged before it runs, and a read answered with another file than the one asked for is refused."""
    (ws / "notes").mkdir()
    (ws / "notes" / "private.md").write_text("- not memory\n")
    (tmp_path / "diary.md").write_text("- a diary outside the workspace\n")
    cfg = _config(tmp_path, ws, {"backend": "notes-grep", "notes-grep": {"naiveRead": True}})
    assert (
        _memsift(site, tmp_path, "get", "MEMORY.md", cfg=cfg).stdout.strip() == "# Memory\n\n- Preferred editor: Helix."
    )
    for path in ("/etc/hostname", "notes/private.md", str(tmp_path / "diary.md"), "../diary.md"):
        r = _memsift(site, tmp_path, "get", path, cfg=cfg)
        assert r.returncode != 0 and r.stdout == "" and "not" in r.stderr.lower(), (path, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "diary outside" not in r.stderr + r.stdout
    mcp = pytest.importorskip("mcp", reason="the MCP door needs the MCP SDK (a default dependency)")

    async def over_mcp(config: Path, path: str) -> tuple[bool, str]:
        params = mcp.StdioServerParameters(
            command=sys.executable,
            args=["-m", "memsift.engine.cli.main", "-c", str(config), "mcp"],
            env=_env(site, tmp_path),
        )
        async with mcp.Client(params) as client:
            got = await client.call_tool("memory_get", {"path": path})
            payload = got.structured_content or {}
            return bool(got.is_error or payload.get("disabled") or payload.get("error")), json.dumps(payload)

    failed, shown = anyio.run(over_mcp, cfg, "notes/private.md")
    assert failed and "not memory" not in shown and "not a memory file" in shown, shown
    # A plugin that answers with another file than the one asked for: refused, its text not shown.
    liar = _config(tmp_path, ws, {"backend": "notes-grep", "notes-grep": {"readInstead": "notes/private.md"}})
    r = _memsift(site, tmp_path, "get", "MEMORY.md", cfg=liar)
    assert r.returncode == 7 and "not memory" not in r.stdout + r.stderr and "refused" in r.stderr, r.stderr
    failed, shown = anyio.run(over_mcp, liar, "MEMORY.md")
    assert failed and "not memory" not in shown and "refused" in shown, shown


def test_a_plugin_that_exits_hangs_or_prints_at_import_never_stops_status_or_plugins(tmp_path, ws):
    site = tmp_path / "unruly-site"
    install_plugin(REPO / "tests" / "plugins" / "unruly", site)
    env = {**_env(site, tmp_path), "MEMSIFT_PLUGIN_IMPORT_TIMEOUT": "2", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws)]
    listed = subprocess.run([*base, "plugins", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    found = {p["name"]: p for p in json.loads(listed.stdout)["plugins"] if p["package"] == "memsift-unruly"}
    assert not found["exits"]["ok"] and "SystemExit: 3" in found["exits"]["error"]
    assert not found["hangs"]["ok"] and "did not finish within 2 s" in found["hangs"]["error"]
    assert "remembered" not in found["hangs"]["error"]
    # The hang is remembered for this version: the next call does not wait its bound again (it cost
    # 10 s on every `status` and `plugins`), a longer bound tries it again.
    again = subprocess.run([*base, "plugins", "--json"], capture_output=True, text=True, env=env, timeout=120)
    hangs = next(p for p in json.loads(again.stdout)["plugins"] if p["name"] == "hangs")
    assert not hangs["ok"] and "did not finish within 2 s" in hangs["error"] and "remembered from" in hangs["error"]
    longer = subprocess.run([*base, "plugins", "--json"], capture_output=True, text=True, timeout=120,
                            env={**env, "MEMSIFT_PLUGIN_IMPORT_TIMEOUT": "2.5"})
    hangs = next(p for p in json.loads(longer.stdout)["plugins"] if p["name"] == "hangs")
    assert "within 2.5 s" in hangs["error"] and "remembered" not in hangs["error"]
    assert found["noisy"]["ok"] and "noisy plugin says hello" in listed.stderr  # stdout stays JSON
    status = subprocess.run([*base, "status", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["backend"] == "builtin" and "Traceback" not in status.stderr
    text = subprocess.run([*base, "plugins"], capture_output=True, text=True, env=env, timeout=120)
    assert text.returncode == 0 and "FAILED to load: SystemExit: 3" in text.stdout and "Traceback" not in text.stderr


def test_memsifts_own_entry_points_read_directly_are_importlib_metadatas():
    """A cold command reads memsift's own `entry_points.txt` itself (importlib.metadata imports the
    email package); what it reads must be what importlib.metadata reads, and load the same objects."""
    from importlib import metadata

    from memsift.engine.plugins import registry

    own = registry._own()
    assert type(own).__name__ == "_OwnDistribution"  # the direct reader, in an installed memsift
    theirs = metadata.distribution("memsift")
    assert registry.own_version() == theirs.version
    read = sorted((p.group, p.name, p.value) for p in own.entry_points)
    assert read == sorted((p.group, p.name, p.value) for p in theirs.entry_points)
    for point in theirs.entry_points:
        if point.group.startswith("memsift."):
            assert registry._load_target(point.value) is point.load()
