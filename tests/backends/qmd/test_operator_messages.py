"""What an operator reads about QMD says what happened and what to do: the index report, an empty
`search`, which engine answered, a crashing qmd in answers and in status."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import QMD_SAMPLES
from memsift.backends.qmd.manager import EVERY_WORD_NOTE, EVERY_WORD_NOTE_NO_MODELS

FAKEBIN = Path(__file__).with_name("fakebin")
# A qmd whose launcher shell reports a segfaulting child as exit 139 (as `bin/qmd` on Node 20 does).
CRASHING = "#!/bin/sh\nsh -c 'kill -SEGV $$'\nexit $?\n"


@pytest.fixture
def cli(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", ws)
    env = {
        **os.environ, "PATH": f"{FAKEBIN}:{os.environ['PATH']}", "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "FAKE_QMD_SAMPLES": str(QMD_SAMPLES), "MEMSIFT_NO_RESIDENT": "1",
    }

    def run(*args: str, qmd: dict | None = None) -> subprocess.CompletedProcess:
        config = tmp_path / "memsift.json5"
        config.write_text(
            json.dumps(
                {
                    "memory": {
                        "backend": "qmd",
                        "qmd": {
                            "includeDefaultMemory": False,
                            "paths": [{"path": ".", "name": "notes"}],
                            "update": {"debounceMs": 60_000},
                            **(qmd or {}),
                        },
                    },
                    "agents": {"defaults": {"workspace": str(ws), "memorySearch": {"provider": "none"}}},
                }
            )
        )
        return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(config), *args],
                              env=env, capture_output=True, text=True, timeout=120)

    return run, tmp_path


def test_index_reports_what_qmd_did(cli):
    run, _ = cli
    done = run("index", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # The replayed captures: `collection add` indexed 10 files, then `update` saw 1 new, 1 updated, 8 unchanged, 1
    # removed.
    assert report["backend"] == "qmd"
    assert (report["filesIndexed"], report["filesSeen"], report["filesRemoved"]) == (12, 10, 1)
    assert report["notes"][:2] == [
        "collection notes-main added (10 new)",
        "qmd update: 1 new, 1 updated, 8 unchanged, 1 removed",
    ]
    assert report["notes"][2].startswith("qmd embed: skipped (no local embedding model")
    human = run("index").stdout
    assert human.startswith("qmd: ") and "qmd update: 1 new, 1 updated" in human and "chunks:" not in human


def test_an_empty_search_says_why_and_what_to_try(cli):
    run, _ = cli
    done = run("search", "zebra crossing times")  # the capture of "No results found"
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "No results." and lines[1].startswith("0 result(s) · qmd search (BM25) · ")
    # No local QMD models here: hybrid or vector would only time out, so the hint does not offer them.
    assert lines[2] == EVERY_WORD_NOTE_NO_MODELS and "--mode hybrid" not in EVERY_WORD_NOTE_NO_MODELS
    assert "--mode hybrid" in EVERY_WORD_NOTE and "memory.qmd.searchMode" in EVERY_WORD_NOTE  # with the models
    answer = json.loads(run("search", "zebra crossing times", "--json").stdout)
    assert answer["notes"] == [EVERY_WORD_NOTE_NO_MODELS]
    assert "notes" not in json.loads(run("search", "zebra", "--json").stdout)  # one word: nothing to explain


def test_which_engine_answered_is_named_not_qmd_slash_qmd(cli):
    run, _ = cli
    done = run("search", "aurora")
    assert "3 result(s) · qmd search (BM25) · " in done.stdout and "qmd/qmd" not in done.stdout
    answer = json.loads(run("search", "aurora", "--json").stdout)
    assert answer["provider"] == "qmd" and "model" not in answer  # BM25 uses no embedding model


def test_a_crashing_qmd_is_described_in_answers_and_status(cli):
    run, tmp_path = cli
    assert run("index").returncode == 0  # collections registered while QMD works
    crashing = tmp_path / "crashing-qmd"
    crashing.write_text(CRASHING)
    crashing.chmod(0o755)
    answer = json.loads(run("search", "aurora", "--json", qmd={"command": str(crashing)}).stdout)
    reason = answer["fallback"]["reason"]
    assert reason.startswith("qmd crashed (SIGSEGV, signal 11 / exit 139) while searching collection notes-main")
    assert "Node older than 22" in reason and "--pdeathsig" not in reason
    human = run("search", "aurora", qmd={"command": str(crashing)}).stdout
    assert human.rstrip().endswith("; answered from the builtin index")

    status = run("status", qmd={"command": str(crashing)})
    assert status.returncode == 0, status.stderr
    text = status.stdout
    backend_row = next(line for line in text.splitlines() if line.startswith("Backend"))
    assert "builtin" in backend_row  # what a search would use now (after the 'Searches' row that says how)
    fallback_row = next(line for line in text.splitlines() if line.startswith("Fallback"))
    assert "from qmd: qmd crashed (SIGSEGV" in fallback_row and text.count("crashed (SIGSEGV") == 1  # said once
    assert "notes-main" in text and "registered, but qmd is failing" in text and " · ok" not in text
    st = json.loads(run("status", "--json", qmd={"command": str(crashing)}).stdout)
    assert st["backend"] == "builtin" and st["fallback"]["from"] == "qmd"
    assert [c["state"] for c in st["details"]["collections"]] == ["registered, but qmd is failing"]


def test_status_on_a_fresh_state_folder_asks_qmd_and_gets_its_version(cli, tmp_path):
    """The QMD home (qmd's working folder) does not exist before the first sync: status used to say
    "cannot start qmd (No such file or directory)" although qmd works."""
    run = cli[0]
    assert not (tmp_path / "state").exists()
    st = run("status", "--json")
    assert st.returncode == 0, st.stderr
    qmd = json.loads(st.stdout)["details"]
    assert qmd["version"] == "2.8.3" and qmd["error"] is None, qmd
    assert "cannot start" not in st.stdout + st.stderr


def test_an_outage_without_fallback_is_never_no_results_on_stdout(cli):
    """qmd missing and `memory.qmd.fallback: "none"`: exit 7, the reason on stderr, and nothing on
    stdout in text (a script reading stdout saw "No results."); --json still says `unavailable`."""
    run, _ = cli
    text = run("search", "aurora", qmd={"command": "/nonexistent/qmd", "fallback": "none"})
    assert text.returncode == 7 and text.stdout == "", text.stdout
    assert "qmd unavailable" in text.stderr and 'memory.qmd.fallback is "none"' in text.stderr
    as_json = run("search", "aurora", "--json", qmd={"command": "/nonexistent/qmd", "fallback": "none"})
    assert as_json.returncode == 7 and "not installed" in json.loads(as_json.stdout)["unavailable"]


def test_min_score_removing_every_hit_is_said_not_a_bare_no_results(cli):
    run, _ = cli
    done = run("search", "aurora", "--min-score", "0.99")
    assert done.returncode == 0
    assert done.stdout.startswith("No results at or above minScore 0.99: ") and "--min-score" in done.stdout, (
        done.stdout
    )
    qmd = json.loads(run("search", "aurora", "--min-score", "0.99", "--json").stdout)
    assert qmd["results"] == [] and qmd["belowMinScore"]["candidates"] >= 1 and qmd["belowMinScore"]["bestScore"] < 0.99
