from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsift.engine.config import MemsiftConfig, load_config, resolve_agent
from memsift.engine.errors import ConfigError


def _resolve(raw: dict, **kw):
    return resolve_agent(MemsiftConfig.model_validate(raw), environ={}, workspace="/tmp", **kw)


def test_defaults_match_the_reference():
    s = _resolve({})
    ms = s.memory_search
    assert ms.enabled is True and ms.provider == "auto" and ms.fallback == "none"
    assert ms.sources == ["memory"]
    # memsift's one changed default: a chunk is what a hit shows (docs/concepts/search.md).
    assert (ms.chunking.strategy, ms.chunking.tokens, ms.chunking.overlap) == ("evidence", 175, 0)
    assert (ms.query.max_results, ms.query.min_score) == (6, 0.35)
    h = ms.query.hybrid
    assert h.enabled and (h.vector_weight, h.text_weight) == pytest.approx((0.7, 0.3))
    assert h.candidate_multiplier == 4
    assert (h.mmr.enabled, h.mmr.lambda_) == (False, 0.7)
    assert (h.temporal_decay.enabled, h.temporal_decay.half_life_days) == (False, 30)
    assert ms.cache.enabled is True and ms.cache.max_entries is None
    assert ms.store.fts.tokenizer == "unicode61" and ms.store.vector.enabled
    assert ms.sync.watch_debounce_ms == 1500
    assert s.memory.backend == "builtin" and s.memory.citations == "auto"
    assert s.memory.qmd.limits.max_results == 6 and s.memory.qmd.search_mode == "search"
    assert s.agent_id == "main" and s.store_path.name.startswith("main-") and s.store_path.suffix == ".sqlite"


@pytest.mark.parametrize(
    "query,expect",
    [
        ({"hybrid": {"vectorWeight": 2, "textWeight": 2}}, (0.5, 0.5)),
        ({"hybrid": {"vectorWeight": 0, "textWeight": 0}}, (0.7, 0.3)),
        ({"hybrid": {"vectorWeight": -1, "textWeight": 0.5}}, (0.0, 1.0)),
        ({"hybrid": {"vectorWeight": 0.6, "textWeight": 0.2}}, (0.75, 0.25)),
    ],
)
def test_weights_are_clamped_and_normalised(query, expect):
    h = _resolve({"agents": {"defaults": {"memorySearch": {"query": query}}}}).memory_search.query.hybrid
    assert (h.vector_weight, h.text_weight) == pytest.approx(expect)


def test_clamping_of_numbers():
    ms = _resolve(
        {
            "agents": {
                "defaults": {
                    "memorySearch": {
                        "chunking": {"tokens": 400, "overlap": 500},
                        "query": {
                            "minScore": 2,
                            "hybrid": {
                                "candidateMultiplier": 50,
                                "mmr": {"lambda": 3},
                                "temporalDecay": {"halfLifeDays": 0.2},
                            },
                        },
                        "cache": {"maxEntries": 0.5},
                        "sources": ["memory", "sessions"],
                    }
                }
            }
        }
    ).memory_search
    assert (ms.chunking.strategy, ms.chunking.overlap) == ("reference", 399)  # explicit sizes: the reference's chunker
    assert ms.query.min_score == 1.0
    assert ms.query.hybrid.candidate_multiplier == 20
    assert ms.query.hybrid.mmr.lambda_ == 1.0
    assert ms.query.hybrid.temporal_decay.half_life_days == 1
    assert ms.cache.max_entries == 1
    assert ms.sources == ["memory"]  # sessions needs experimental.sessionMemory
    low = _resolve(
        {
            "agents": {
                "defaults": {
                    "memorySearch": {"chunking": {"tokens": -5}, "query": {"hybrid": {"candidateMultiplier": 0.2}}}
                }
            }
        }
    )
    assert low.memory_search.chunking.tokens == 1 and low.memory_search.chunking.overlap == 0
    assert low.memory_search.query.hybrid.candidate_multiplier == 1


