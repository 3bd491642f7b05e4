"""A search is one request, built once at the door and passed whole down the stack
(engine/compose/scoped.build_search → `answer`): its since/until are read with the configured
hemisphere, at every door, and what the backend searched is what the door accepted.

The season case tells the old way apart: the doors used to check `since` with the northern
hemisphere while the backend read it with the configured one, so a range valid in the south was
refused at the door ("since is after until") though the backend would have searched it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import FrozenInstanceError
from datetime import timedelta

import anyio
import pytest

from helpers import make_settings
from memsift.engine.compose.factory import open_manager
from memsift.engine.compose.scoped import search_request
from memsift.engine.requests import InvalidRequest
from memsift.engine.search.request import SearchRequest
from memsift.engine.search.time_query import parse_day

SOUTH = {"provider": "none", "query": {"time": {"hemisphere": "southern"}}}


def _season_range() -> tuple[str, str, str]:
    """A season phrase and an `until` day that make a valid range in the southern hemisphere and an
    empty one in the northern (today's date decides which season works), and the southern start."""
    for phrase in ("last summer", "last winter", "last spring", "last autumn"):
        north, south = (parse_day(phrase, what="since", hemisphere=h) for h in ("northern", "southern"))
        if south < north:
            return phrase, (north - timedelta(days=1)).isoformat(), south.isoformat()
    raise AssertionError("no season starts earlier in the south than in the north")


def _config(tmp_path, workspace) -> str:
    path = tmp_path / "memsift.json"
    path.write_text(json.dumps({"agents": {"defaults": {"workspace": str(workspace), "memorySearch": SOUTH}}}))
    return str(path)


def test_the_cli_reads_since_with_the_configured_hemisphere(tmp_path, example_workspace):
    phrase, until, south_start = _season_range()
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "MEMSIFT_NO_RESIDENT": "1"}
    cmd = [sys.executable, "-m", "memsift.engine.cli.main", "-c", _config(tmp_path, example_workspace), "search",
           "ledger", "--since", phrase, "--until", until, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["timeFilter"].startswith(f"{south_start}..{until}"), answer["timeFilter"]  # the south's season
    # The same range with the northern hemisphere is empty: refused at the door, exit 2, naming --until.
    north = tmp_path / "north.json"
    north.write_text(json.dumps({"agents": {"defaults": {"workspace": str(example_workspace),
                                                         "memorySearch": {"provider": "none"}}}}))
    r = subprocess.run([*cmd[:4], str(north), *cmd[5:]], capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 2 and "--until" in r.stderr and "is after until" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_mcp_and_the_python_api_read_it_alike(tmp_path, example_workspace):
    from memsift.engine.mcp.server import MemoryServer

    phrase, until, south_start = _season_range()
    settings = make_settings(tmp_path, example_workspace, SOUTH)

    async def run():
        async with open_manager(settings) as manager:
            api = await manager.search("ledger", since=phrase, until=until)
            assert api.time_filter and api.time_filter.startswith(f"{south_start}..{until}")
            out = await MemoryServer(manager, settings).search("ledger", since=phrase, until=until)
            assert out.error is None and out.time_filter == api.time_filter
            assert [h.path for h in out.results] == [h.path for h in api.results]
            bad = await MemoryServer(manager, settings).search("ledger", since="2026-05-01", until="2026-04-01")
            assert bad.invalid == "until" and "is after until" in bad.error and not bad.results
            with pytest.raises(InvalidRequest, match="until"):
                await manager.search("ledger", since="2026-05-01", until="2026-04-01")

    anyio.run(run)


def test_the_request_is_built_once_and_carries_the_scope_decision(tmp_path, example_workspace):
    settings = make_settings(tmp_path, example_workspace, SOUTH,
                             memory={"qmd": {"scope": {"default": "deny", "rules": [
                                 {"action": "allow", "match": {"chatType": "direct"}}]}}})
    allowed = search_request(settings, "mcp", query="ledger", session_key="agent:main:telegram:direct:42",
                             max_results=3)
    assert isinstance(allowed, SearchRequest) and allowed.scope is not None and allowed.scope.allowed
    assert (allowed.limit, allowed.max_results, allowed.default_max_results) == (
        3,
        3,
        settings.memory_search.query.max_results,
    )
    with pytest.raises(FrozenInstanceError):
        allowed.max_results = 9  # type: ignore[misc]
    bigger = allowed.but(max_results=20, candidates=80)
    assert (bigger.max_results, bigger.candidates, allowed.max_results) == (20, 80, 3)
    # A denied chat's bad arguments are not even read: its request carries the denial.
    denied = search_request(settings, "mcp", query="ledger", session_key="agent:main:telegram:group:7",
                            max_results="many", since="banana")
    assert denied.scope is not None and not denied.scope.allowed and denied.q == ""

    async def run():
        async with open_manager(settings) as manager:
            answer = await manager.answer(denied)
            assert answer.denied is not None and answer.results == []
            assert (await manager.answer(allowed)).denied is None

    anyio.run(run)


@pytest.mark.parametrize("door", ["api", "mcp"])
def test_a_blank_bound_is_none_and_a_boolean_is_no_second(tmp_path, example_workspace, door):
    """`since="   "` is no bound, as `since=""` always was (it was refused as "'' is not a date");
    `since=True` is refused at the door (it was read as POSIX second 1: every note since 1970)."""
    settings = make_settings(tmp_path, example_workspace, {"provider": "none"})
    blank = search_request(settings, door, query="ledger", since="   ", until="\t")
    assert blank.time_filter is None
    with pytest.raises(InvalidRequest, match="since: Input should be a date, a phrase or a number of seconds"):
        search_request(settings, door, query="ledger", since=True)
    assert search_request(settings, door, query="ledger", since=0).time_filter is not None  # 1970 is a date
