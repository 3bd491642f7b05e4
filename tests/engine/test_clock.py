"""`$MEMSIFT_NOW`: the moment a question's relative times count from (engine/search/clock.py). The
door matrix (tests/test_doors.py) asks every door as of a fixed day with it; here, what it reads
and what it refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime

import pytest

from helpers import EXAMPLE_WORKSPACE
from memsift.engine.search.clock import BadClock, now, parse_now


@pytest.mark.parametrize("day", ["2026-12-31", "2027-01-01", "2027-03-01", "2028-02-29"])
def test_a_date_is_noon_of_that_day_and_a_date_time_is_itself(day):
    y, m, d = map(int, day.split("-"))
    assert datetime.fromtimestamp(parse_now(day)) == datetime(y, m, d, 12)
    assert datetime.fromtimestamp(parse_now(f"{day}T09:30")) == datetime(y, m, d, 9, 30)
    assert now({"MEMSIFT_NOW": day}) == parse_now(day)
    assert parse_now("1800000000") == 1800000000.0


def test_unset_it_is_the_clock(monkeypatch):
    import time

    monkeypatch.setattr(time, "time", lambda: 1830000000.0)  # a fixed clock: the test reads no real date
    assert now({}) == 1830000000.0 and now({"MEMSIFT_NOW": " "}) == 1830000000.0


@pytest.mark.parametrize("bad", ["tomorrow", "2027-13-01", "-5", "1e400", "nan", "0001-01-01T00:00+14:00",
                                 "1969-12-31T23:59:59+00:00"])
def test_what_is_no_moment_is_refused(bad):
    with pytest.raises(BadClock, match="MEMSIFT_NOW"):
        parse_now(bad)


def test_the_cli_refuses_a_bad_value_before_any_work_and_uses_a_good_one(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}
    env.update(
        MEMSIFT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), MEMSIFT_NO_RESIDENT="1"
    )
    cmd = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(EXAMPLE_WORKSPACE), "search",
           "what did I do yesterday?", "--json"]
    bad = subprocess.run(cmd, env={**env, "MEMSIFT_NOW": "someday"}, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert bad.stderr.startswith("memsift: $MEMSIFT_NOW='someday' is no moment") and "Usage:" not in bad.stderr
    assert not (tmp_path / "state").exists()  # nothing built
    import json

    good = subprocess.run(cmd, env={**env, "MEMSIFT_NOW": "2026-11-19"}, capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    answer = json.loads(good.stdout)
    assert answer["timeOnly"] and [h["path"] for h in answer["results"]][:1] == ["memory/2026-11-18.md"], answer


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e20, -5.0, True, "2026-11-19"])
def test_the_python_apis_now_is_refused_by_name_when_it_is_no_moment(tmp_path, bad):
    """`now=` of the Python API: NaN, 1e20 or a string failed deep in the calendar (ValueError,
    OverflowError, TypeError); True was read as one second after 1970."""
    import anyio

    from helpers import make_settings
    from memsift.backends.builtin import BuiltinSearchManager
    from memsift.engine import open_manager
    from memsift.engine.embeddings.fake import FakeEmbeddingProvider
    from memsift.engine.requests import InvalidRequest

    settings = make_settings(tmp_path, EXAMPLE_WORKSPACE)

    async def through_the_api(now):
        async with open_manager(settings) as m:
            return await m.search("what did I do yesterday?", now=now)

    async def of_a_bare_backend(now):
        m = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
        try:
            return await m.search("what did I do yesterday?", now=now)
        finally:
            await m.aclose()

    with pytest.raises(InvalidRequest, match=r"^now: must be POSIX seconds between 0 and 253402300799"):
        anyio.run(through_the_api, bad)
    with pytest.raises(ValueError, match=r"^now: must be POSIX seconds between 0 and 253402300799"):
        anyio.run(of_a_bare_backend, bad)
    good = anyio.run(through_the_api, datetime(2026, 11, 19, 12).timestamp())
    assert [h.path for h in good.results][:1] == ["memory/2026-11-18.md"]
