"""Records (engine/records/__init__.py): the answers, requests and settings, with the behaviour the Python API
had when they were pydantic models — constructors by name or JSON key, camelCase dumps, copies,
equality, pickling — and the validation pydantic still does where input arrives (engine/records/schema.py)."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from pydantic import ValidationError

from memsift.engine.config.models import MemorySearchConfig, MemsiftConfig, QueryConfig, ScopeConfig
from memsift.engine.manager import SyncReport
from memsift.engine.records import Record, spec
from memsift.engine.results import Fallback, ReadResult, SearchAnswer, SearchHit
from memsift.engine.records.schema import model_of
from memsift.engine.secrets import Secret


class _Thing(Record):
    name: str
    tags: list[str] = []
    start_line: int = spec(default=1, json="from")
    hidden: int | None = spec(default=None, exclude=True)


class _Frozen(Record, frozen=True):
    value: int = 0


def _hit(**kw):
    return SearchHit(**{"path": "MEMORY.md", "start_line": 1, "end_line": 3, "score": 0.5, "snippet": "x", **kw})


def test_defaults_are_fresh_for_each_record_and_required_fields_are_required():
    a, b = _Thing(name="a"), _Thing(name="b")
    a.tags.append("x")
    assert b.tags == [] and a.tags == ["x"]
    with pytest.raises(TypeError, match="missing the argument 'name'"):
        _Thing()
    with pytest.raises(TypeError, match="unexpected arguments: nope"):
        _Thing(name="a", nope=1)


def test_a_field_is_given_by_name_or_by_its_json_key_and_dumped_either_way():
    by_key = _Thing(**{"name": "a", "from": 7})
    assert by_key == _Thing(name="a", start_line=7)
    assert by_key.model_dump() == {"name": "a", "tags": [], "start_line": 7}  # `hidden` is never dumped
    assert by_key.model_dump(by_alias=True) == {"name": "a", "tags": [], "from": 7}
    assert Fallback(**{"from": "qmd", "reason": "down"}).to_json_dict() == {"from": "qmd", "reason": "down"}
    assert ReadResult(path="p", text="t", from_line=3).to_json_dict()["from"] == 3


def test_json_dumps_hold_only_json_and_no_nulls():
    answer = SearchAnswer(query="q", results=[_hit(score=np.float32(0.25), explain=None)], backend="builtin",
                          mode="hybrid", min_score=0.35, max_results=6, took_ms=math.nan)
    doc = answer.to_json_dict()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["results"][0]["score"] == 0.25 and "explain" not in doc["results"][0]
    assert doc["tookMs"] is None  # NaN is no JSON number
    assert doc["minScore"] == 0.35 and doc["degraded"] == {}
    lone = SearchHit(path="a", start_line=1, end_line=1, score=1.0, snippet="a\ud800").to_json_dict()["snippet"]
    assert lone.startswith("a\ufffd") and lone.encode("utf-8")  # a lone surrogate can be written as UTF-8


def test_a_copy_changes_only_what_it_is_told_and_remembers_what_was_set():
    report = SyncReport(reason="cli", files_seen=3)
    changed = report.model_copy(update={"reason": "watch"})
    assert (changed.reason, changed.files_seen, report.reason) == ("watch", 3, "cli")
    assert changed.model_fields_set == {"reason", "files_seen"}
    assert changed.model_dump(exclude_unset=True) == {"reason": "watch", "files_seen": 3}


def test_frozen_records_refuse_changes_and_hash_by_value():
    thing = _Frozen(value=2)
    with pytest.raises(AttributeError, match="frozen"):
        thing.value = 3  # type: ignore[misc]
    assert hash(thing) == hash(_Frozen(value=2)) and {thing, _Frozen(value=2)} == {thing}
    with pytest.raises(TypeError, match="unhashable"):
        hash(_Thing(name="a"))


def test_records_pickle_and_compare_by_value():
    answer = SearchAnswer(query="q", results=[_hit()], backend="b", mode="m", min_score=0.1, max_results=1, took_ms=1.0)
    assert pickle.loads(pickle.dumps(answer)) == answer
    assert answer != answer.model_copy(update={"mode": "other"})
    assert MemsiftConfig() == MemsiftConfig() and MemsiftConfig().memory.qmd.scope.default == "deny"


def test_config_sections_are_validated_by_pydantic_models_made_from_them():
    ms = MemorySearchConfig.model_validate({"query": {"maxResults": "7"}, "remote": {"apiKey": "sk-abc123"},
                                            "extraPaths": [{"path": "notes"}], "provider": "openai-compatible"})
    assert isinstance(ms, MemorySearchConfig) and isinstance(ms.query, QueryConfig)
    assert ms.query.max_results == 7 and ms.extra_paths == ["notes"] and ms.provider == "openai"
    assert isinstance(ms.remote.api_key, Secret) and ms.remote.api_key.get_secret_value() == "sk-abc123"
    assert "sk-abc123" not in repr(ms) and "sk-abc123" not in ms.model_dump_json()
    assert ms.model_fields_set == {"query", "remote", "extra_paths", "provider"}
    for bad, where in (({"query": {"maxResults": 0}}, ("query", "maxResults")),
                       ({"query": {"maxResult": 3}}, ("query", "maxResult")),
                       ({"provider": "Bad Name"}, ("provider",))):
        with pytest.raises(ValidationError) as caught:
            MemorySearchConfig.model_validate(bad)
        assert tuple(caught.value.errors()[0]["loc"]) == where
    blocks = MemsiftConfig.model_validate({"memory": {"lancedb": {"keep": 2}}}).memory
    assert blocks.model_extra == {"lancedb": {"keep": 2}}
    assert blocks.model_dump(by_alias=True, exclude_unset=True) == {"lancedb": {"keep": 2}}
    with pytest.raises(ValidationError, match="did you mean 'backend'"):
        MemsiftConfig.model_validate({"memory": {"backnd": {}}})


def test_the_models_made_from_records_keep_their_keys_defaults_and_bounds():
    model = model_of(ScopeConfig)
    assert model.model_validate({}).model_dump() == ScopeConfig().model_dump()
    schema = model_of(QueryConfig).model_json_schema(by_alias=True)
    assert {"maxResults", "minScore", "hybrid", "rerank", "ranker", "expansion"} <= set(schema["properties"])
    rerank = model_of(MemorySearchConfig).model_json_schema()["$defs"]["RerankConfig"]["properties"]["candidates"]
    assert (rerank["minimum"], rerank["maximum"], rerank["default"]) == (1, 200, 30)
