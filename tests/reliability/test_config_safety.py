"""Config: every invalid value gets a message naming the key; an invalid config never deletes or
rebuilds an existing index (checked by bytes, inode and mtime of the database files)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from figures import FIGURES
from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.cli.main import EXIT_CODES, cli
from memsift.engine.config.load import load_config
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.errors import ConfigError
from memsift.engine.compose.factory import resolve_config

MS = "agents.defaults.memorySearch"

# (config fragment, the key path the message must name)
INVALID: list[tuple[dict, str]] = [
    ({"agents": {"defaults": {"memorySearch": {"provider": "openia"}}}}, f"{MS}.provider"),
    ({"agents": {"defaults": {"memorySearch": {"provider": 7}}}}, f"{MS}.provider"),
    ({"agents": {"defaults": {"memorySearch": {"fallback": "cohere"}}}}, f"{MS}.fallback"),
    ({"agents": {"defaults": {"memorySearch": {"enabled": "maybe"}}}}, f"{MS}.enabled"),
    ({"agents": {"defaults": {"memorySearch": {"outputDimensionality": 1000}}}}, f"{MS}.outputDimensionality"),
    ({"agents": {"defaults": {"memorySearch": {"sources": ["memory", "email"]}}}}, f"{MS}.sources[1]"),
    ({"agents": {"defaults": {"memorySearch": {"sources": "memory"}}}}, f"{MS}.sources"),
    ({"agents": {"defaults": {"memorySearch": {"extraPaths": "notes"}}}}, f"{MS}.extraPaths"),
    ({"agents": {"defaults": {"memorySearch": {"extraPaths": [1, None]}}}}, f"{MS}.extraPaths[0]"),
    ({"agents": {"defaults": {"memorySearch": {"chunking": {"tokens": "many"}}}}}, f"{MS}.chunking.tokens"),
    ({"agents": {"defaults": {"memorySearch": {"chunking": {"overlap": 1.5}}}}}, f"{MS}.chunking.overlap"),
    ({"agents": {"defaults": {"memorySearch": {"chunking": {"token": 400}}}}}, f"{MS}.chunking.token"),
    ({"agents": {"defaults": {"memorySearch": {"query": {"maxResults": 0}}}}}, f"{MS}.query.maxResults"),
    ({"agents": {"defaults": {"memorySearch": {"query": {"maxResults": -3}}}}}, f"{MS}.query.maxResults"),
    ({"agents": {"defaults": {"memorySearch": {"query": {"minScore": "high"}}}}}, f"{MS}.query.minScore"),
    (
        {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"vectorWeight": [0.7]}}}}}},
        f"{MS}.query.hybrid.vectorWeight",
    ),
    (
        {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"mmr": {"lambda": "x"}}}}}}},
        f"{MS}.query.hybrid.mmr.lambda",
    ),
    (
        {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"temporalDecay": {"halfLife": 3}}}}}}},
        f"{MS}.query.hybrid.temporalDecay.halfLife",
    ),
    (
        {"agents": {"defaults": {"memorySearch": {"store": {"fts": {"tokenizer": "porter"}}}}}},
        f"{MS}.store.fts.tokenizer",
    ),
    (
        {"agents": {"defaults": {"memorySearch": {"store": {"vector": {"enabled": "yes please"}}}}}},
        f"{MS}.store.vector.enabled",
    ),
    ({"agents": {"defaults": {"memorySearch": {"store": {"path": 42}}}}}, f"{MS}.store.path"),
    ({"agents": {"defaults": {"memorySearch": {"sync": {"watchDebounceMs": "soon"}}}}}, f"{MS}.sync.watchDebounceMs"),
    ({"agents": {"defaults": {"memorySearch": {"cache": {"maxEntries": "lots"}}}}}, f"{MS}.cache.maxEntries"),
    (
        {"agents": {"defaults": {"memorySearch": {"multimodal": {"modalities": ["video"]}}}}},
        f"{MS}.multimodal.modalities",
    ),
    ({"agents": {"defaults": {"memorySearch": {"remote": {"headers": {"X": 1}}}}}}, f"{MS}.remote.headers.X"),
    (
        {"agents": {"defaults": {"memorySearch": {"remote": {"batch": {"concurrency": "two"}}}}}},
        f"{MS}.remote.batch.concurrency",
    ),
    ({"agents": {"defaults": {"memorySearch": {"querry": {}}}}}, f"{MS}.querry"),
    ({"agents": {"list": [{"id": "main", "memorySearch": {"provider": "x"}}]}}, "agents.list[0].memorySearch.provider"),
    ({"agents": {"list": "main"}}, "agents.list"),
    ({"memory": {"backend": "sqlite"}}, "memory.backend"),
    ({"memory": {"citations": True}}, "memory.citations"),
    ({"memory": {"qmd": {"searchMode": "hybrid"}}}, "memory.qmd.searchMode"),
    ({"memory": {"qmd": {"paths": [{"name": "x"}]}}}, "memory.qmd.paths[0].path"),
    ({"memory": {"qmd": {"limits": {"maxResults": "six"}}}}, "memory.qmd.limits.maxResults"),
    ({"memory": {"qmd": {"scope": {"default": "block"}}}}, "memory.qmd.scope.default"),
    ({"memory": {"qmd": {"scope": {"rules": [{"action": "permit"}]}}}}, "memory.qmd.scope.rules[0].action"),
    (
        {"memory": {"qmd": {"scope": {"rules": [{"action": "allow", "match": {"chatType": "guild"}}]}}}},
        "memory.qmd.scope.rules[0].match.chatType",
    ),
    (
        {"memory": {"qmd": {"scope": {"rules": [{"action": "allow", "match": {"chanel": "x"}}]}}}},
        "memory.qmd.scope.rules[0].match.chanel",
    ),
    ({"memory": {"qmd": {"fallback": "qmd"}}}, "memory.qmd.fallback"),
    ({"memory": {"bakend": "qmd"}}, "memory.bakend"),
    # A misspelt memorySearch block was ignored (defaults ran); durations were not checked (issue 17).
    ({"agents": {"list": [{"id": "main", "memorySerch": {"provider": "local"}}]}}, "agents.list[0].memorySerch"),
    ({"agents": {"list": [{"id": "ops", "memorySerach": {}}]}}, "agents.list[0].memorySerach"),
    ({"agents": {"defaults": {"memorySerch": {"provider": "local"}}}}, "agents.defaults.memorySerch"),
    ({"agents": {"defaults": {"workspce": "~/agent"}}}, "agents.defaults.workspce"),
    ({"memory": {"qmd": {"update": {"interval": "banana"}}}}, "memory.qmd.update.interval"),
    ({"memory": {"qmd": {"update": {"interval": "1h 30m"}}}}, "memory.qmd.update.interval"),
    ({"memory": {"qmd": {"update": {"interval": -5}}}}, "memory.qmd.update.interval"),
    ({"memory": {"qmd": {"update": {"embedInterval": "often"}}}}, "memory.qmd.update.embedInterval"),
    ({"stateDir": ["a"]}, "stateDir"),
]


@pytest.mark.parametrize("fragment,key", INVALID, ids=[k for _, k in INVALID])
def test_every_invalid_value_names_its_key(tmp_path, fragment, key):
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(json.dumps(fragment))
    with pytest.raises(ConfigError) as err:
        resolve_config(str(cfg), workspace=str(tmp_path), environ={})
    FIGURES["invalid configs tried"] += 1
    assert key in str(err.value), str(err.value)
    kp = err.value.key_path or ""
    assert kp and (kp.startswith(key) or key.startswith(kp)), (kp, key)
    assert "[literal" not in str(err.value) and "function-" not in str(err.value)  # no pydantic internals


def test_unknown_keys_suggest_the_right_one(tmp_path):
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(
        json.dumps({"memory": {"bakend": "qmd"}, "agents": {"defaults": {"memorySearch": {"extraPath": ["x"]}}}})
    )
    with pytest.raises(ConfigError) as err:
        load_config(cfg, environ={})
    assert "did you mean 'backend'" in str(err.value) and "did you mean 'extraPaths'" in str(err.value)


@pytest.mark.parametrize(
    "env,key",
    [
        ({"MEMSIFT__MEMORY__BACKEND": "sqlite"}, "memory.backend"),
        ({"MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__QUERY__MAXRESULTS": "lots"}, "query.maxResults"),
        ({"MEMSIFT__MEMORY__NOPE": "1"}, "memory"),
    ],
)
def test_invalid_environment_values_name_the_key(tmp_path, env, key):
    with pytest.raises(ConfigError) as err:
        load_config(None, environ={**env, "XDG_CONFIG_HOME": str(tmp_path)})
    FIGURES["invalid configs tried"] += 1
    assert key in str(err.value)


def _fingerprint(db: Path) -> dict[str, tuple]:
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        if p.exists():
            st = p.stat()
            out[suffix] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_ino, st.st_mtime_ns)
    return out


BROKEN_FILES = [
    "{ memory: { backend: 'sqlite' } }",
    "{ agents: { defaults: { memorySearch: { chunking: { tokens: 'x' } } } } }",
    "{ not json5 at all",
    "[1, 2, 3]",
    "{ stateDir: 5 }",
]


def test_an_invalid_config_never_touches_the_existing_index(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- dark roast coffee\n")
    settings = make_settings(tmp_path, ws)
    m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    anyio.run(m.sync)
    anyio.run(m.aclose)
    before = _fingerprint(settings.store_path)
    listing = sorted(os.listdir(settings.store_path.parent))
    runner = CliRunner()
    for text in BROKEN_FILES:
        cfg = tmp_path / "cfg.json5"
        cfg.write_text(text)
        for args in (["index"], ["index", "--force"], ["search", "coffee"], ["status", "--deep"], ["get", "MEMORY.md"]):
            res = runner.invoke(cli, ["-c", str(cfg), "-w", str(ws), *args], env={"MEMSIFT_CONFIG": None})
            FIGURES["invalid configs tried"] += 1
            assert res.exit_code == EXIT_CODES["config"], (text, args, res.output)
            assert "cfg.json5" in res.output or "invalid config" in res.output, res.output
            assert _fingerprint(settings.store_path) == before, (text, args)
    assert sorted(os.listdir(settings.store_path.parent)) == listing  # no temp or backup files


@pytest.mark.parametrize("export_dir, refused", [
    ("memory", True), ("memory/sessions", True), (".", True), ("notes", True), ("notes/deep", True),
    ("team/wiki", True), ("exports", False), ("{outside}", False),
])
def test_a_session_export_folder_among_the_memory_files_is_refused(tmp_path, export_dir, refused):
    """QMD's session export writes and deletes files: never in the workspace root, memory/, an extra
    path or a QMD collection (exit 3, the key named), before anything is written."""
    ws = tmp_path / "ws"
    for d in ("memory", "notes", "team/wiki"):
        (ws / d).mkdir(parents=True)
    (ws / "memory" / "2026-01-05.md").write_text("- the user's note\n")
    (tmp_path / "state" / "agents" / "main" / "sessions").mkdir(parents=True)
    (tmp_path / "state" / "agents" / "main" / "sessions" / "2026-01-05.jsonl").write_text(
        '{"type": "message", "message": {"role": "user", "content": "hi"}}\n')
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(
        json.dumps(
            {
                "stateDir": str(tmp_path / "state"),
                "memory": {
                    "backend": "qmd",
                    "qmd": {
                        "command": "qmd-not-here",
                        "paths": [{"path": "team"}],
                        "sessions": {"enabled": True, "exportDir": export_dir.format(outside=tmp_path / "out")},
                    },
                },
                "agents": {"defaults": {"memorySearch": {"extraPaths": ["notes"], "provider": "none"}}},
            }
        )
    )
    res = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "index"],
                         capture_output=True, text=True, timeout=120)
    assert (ws / "memory" / "2026-01-05.md").read_text() == "- the user's note\n"
    if refused:
        assert res.returncode == 3, res.stderr
        assert "memory.qmd.sessions.exportDir" in res.stderr and "Traceback" not in res.stderr
    else:
        assert res.returncode != 3, res.stderr


@pytest.mark.parametrize(
    "text, env, says",
    [
        ("{a:" * 100 + "1" + "}" * 100, {}, "nests 100 levels deep"),  # 210 bytes: a RecursionError traceback
        ("[" * 45 + "]" * 45, {}, "nests 45 levels deep"),
        ("{}", {"MEMSIFT__MEMORY__BACKEND": "[" * 400 + "]" * 400}, "MEMSIFT__MEMORY__BACKEND nests 400 levels deep"),
        ('{\n memory: {backend: "qmd"},\n memory: {backend: "builtin"}\n}\n', {}, 'Duplicate key "memory"'),
        ('{\n memory: {backend: "qmd",\n  }\n  x: \n}\n', {}, "line 4 Unexpected"),
        (
            '// a comment with [[[[ and {{{{\n{ /* ]]]] */ stateDir: "STATE/[[[[" }',
            {},
            None,
        ),  # brackets in strings, comments
    ],
)
def test_deep_repeated_or_broken_json5_is_a_clear_config_error(tmp_path, text, env, says):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(text.replace("STATE", str(tmp_path)))
    run_env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
               "MEMSIFT_STATE_DIR": str(tmp_path / "state"), **env}
    r = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "status"],
                       capture_output=True, text=True, env=run_env, timeout=60)
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr, r.stderr[-1500:]
    if says is None:
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 3 and says in r.stderr, r.stderr
    assert "<string>" not in r.stderr and (str(cfg) in r.stderr or "MEMSIFT__" in r.stderr)
    FIGURES["invalid configs tried"] += 1
