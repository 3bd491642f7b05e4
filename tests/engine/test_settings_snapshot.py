"""Settings snapshots (engine/config/snapshot.py): a cold command uses the settings the last one
resolved while nothing they came from changed, and reads the config again the moment anything did
— a file, an include, a variable, the workspace's place on disk. Secrets never rest in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsift.engine.cli.helper import settings_identity
from memsift.engine.compose.factory import resolve_config
from memsift.engine.config import snapshot

# Resolves through the snapshot in a fresh process and says whether it read the config (pydantic
# is imported only to validate one) and what it resolved.
PROBE = """
import json, sys
from memsift.engine.config.snapshot import resolve_settings
from memsift.engine.cli.helper import settings_identity
s = resolve_settings(sys.argv[1] or None, workspace=sys.argv[2] or None)
print(json.dumps({"read": "pydantic" in sys.modules, "workspace": str(s.workspace), "store": str(s.store_path),
                  "identity": settings_identity(s, None), "notes": list(s.notes),
                  "maxResults": s.memory_search.query.max_results}))
"""


@pytest.fixture
def place(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}
    env.update(MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path))
    for key in [k for k in os.environ if k.startswith("MEMSIFT")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    return tmp_path, ws, env


def _run(env: dict, config: Path | str = "", workspace: Path | str = "", cwd: Path | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(config), str(workspace)], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_the_second_command_uses_what_the_first_resolved_and_gets_the_same_settings(place):
    tmp, ws, env = place
    config = tmp / "cfg.json5"
    config.write_text('{memory: {citations: "on", lancedb: {keep: 2}}, agents: {defaults: {memorySearch: '
                      '{query: {maxResults: 4}, extraPaths: ["notes"]}}}, bogus: 1}', encoding="utf-8")
    first, second = _run(env, config, ws, cwd=tmp), _run(env, config, ws, cwd=tmp)
    assert first["read"] and not second["read"]
    assert second == {**first, "read": False}  # the same settings, identity and notes, to the byte
    assert any("bogus" in n for n in second["notes"])  # what the file said once is said again
    direct = resolve_config(str(config), workspace=str(ws))
    assert settings_identity(direct, None) == second["identity"]
    kept = list((tmp / "state" / "settings").glob("*.json"))
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o777 == 0o600
    assert (tmp / "state" / "settings").stat().st_mode & 0o777 == 0o700


def test_a_change_to_any_source_is_seen_by_the_next_command(place):
    tmp, ws, env = place
    config, part = tmp / "cfg.json5", tmp / "part.json5"
    part.write_text("{maxResults: 3}", encoding="utf-8")
    config.write_text('{agents: {defaults: {memorySearch: {query: {$include: "./part.json5"}, '
                      'model: "${EMBED_MODEL}"}}}}', encoding="utf-8")
    assert _run(env, config, ws, cwd=tmp)["maxResults"] == 3
    assert not _run(env, config, ws, cwd=tmp)["read"]

    part.write_text("{maxResults: 5}", encoding="utf-8")  # an included file
    assert _run(env, config, ws, cwd=tmp)["maxResults"] == 5

    env2 = {**env, "EMBED_MODEL": "m2"}  # a variable the file names
    assert _run(env2, config, ws, cwd=tmp)["read"]
    assert not _run(env2, config, ws, cwd=tmp)["read"]

    env3 = {**env2, "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__QUERY__MAXRESULTS": "9"}  # a new override
    assert _run(env3, config, ws, cwd=tmp)["maxResults"] == 9

    config.write_text("{agents: {defaults: {memorySearch: {query: {maxResults: 2}}}}}", encoding="utf-8")
    assert _run(env2, config, ws, cwd=tmp)["maxResults"] == 2


def test_a_config_file_created_after_the_snapshot_is_read(place):
    tmp, ws, env = place
    assert _run(env, "", ws, cwd=tmp)["maxResults"] == 6
    default = tmp / "xdg" / "memsift" / "config.json5"
    default.parent.mkdir(parents=True)
    default.write_text("{agents: {defaults: {memorySearch: {query: {maxResults: 8}}}}}", encoding="utf-8")
    assert _run(env, "", ws, cwd=tmp)["maxResults"] == 8


def test_the_workspace_is_found_again_before_a_snapshot_is_used(place):
    tmp, ws, env = place
    inner = ws / "notes" / "deep"
    inner.mkdir(parents=True)
    assert _run(env, cwd=inner)["workspace"] == str(ws)  # found upward from the current folder
    (inner / "MEMORY.md").write_text("# Closer\n", encoding="utf-8")
    found = _run(env, cwd=inner)
    assert found["read"] and found["workspace"] == str(inner)  # the nearer workspace, not the kept one

    other = tmp / "ws2"
    (other / "memory").mkdir(parents=True)
    link = tmp / "current"
    link.symlink_to(ws)
    assert _run(env, "", link, cwd=tmp)["workspace"] == str(ws)
    link.unlink()
    link.symlink_to(other)  # a deploy re-points `current`
    assert _run(env, "", link, cwd=tmp)["workspace"] == str(other)


@pytest.mark.parametrize("text", [
    '{agents: {defaults: {memorySearch: {provider: "none", remote: {apiKey: "sk-live-secret-value"}}}}}',
    '{agents: {defaults: {memorySearch: {remote: {headers: {Authorization: "Bearer sk-live-secret-value"}}}}}}',
    '{memory: {postgres: {dsn: "postgresql://u:sk-live-secret-value@db/x"}}}',
])
def test_settings_holding_a_secret_are_never_written(place, text):
    tmp, ws, env = place
    config = tmp / "cfg.json5"
    config.write_text(text, encoding="utf-8")
    assert _run(env, config, ws, cwd=tmp)["read"] and _run(env, config, ws, cwd=tmp)["read"]
    folder = tmp / "state" / "settings"
    assert not folder.exists() or not list(folder.iterdir())


def test_a_damaged_or_foreign_snapshot_is_read_around_and_replaced(place):
    tmp, ws, env = place
    _run(env, "", ws, cwd=tmp)
    (kept,) = (tmp / "state" / "settings").glob("*.json")
    for damage in (b"{not json", b'{"version": 999}', json.dumps({"version": snapshot.SNAPSHOT_VERSION}).encode(),
                   kept.read_bytes().replace(b'"ResolvedConfig"', b'"NoSuchRecord"')):
        kept.write_bytes(damage)
        again = _run(env, "", ws, cwd=tmp)
        assert again["read"] and again["workspace"] == str(ws)
        assert json.loads(kept.read_bytes())["version"] == snapshot.SNAPSHOT_VERSION  # written anew
    assert not _run(env, "", ws, cwd=tmp)["read"]


def test_a_bad_config_is_refused_every_time_and_nothing_is_kept(place):
    tmp, ws, env = place
    config = tmp / "cfg.json5"
    config.write_text("{memory: {backnd: 1}}", encoding="utf-8")
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", PROBE, str(config), str(ws)], env=env, cwd=tmp,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode != 0 and "did you mean 'backend'" in run.stderr
    assert not (tmp / "state" / "settings").exists()