def test_agent_values_win_and_extra_paths_concatenate():
    raw = {
        "agents": {
            "defaults": {
                "memorySearch": {"extraPaths": ["notes", " docs ", ""], "query": {"maxResults": 3, "minScore": 0.2}}
            },
            "list": [
                {
                    "id": "ops",
                    "model": "ignored-reference-key",
                    "memorySearch": {"extraPaths": ["runbooks", "notes"], "query": {"maxResults": 9}},
                },
                {"id": "other", "default": True},
            ],
        }
    }
    ops = _resolve(raw, agent_id="ops").memory_search
    assert ops.extra_paths == ["notes", "docs", "runbooks"]
    assert ops.query.max_results == 9 and ops.query.min_score == 0.2
    assert _resolve(raw).agent_id == "other"  # the default agent


def test_default_index_is_one_per_agent_and_workspace(tmp_path):
    for name in ("a", "b", "x"):
        (tmp_path / name).mkdir()
    a = resolve_agent(MemsiftConfig(), environ={}, workspace=str(tmp_path / "a"))
    a_again = resolve_agent(MemsiftConfig(), environ={}, workspace=str(tmp_path / "x" / ".." / "a"))
    b = resolve_agent(MemsiftConfig(), environ={}, workspace=str(tmp_path / "b"))
    other_agent = resolve_agent(MemsiftConfig(), environ={}, workspace=str(tmp_path / "a"), agent_id="ops")
    assert a.store_path == a_again.store_path  # the resolved folder names the index
    assert len({a.store_path, b.store_path, other_agent.store_path}) == 3
    assert a.store_path.parent == b.store_path.parent == other_agent.store_path.parent


def test_store_path_substitutes_agent_id(tmp_path):
    s = _resolve(
        {"agents": {"defaults": {"memorySearch": {"store": {"path": str(tmp_path / "{agentId}.db")}}}}}, agent_id="x"
    )
    assert s.store_path == tmp_path / "x.db"


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.json5"
    p.write_text(text)
    return p


def test_unknown_key_names_the_path_and_suggests(tmp_path):
    p = _write(tmp_path, "{agents: {defaults: {memorySearch: {query: {maxResult: 3}}}}}")
    with pytest.raises(ConfigError) as err:
        load_config(p, environ={})
    msg = str(err.value)
    assert "agents.defaults.memorySearch.query.maxResult" in msg
    assert "did you mean 'maxResults'" in msg
    assert err.value.key_path == "agents.defaults.memorySearch.query.maxResult"


def test_wrong_value_names_the_path_and_what_is_allowed(tmp_path):
    p = _write(tmp_path, "{agents: {list: [{id: 'a', memorySearch: {provider: 'opneai'}}]}}")
    with pytest.raises(ConfigError) as err:
        load_config(p, environ={})
    assert "agents.list[0].memorySearch.provider" in str(err.value)
    assert "'openai'" in str(err.value) and "'opneai'" in str(err.value)
    p = _write(tmp_path, "{memory: {backend: 'qmd', citations: 'sometimes'}}")
    with pytest.raises(ConfigError, match=r"memory\.citations"):
        load_config(p, environ={})
    p = _write(tmp_path, "{agents: {defaults: {memorySearch: {chunking: {tokens: 'many'}}}}}")
    with pytest.raises(ConfigError, match=r"chunking\.tokens.*valid integer"):
        load_config(p, environ={})


def test_json5_file_with_comments_and_foreign_sections(tmp_path):
    p = _write(
        tmp_path,
        """{
          // a reference config carries other sections; memsift ignores them
          channels: {telegram: {enabled: true}},
          gateway: {port: 18789},
          memory: {citations: 'off',},
          agents: {defaults: {memorySearch: {query: {maxResults: 4}}}},
        }""",
    )
    cfg, path = load_config(p, environ={})
    assert path == p and cfg.memory.citations == "off"
    assert cfg.agents.defaults.memory_search.query.max_results == 4


