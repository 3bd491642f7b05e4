"""`memsift parity`: the comparison maths, the queries file, and whole runs on both backends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import QMD_SAMPLES
from memsift.engine.errors import ConfigError
from memsift.engine.cli.parity import SideResult, compare, kendall_tau, match_hits, read_queries

FAKEBIN = Path(__file__).parents[1] / "backends" / "qmd" / "fakebin"


def test_hits_match_on_the_same_file_with_overlapping_lines_one_to_one():
    a = [("a.md", 1, 10), ("b.md", 5, 8), ("a.md", 20, 30)]
    b = [("a.md", 8, 12), ("a.md", 25, 26), ("b.md", 9, 12), ("c.md", 1, 3)]
    assert match_hits(a, b) == [(0, 0), (2, 1)]  # b.md 5-8 and 9-12 do not overlap
    assert match_hits([("a.md", 1, 10), ("a.md", 2, 3)], [("a.md", 1, 1)]) == [(0, 0)]  # b's hit is used once


def test_kendall_tau_is_one_for_same_order_minus_one_for_reversed_and_none_below_two():
    assert kendall_tau([(0, 0), (1, 1), (2, 2)]) == 1.0
    assert kendall_tau([(0, 2), (1, 1), (2, 0)]) == -1.0
    assert kendall_tau([(0, 0), (1, 2), (2, 1)]) == pytest.approx(1 / 3)
    assert kendall_tau([(0, 3)]) is None


def test_compare_counts_overlap_against_the_longer_list_and_agrees_on_empty():
    both_empty = compare("q", SideResult(backend="builtin"), SideResult(backend="qmd"), 5)
    assert both_empty.overlap == 1.0 and both_empty.file_overlap == 1.0 and both_empty.rank_correlation is None
    one_sided = compare("q", SideResult(backend="builtin", hits=[("a.md", 1, 2)]), SideResult(backend="qmd"), 5)
    assert one_sided.overlap == 0.0
    r = compare(
        "q",
        SideResult(backend="builtin", hits=[("a.md", 1, 5), ("b.md", 1, 5), ("c.md", 1, 5), ("d.md", 1, 5)]),
        SideResult(backend="qmd", hits=[("b.md", 2, 3), ("a.md", 4, 9)]),
        3,  # d.md is past the cut
    )
    assert r.common == 2 and r.overlap == pytest.approx(2 / 3, abs=1e-4) and r.rank_correlation == -1.0


def test_queries_file_takes_lines_and_json_lines_and_refuses_junk(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text('# comment\n\nfirst query\n{"query": "second"}\n  third  \n', encoding="utf-8")
    assert read_queries(f) == ["first query", "second", "third"]
    f.write_text('{"q": "wrong key"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=":1: a JSON line needs"):
        read_queries(f)
    f.write_text("# only comments\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no queries"):
        read_queries(f)
    with pytest.raises(ConfigError, match="cannot read"):
        read_queries(tmp_path / "missing.txt")


def _run(tmp_path: Path, ws: Path, qmd: dict, *args: str, path_prefix: str = "") -> subprocess.CompletedProcess:
    config = tmp_path / "memsift.json5"
    config.write_text(
        json.dumps(
            {
                "memory": {
                    "qmd": {
                        "includeDefaultMemory": False,
                        "paths": [{"path": ".", "name": "notes"}],
                        "update": {"debounceMs": 0},
                        **qmd,
                    }
                }
            }
        )
    )
    queries = tmp_path / "queries.txt"
    queries.write_text("aurora telemetry\nzebra\n", encoding="utf-8")
    env = {
        **os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "PATH": path_prefix + os.environ["PATH"], "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
        "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"), "FAKE_QMD_PIDS": str(tmp_path / "pids"),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memsift.engine.cli.main",
            "-w",
            str(ws),
            "-c",
            str(config),
            "parity",
            str(queries),
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def corpus(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    return ws


def test_parity_run_compares_builtin_with_qmd(tmp_path, corpus):
    # The fake qmd replays real captures; on the same corpus both sides must find MEMORY.md.
    done = _run(tmp_path, corpus, {}, "--json", "-k", "3", path_prefix=f"{FAKEBIN}:")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    first, second = report["queries"]
    assert first["qmd"]["mode"] == "search" and first["builtin"]["mode"] == "hybrid"
    assert any(h[0] == "MEMORY.md" for h in first["qmd"]["hits"]) and any(
        h[0] == "MEMORY.md" for h in first["builtin"]["hits"]
    )
    assert first["fileOverlap"] > 0 and first["qmd"]["fallback"] is None
    assert second["qmd"]["hits"] == []  # the captured "no results" answer
    assert report["summary"]["queries"] == 2 and report["summary"]["qmdFallbacks"] == 0
    # Each step says what it waits for (a hung qmd update was silent for two minutes).
    steps = [line for line in done.stderr.splitlines() if line.startswith("memsift: parity: ")]
    assert steps[0] == "memsift: parity: syncing builtin" and steps[1].startswith(
        "memsift: parity: syncing qmd (qmd update"
    )
    assert "up to 120 s" in steps[1] and steps[2].startswith(
        "memsift: parity: warming up both backends, then 2 queries"
    )


def test_a_side_that_fell_back_fails_the_gate_and_leads_the_report(tmp_path, corpus):
    # QMD missing: every QMD query is answered by builtin, so builtin is compared with itself.
    done = _run(tmp_path, corpus, {"command": str(tmp_path / "no-such-qmd")}, "--fail-under", "0.5")
    assert done.returncode == 1, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("NOT COMPARABLE: qmd fell back to builtin on 2 of 2 queries")
    assert "builtin was compared with itself" in first and "qmd is not installed at" in first
    assert "qmd fell back: qmd → builtin" in done.stdout and "fallbacks: builtin 0, qmd 2" in done.stdout
    assert "parity gate failed: qmd fell back to builtin on 2 of 2 queries" in done.stderr
    assert "overlap counting them as 0 is 0.00" in done.stderr
    report = json.loads(
        _run(tmp_path, corpus, {"command": str(tmp_path / "no-such-qmd")}, "--json", "--fail-under", "0.5").stdout
    )
    assert list(report)[:2] == ["comparable", "warnings"]  # the JSON leads with it too
    assert report["comparable"] is False and report["warnings"][0].startswith(
        "qmd fell back to builtin on 2 of 2 queries"
    )
    assert report["summary"]["fellBackQueries"] == 2 and report["summary"]["gateMeanOverlap"] == 0.0
    assert report["summary"]["meanOverlap"] == 1.0  # what was measured, for the record
    # Without a gate the run still reports (exit 0), leading with the warning.
    done = _run(tmp_path, corpus, {"command": str(tmp_path / "no-such-qmd")}, "--mode", "keyword")
    assert done.returncode == 0 and done.stdout.startswith("NOT COMPARABLE: qmd fell back")


def test_parity_keeps_its_search_modes(tmp_path, corpus):
    done = _run(tmp_path, corpus, {}, "--json", "--mode", "keyword", "--fail-under", "0", path_prefix=f"{FAKEBIN}:")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["comparable"] is True and report["warnings"] == []
    assert report["queries"][0]["builtin"]["mode"] == "fts-only" and report["queries"][0]["qmd"]["mode"] == "search"


def test_parity_gate_fails_below_the_threshold(tmp_path, corpus):
    done = _run(tmp_path, corpus, {}, "--fail-under", "1.0", path_prefix=f"{FAKEBIN}:")
    assert done.returncode == 1 and "is below 1.00" in done.stderr


def test_a_queries_file_saved_by_notepad_or_not_as_utf8(tmp_path):
    """A byte-order mark was read into the first query ("\\ufeffledger"); a file in another encoding
    was Python's codec message."""
    f = tmp_path / "q.txt"
    f.write_bytes("\ufeffledger\r\nbinder\r\n".encode("utf-8"))
    assert read_queries(f) == ["ledger", "binder"]
    f.write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"it is not UTF-8 text \(byte 0xe9 at 3\): save it as UTF-8"):
        read_queries(f)
