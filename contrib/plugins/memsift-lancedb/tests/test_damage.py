"""A damaged LanceDB dataset heals from the Markdown files or falls back, without a traceback; a
read-only or full state folder answers from the dataset as it is; the folders it creates are private;
a resident helper sees a dataset replaced under it. Through the cold CLI and the resident helper."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memsift.engine.kit.testing import backend_config, example_workspace, run_cli

pytest.importorskip("memsift_lancedb", reason="the LanceDB plugin is not installed "
                    "(pip install -e contrib/plugins/memsift-lancedb)")

QUESTION = "Lena birthday"


@pytest.fixture
def setup(tmp_path: Path):
    ws = example_workspace(tmp_path)
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}

    def config(state: Path, **lancedb: object) -> Path:
        return backend_config(tmp_path / f"cfg-{len(list(tmp_path.glob('cfg-*')))}.json", "lancedb", ws, state=state,
                              provider="none", **lancedb)

    def cli(cfg: Path, *args: str, resident: bool = False) -> subprocess.CompletedProcess:
        return run_cli(tmp_path, cfg, *args, resident=resident, state_from_config=True)

    yield tmp_path, config, cli
    assert {p: p.read_bytes() for p in ws.rglob("*.md")} == before  # the notes are never touched


def _found(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-1500:]
    answer = json.loads(done.stdout)
    assert answer["results"] and answer["results"][0]["path"] == "MEMORY.md", answer
    return answer


# Each pointer form over every command, each fallback setting twice: how the pointer is read does
# not depend on the fallback (the full cross product cost a minute and a half and found nothing more).
@pytest.mark.parametrize(("pointer", "fallback"), [({"generation": 7}, "builtin"), ({"generation": "two"}, "none"),
                                                   ({"generation": True}, "builtin"), ([1, 2], "none")],
                         ids=["missing generation", "not a number", "a boolean", "not an object"])
def test_a_damaged_pointer_heals_on_search_status_and_index(setup, pointer, fallback):
    tmp, config, cli = setup
    cfg = config(tmp / "state", fallback=fallback)
    assert cli(cfg, "index").returncode == 0
    current = tmp / "state" / "agents" / "main" / "lancedb" / "current.json"
    for command in (["search", QUESTION, "--json"], ["status", "--json"], ["index"], ["index", "--force"]):
        current.write_text(json.dumps(pointer))
        done = cli(cfg, *command)
        assert done.returncode == 0, (command, done.stderr[-1500:])
        if command[0] == "search":
            assert _found(done)["backend"] == "lancedb"  # healed: a new generation, not the fallback
        if command == ["index"]:
            assert "current.json) was damaged" in done.stdout, done.stdout
    assert json.loads(current.read_text())["generation"] >= 2


def test_damaged_data_files_are_rebuilt_from_the_notes(setup):
    tmp, config, cli = setup
    cfg = config(tmp / "state")  # no fallback: LanceDB heals itself
    db = tmp / "state" / "agents" / "main" / "lancedb" / "db"
    for command in (["search", QUESTION, "--json"], ["index"]):
        assert cli(cfg, "index", "--force").returncode == 0
        for f in db.rglob("*.lance"):
            if f.is_file():
                f.write_bytes(b"")  # every data and index file of every generation, emptied
        done = cli(cfg, *command)
        assert done.returncode == 0, (command, done.stderr[-1500:])
        assert "dataset damaged; rebuilding" in done.stderr, done.stderr[-1500:]
    assert _found(cli(cfg, "search", QUESTION, "--json"))["backend"] == "lancedb"


def test_a_dataset_that_cannot_be_opened_falls_back_or_says_what_to_do(setup):
    tmp, config, cli = setup
    root = tmp / "state" / "agents" / "main" / "lancedb"
    cfg = config(tmp / "state", fallback="builtin")
    assert cli(cfg, "index").returncode == 0
    shutil.rmtree(root / "db")
    (root / "db").write_text("not a folder")  # nothing LanceDB can open or rebuild in
    answer = _found(cli(cfg, "search", QUESTION, "--json"))
    assert answer["backend"] == "builtin" and answer["fallback"]["from"] == "lancedb", answer
    strict = cli(config(tmp / "state"), "search", QUESTION)
    assert strict.returncode != 0 and strict.stderr.startswith("memsift: the lancedb backend"), strict.stderr


def test_a_custom_dataset_folder_is_private(setup):
    tmp, config, cli = setup
    cfg = config(tmp / "state", path=str(tmp / "elsewhere" / "lance"))
    assert cli(cfg, "index").returncode == 0
    for folder in (tmp / "elsewhere", tmp / "elsewhere" / "lance", tmp / "elsewhere" / "lance" / "db"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_a_helper_sees_a_dataset_replaced_under_it(setup):
    tmp, config, cli = setup
    cfg = config(tmp / "state")
    try:
        for _ in range(2):  # the second search is the helper's
            _found(cli(cfg, "search", QUESTION, "--json", resident=True))
        root = tmp / "state" / "agents" / "main" / "lancedb"
        root.rename(tmp / "old-lance")
        assert cli(cfg, "index").returncode == 0  # a new dataset, generation 1 again
        shutil.rmtree(tmp / "old-lance")
        assert _found(cli(cfg, "search", QUESTION, "--json", resident=True))["backend"] == "lancedb"
        assert json.loads(cli(cfg, "status", "--json", resident=True).stdout)["helper"]["running"]
    finally:
        cli(cfg, "helpers", "stop", "--all")


def _run(args: list[str]) -> bool:
    try:
        return subprocess.run(args, capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem needs root")
@pytest.mark.parametrize("how", ["read-only mount", "disk full"])
def test_a_read_only_or_full_state_folder_answers_from_the_dataset_as_it_is(setup, how):
    tmp, config, cli = setup
    state = tmp / "state"
    state.mkdir()
    if not _run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(state)]):
        pytest.skip("cannot mount a tmpfs here")
    try:
        cfg = config(state)
        assert cli(cfg, "index").returncode == 0
        (tmp / "example" / "memory" / "2026-11-21.md").write_text(
            "- 10:00 The zeppelin hangar lease was signed.\n" * 200
        )
        if how == "read-only mount":
            assert _run(["mount", "-o", "remount,ro", str(state)])
        else:
            subprocess.run(["dd", "if=/dev/zero", f"of={state / 'filler'}", "bs=64k"], capture_output=True)
        answer = _found(cli(cfg, "search", QUESTION, "--json"))
        assert answer["backend"] == "lancedb" and "could not be updated" in answer["syncError"], answer
        assert cli(cfg, "status").returncode == 0
        index = cli(cfg, "index")
        assert index.returncode != 0 and ("full" in index.stderr or "read-only" in index.stderr), index.stderr[-1500:]
    finally:
        (tmp / "example" / "memory" / "2026-11-21.md").unlink(missing_ok=True)
        subprocess.run(["umount", "-l", str(state)], capture_output=True)