def test_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="not valid JSON5"):
        load_config(_write(tmp_path, "{agents: "), environ={})
    with pytest.raises(ConfigError, match="must hold an object"):
        load_config(_write(tmp_path, "[1, 2]"), environ={})
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.json5", environ={})
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(_write(tmp_path, "{memroy: {}}"), environ={})
    # As Windows editors save it: UTF-8 with a byte-order mark and CRLF loads; UTF-16 says what to do.
    bom = tmp_path / "bom.json5"
    bom.write_bytes("\ufeff{\r\n  // maxResults\r\n  memorySearch: {query: {maxResults: 2}},\r\n}\r\n".encode())
    assert load_config(bom, environ={})[0].memory_search.query.max_results == 2
    utf16 = tmp_path / "utf16.json5"
    utf16.write_bytes("{memorySearch: {}}".encode("utf-16"))
    with pytest.raises(ConfigError, match=r"is not UTF-8 \(byte 0 is 0xff\); save it as UTF-8"):
        load_config(utf16, environ={})
    # The default location may be absent: that is an empty config, not an error.
    cfg, path = load_config(environ={"XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert path is None and cfg.memory.backend == "builtin"
    # ... and so may a home that is no folder (HOME=/dev/null, as some service managers set it).
    not_a_folder = tmp_path / "devnull"
    not_a_folder.write_text("")
    cfg, path = load_config(environ={"HOME": str(not_a_folder), "XDG_CONFIG_HOME": str(not_a_folder / ".config")})
    assert path is None and cfg.memory.backend == "builtin"


def test_environment_overrides_the_file(tmp_path):
    p = _write(tmp_path, "{memory: {backend: 'builtin'}, agents: {defaults: {memorySearch: {query: {maxResults: 4}}}}}")
    env = {
        "MEMSIFT__MEMORY__BACKEND": "qmd",
        "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__QUERY__MAXRESULTS": "9",
        "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__EXTRA_PATHS": '["a", "b"]',
    }
    cfg, _ = load_config(p, environ=env)
    assert cfg.memory.backend == "qmd"
    assert cfg.agents.defaults.memory_search.query.max_results == 9
    assert cfg.agents.defaults.memory_search.extra_paths == ["a", "b"]
    with pytest.raises(ConfigError, match="MEMSIFT__MEMORY__BAKEND"):
        load_config(p, environ={"MEMSIFT__MEMORY__BAKEND": "qmd"})
    with pytest.raises(ConfigError, match=r"memory\.backend"):
        load_config(p, environ={"MEMSIFT__MEMORY__BACKEND": "elastic"})


def test_multimodal_needs_gemini_embedding_2():
    with pytest.raises(ConfigError, match="gemini-embedding-2-preview"):
        _resolve({"agents": {"defaults": {"memorySearch": {"multimodal": {"enabled": True, "modalities": "all"}}}}})
    with pytest.raises(ConfigError, match="fallback"):
        _resolve(
            {
                "agents": {
                    "defaults": {
                        "memorySearch": {
                            "provider": "gemini",
                            "model": "models/gemini-embedding-2-preview",
                            "fallback": "openai",
                            "multimodal": {"enabled": True, "modalities": ["image"]},
                        }
                    }
                }
            }
        )
    ok = _resolve(
        {
            "agents": {
                "defaults": {
                    "memorySearch": {
                        "provider": "gemini",
                        "model": "gemini-embedding-2-preview",
                        "multimodal": {"enabled": True, "modalities": "all"},
                    }
                }
            }
        }
    )
    assert ok.memory_search.multimodal.modalities == ["image", "audio"]


def test_secrets_are_masked_when_dumped():
    s = _resolve({"agents": {"defaults": {"memorySearch": {"remote": {"apiKey": "sk-secret-123"}}}}})
    dumped = s.memory_search.model_dump_json(by_alias=True)
    assert "sk-secret-123" not in dumped


@pytest.mark.parametrize(
    "chunking,expect",
    [
        ({}, ("evidence", 175, 0)),
        ({"tokens": 400, "overlap": 80}, ("reference", 400, 80)),  # a carried-over config means the same
        ({"tokens": 300}, ("reference", 300, 80)),
        ({"overlap": 0}, ("reference", 400, 0)),
        ({"strategy": "reference"}, ("reference", 400, 80)),
        ({"strategy": "evidence", "tokens": 250}, ("evidence", 250, 0)),
    ],
)
def test_chunking_strategy_and_sizes(chunking, expect):
    c = _resolve({"agents": {"defaults": {"memorySearch": {"chunking": chunking}}}}).memory_search.chunking
    assert (c.strategy, c.tokens, c.overlap) == expect


def test_overlap_with_the_evidence_chunker_is_refused_with_the_way_out():
    with pytest.raises(ConfigError, match='chunking.overlap.*strategy: "reference"'):
        _resolve({"agents": {"defaults": {"memorySearch": {"chunking": {"strategy": "evidence", "overlap": 40}}}}})


def test_a_misspelt_memory_search_block_is_an_error_with_a_suggestion(tmp_path):
    # Issue 17: `memorySerch` in agents.list[] was silently ignored and the defaults ran.
    for text, where in (
        ("{agents: {list: [{id: 'main', memorySerch: {provider: 'local'}}]}}", "agents.list[0].memorySerch"),
        ("{agents: {defaults: {memorySerach: {}}}}", "agents.defaults.memorySerach"),
    ):
        with pytest.raises(ConfigError) as err:
            load_config(_write(tmp_path, text), environ={})
        assert where in str(err.value) and "did you mean 'memorySearch'" in str(err.value), str(err.value)
    # The reference's other agent keys still load (memsift ignores them).
    load_config(
        _write(
            tmp_path,
            "{agents: {defaults: {model: 'x', heartbeat: {every: '30m'}, compaction: {}},"
            " list: [{id: 'a', name: 'A', agentDir: '~/a', tools: {}, identity: {}}]}}",
        ),
        environ={},
    )


@pytest.mark.parametrize(
    "value,ms", [("5m", 300_000), ("1h30m", 5_400_000), ("0s", 0), (10, 600_000), ("250ms", 250), ("2d", 172_800_000)]
)
def test_durations_in_the_reference_forms_load(tmp_path, value, ms):
    from memsift.engine.durations import parse_duration_ms

    config, _ = load_config(
        _write(tmp_path, json.dumps({"memory": {"qmd": {"update": {"interval": value}}}})), environ={}
    )
    assert parse_duration_ms(config.memory.qmd.update.interval, default_ms=1) == ms


def test_an_unparseable_duration_names_the_key_and_the_forms(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "{memory: {qmd: {update: {interval: 'banana'}}}}"), environ={})
    msg = str(err.value)
    assert "memory.qmd.update.interval" in msg and "'banana'" in msg and "1h30m" in msg, msg


def test_any_agent_id_gets_the_defaults_and_ids_match_case_insensitively():
    # Issue 17 (as the reference): defaults apply to any agent id; an id missing from agents.list
    # uses the defaults; ids match case-insensitively; a list of one agent does not make -a main fail.
    raw = {"agents": {"defaults": {"memorySearch": {"extraPaths": ["notes"]}},
                      "list": [{"id": "Ops", "memorySearch": {"extraPaths": ["runbooks"]}}]}}
    main = _resolve(raw, agent_id="main")
    assert main.agent_id == "main" and main.memory_search.extra_paths == ["notes"]
    nope = _resolve(raw, agent_id="nope")
    assert nope.agent_id == "nope" and nope.memory_search.extra_paths == ["notes"]
    for given in ("ops", "OPS", "Ops"):
        ops = _resolve(raw, agent_id=given)
        assert ops.agent_id == "ops" and ops.memory_search.extra_paths == ["notes", "runbooks"]
    assert _resolve(raw, agent_id="MAIN").store_path == main.store_path  # one agent, one index
    for bad in ("../x", "a/b", "", " "):
        if bad.strip():
            with pytest.raises(ConfigError, match="agent id"):
                _resolve(raw, agent_id=bad)


def test_the_documented_config_example_keeps_main_as_the_default_agent(tmp_path):
    page = (Path(__file__).parents[2] / "docs" / "operators" / "configuration.md").read_text(encoding="utf-8")
    block = page.split("## Where the config comes from", 1)[1].split("```json5", 1)[1].split("```", 1)[0]
    (tmp_path / "ws").mkdir()
    config, _ = load_config(_write(tmp_path, block.replace("~/agent-workspace", str(tmp_path / "ws"))), environ={})
    default = resolve_agent(config, environ={})
    assert default.agent_id == "main"
    assert resolve_agent(config, environ={}, agent_id="ops").memory_search.extra_paths[-1] == "runbooks"


def test_the_default_index_name_follows_the_files_covered(tmp_path):
    import hashlib

    (tmp_path / "ws").mkdir()
    plain = resolve_agent(MemsiftConfig(), environ={}, workspace=str(tmp_path / "ws"))
    # Without coverage settings the name is the workspace's alone, as before (existing indexes keep theirs).
    assert plain.store_path.name == f"main-{hashlib.sha256(str(tmp_path / 'ws').encode()).hexdigest()[:8]}.sqlite"
    extra = {"agents": {"defaults": {"memorySearch": {"extraPaths": ["notes"]}}}}
    same = {"agents": {"defaults": {"memorySearch": {"extraPaths": ["./notes/", str(tmp_path / "ws" / "notes")]}}}}
    a = resolve_agent(MemsiftConfig.model_validate(extra), environ={}, workspace=str(tmp_path / "ws"))
    b = resolve_agent(MemsiftConfig.model_validate(same), environ={}, workspace=str(tmp_path / "ws"))
    assert a.store_path != plain.store_path and a.store_path == b.store_path


def test_the_users_time_zone_carries_over_from_openclaw_and_memsifts_own_key_wins(tmp_path):
    """OpenClaw's `agents.defaults.userTimezone` names the zone its daily files are written in: memsift
    reads days in it. Its own `query.time.timezone` wins; an unknown zone is a config error under
    memsift's key and a recorded note under OpenClaw's (which falls back to the machine's zone)."""
    carried, path = load_config(_write(tmp_path, "{agents: {defaults: {userTimezone: 'America/Los_Angeles'}}}"),
                                environ={})
    settings = resolve_agent(carried, environ={}, workspace="/tmp", config_path=path)
    assert settings.memory_search.query.time.timezone == "America/Los_Angeles"
    assert settings.sources["memorySearch.query.time.timezone"].endswith("agents.defaults.userTimezone")
    own = _resolve({"agents": {"defaults": {"userTimezone": "America/Los_Angeles",
                                            "memorySearch": {"query": {"time": {"timezone": "Asia/Tokyo"}}}}}})
    assert own.memory_search.query.time.timezone == "Asia/Tokyo"
    assert _resolve({}).memory_search.query.time.timezone is None  # this machine's zone
    with pytest.raises(ConfigError, match=r"query\.time\.timezone.*no time zone"):
        load_config(_write(tmp_path, "{agents: {defaults: {memorySearch: {query: {time: {timezone: 'Mars/Base'}}}}}}"),
                    environ={})
    odd = _resolve({"agents": {"defaults": {"userTimezone": "Mars/Base"}}})
    assert odd.memory_search.query.time.timezone is None
    assert any("userTimezone" in n and "Mars/Base" in n and "this machine's time zone" in n for n in odd.notes)
