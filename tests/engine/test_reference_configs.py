"""Configs written for the reference system load and mean what they mean there (spec 2 and 3.17)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from helpers import QMD_SAMPLES, make_settings
from memsift.backends.qmd import QmdSearchManager
from memsift.backends.qmd.collections import resolve_collections
from memsift.engine.config import MemsiftConfig, load_config, resolve_agent
from memsift.engine.errors import ConfigError

FAKEBIN = Path(__file__).parents[1] / "backends" / "qmd" / "fakebin"


def _resolve(raw: dict, workspace: str | Path = "/tmp", **kw):
    return resolve_agent(MemsiftConfig.model_validate(raw), environ={}, workspace=str(workspace), **kw)


def test_extra_collections_load_and_merge_defaults_then_agent(tmp_path):
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    family = tmp_path / "family" / "sessions"
    family.mkdir(parents=True)
    team = tmp_path / "team"
    team.mkdir()
    raw = {
        "memory": {"qmd": {"paths": [{"path": "notes", "name": "notes"}]}},
        "agents": {
            "defaults": {
                "memorySearch": {"qmd": {"extraCollections": [{"path": str(family), "name": "family-sessions"}]}}
            },
            "list": [
                {
                    "id": "main",
                    "memorySearch": {
                        "qmd": {
                            "extraCollections": [
                                {"path": str(team), "name": "Team Wiki", "pattern": "**/*.md"},
                                {"path": "notes"},  # the same folder as memory.qmd.paths[0]: the first one wins
                                {"path": "notes", "name": "inside"},
                            ]
                        }
                    },
                },
            ],
        },
    }
    s = _resolve(raw, ws, agent_id="main")
    assert [c.path for c in s.memory_search.qmd.extra_collections] == [str(family), str(team), "notes", "notes"]
    cols = [(c.name, c.path, c.pattern, c.kind) for c in resolve_collections(s)]
    assert cols == [
        ("memory-root-main", ws, "MEMORY.md", "memory"),
        ("memory-dir-main", ws / "memory", "**/*.md", "memory"),
        ("notes-main", ws / "notes", "**/*.md", "custom"),
        ("family-sessions", family, "**/*.md", "custom"),  # outside the workspace: the shared name verbatim
        ("team-wiki", team, "**/*.md", "custom"),
    ]


def test_a_wrong_extra_collection_names_its_key(tmp_path):
    cfg = tmp_path / "c.json5"
    cfg.write_text('{agents: {defaults: {memorySearch: {qmd: {extraCollections: [{pth: "x"}]}}}}}')
    with pytest.raises(
        ConfigError, match=r"memorySearch\.qmd\.extraCollections\[0\]\.pth: unknown key \(did you mean 'path'\?\)"
    ):
        load_config(cfg, environ={})


GEMINI2 = {"provider": "gemini", "model": "gemini-embedding-2-preview"}


@pytest.mark.parametrize(
    "multimodal,expect",
    [
        ({"enabled": False, "modalities": ["all"]}, []),
        ({"enabled": True, "modalities": ["all"]}, ["image", "audio"]),
        ({"enabled": True}, ["image", "audio"]),  # no modalities: the reference indexes both
        ({"enabled": True, "modalities": ["audio", "all"]}, ["image", "audio"]),
        ({"enabled": True, "modalities": ["audio"]}, ["audio"]),
    ],
)
def test_multimodal_list_form_and_default_modalities(multimodal, expect):
    s = _resolve({"agents": {"defaults": {"memorySearch": {**GEMINI2, "multimodal": multimodal}}}})
    assert s.memory_search.multimodal.modalities == expect


def test_multimodal_enabled_without_modalities_still_needs_gemini_2():
    with pytest.raises(ConfigError, match="gemini-embedding-2-preview"):
        _resolve({"agents": {"defaults": {"memorySearch": {"multimodal": {"enabled": True}}}}})
    # The list form with nothing enabled loads with any provider.
    assert (
        _resolve(
            {"agents": {"defaults": {"memorySearch": {"multimodal": {"modalities": ["all"]}}}}}
        ).memory_search.multimodal.modalities
        == []
    )


def test_non_positive_qmd_limits_and_timeouts_fall_back_to_the_defaults():
    qmd = {
        "limits": {"maxResults": 0, "maxSnippetChars": -5, "maxInjectedChars": 0, "timeoutMs": -1},
        "update": {"debounceMs": -1, "commandTimeoutMs": 0, "updateTimeoutMs": -3, "embedTimeoutMs": 0},
    }
    q = _resolve({"memory": {"qmd": qmd}}).memory.qmd
    assert (q.limits.max_results, q.limits.max_snippet_chars, q.limits.max_injected_chars, q.limits.timeout_ms) == (
        6,
        700,
        4000,
        4000,
    )
    assert q.update.debounce_ms == 15_000
    assert (q.update.command_timeout_ms, q.update.update_timeout_ms, q.update.embed_timeout_ms) == (
        30_000,
        120_000,
        120_000,
    )
    kept = _resolve(
        {"memory": {"qmd": {"limits": {"maxResults": 3.7, "timeoutMs": 2500.9}, "update": {"debounceMs": 0}}}}
    ).memory.qmd
    assert (kept.limits.max_results, kept.limits.timeout_ms, kept.update.debounce_ms) == (
        3,
        2500,
        0,
    )  # floored; 0 is a valid debounce


def test_session_export_dir_is_relative_to_the_workspace_and_retention_floored(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    s = _resolve(
        {"memory": {"qmd": {"sessions": {"enabled": True, "exportDir": "exports/sessions", "retentionDays": 2.9}}}}, ws
    )
    assert s.memory.qmd.sessions.export_dir == str(ws / "exports" / "sessions")
    assert s.memory.qmd.sessions.retention_days == 2
    m = QmdSearchManager(s, environ={"PATH": "/nonexistent"})
    assert m.export_dir == ws / "exports" / "sessions"
    assert [c.path for c in m.collections if c.kind == "sessions"] == [ws / "exports" / "sessions"]
    for bad in (0, -4, 0.5):
        s = _resolve({"memory": {"qmd": {"sessions": {"retentionDays": bad}}}}, ws)
        assert s.memory.qmd.sessions.retention_days is None  # not > 0 after flooring: no retention limit


@pytest.mark.parametrize(
    "wording",
    [
        "Collection not found: {name}",
        "Collection '{name}' not found",
        'Error: collection "{name}" does not exist',
        "No such collection: {name}",
    ],
)
def test_missing_collection_is_repaired_whatever_the_wording(tmp_path, wording):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    env = {
        "PATH": f"{FAKEBIN}:{os.environ['PATH']}",
        "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
        "FAKE_QMD_MODE": "missing-collection",
        "FAKE_QMD_MISSING_TEXT": wording,
        "FAKE_QMD_LOG": str(tmp_path / "calls.jsonl"),
        "HOME": os.environ.get("HOME", "/root"),
    }
    settings = make_settings(tmp_path, ws, memory={"backend": "qmd", "qmd": {
        "includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}], "update": {"debounceMs": 60_000}}})
    answer = anyio.run(lambda: QmdSearchManager(settings, environ=env).search("aurora"))
    assert len(answer.results) == 3
