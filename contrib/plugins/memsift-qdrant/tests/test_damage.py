"""A damaged Qdrant index heals from the Markdown files, as LanceDB's does (hardening round 5): a lost
chunks collection made every search return 0 hits silently and neither `index` nor the builtin
fallback healed it; a damaged `meta.json` never healed, even with `--force`; a full disk exited 7
and a read-only state folder 4, even with the fallback. Through the cold CLI, in local mode."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memsift.engine.kit.testing import backend_config, example_workspace, run_cli

pytest.importorskip(
    "memsift_qdrant", reason="the Qdrant plugin is not installed (pip install -e contrib/plugins/memsift-qdrant)"
)

QUESTION = "Lena birthday"


@pytest.fixture
def setup(tmp_path: Path):
    ws = example_workspace(tmp_path)
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}

    def config(state: Path, **qdrant: object) -> Path:
        return backend_config(tmp_path / f"cfg-{len(list(tmp_path.glob('cfg-*')))}.json", "qdrant", ws, state=state,
                              provider="none", **qdrant)

    def cli(cfg: Path, *args: str) -> subprocess.CompletedProcess:
        return run_cli(tmp_path, cfg, *args, state_from_config=True)

    yield tmp_path, ws, config, cli
    ws_now = {p: p.read_bytes() for p in ws.rglob("*.md") if p.name != "2026-11-21.md"}
    assert ws_now == before  # the notes are never touched


def _found(done: subprocess.CompletedProcess, backend: str = "qdrant") -> dict:
    assert done.returncode == 0, done.stderr[-1500:]
    answer = json.loads(done.stdout)
    assert answer["backend"] == backend and answer["results"] and answer["results"][0]["path"] == "MEMORY.md", answer
    return answer


@pytest.mark.parametrize("fallback", ["none", "builtin"])
def test_a_lost_chunks_collection_is_rebuilt_by_the_next_search_or_index(setup, fallback):
    tmp, _ws, config, cli = setup
    cfg = config(tmp / "state", fallback=fallback)
    db = tmp / "state" / "agents" / "main" / "qdrant" / "db"
    for command in (["search", QUESTION, "--json"], ["index"]):
        assert cli(cfg, "index").returncode == 0
        for chunks in (db / "collection").glob("*_chunks"):
            shutil.rmtree(chunks)  # the points are gone; meta.json still lists the collection
        done = cli(cfg, *command)
        assert done.returncode == 0, (command, done.stderr[-1500:])
        if command[0] == "search":
            _found(done)  # healed by Qdrant itself: a new generation, not the fallback, not 0 hits
        else:
            assert "was damaged: its chunks collection holds 0 of" in done.stdout, done.stdout
    _found(cli(cfg, "search", QUESTION, "--json"))


def test_a_damaged_meta_json_is_set_aside_and_rebuilt(setup):
    tmp, _ws, config, cli = setup
    cfg = config(tmp / "state")
    db = tmp / "state" / "agents" / "main" / "qdrant" / "db"
    for command in (["search", QUESTION, "--json"], ["status", "--json"], ["index"], ["index", "--force"]):
        assert cli(cfg, "index").returncode == 0
        (db / "meta.json").write_text("{garbage")
        done = cli(cfg, *command)
        assert done.returncode == 0, (command, done.stderr[-1500:])
        if command[0] == "search":
            _found(done)
    aside = [p.name for p in db.parent.iterdir() if p.name.startswith("db.")]
    assert aside == ["db.damaged"], aside  # one set-aside copy, however often
    _found(cli(cfg, "search", QUESTION, "--json"))


def _run(args: list[str]) -> bool:
    try:
        return subprocess.run(args, capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem needs root")
@pytest.mark.parametrize("how", ["read-only mount", "disk full"])
@pytest.mark.parametrize("fallback", ["none", "builtin"])
def test_a_read_only_or_full_state_folder_answers_from_qdrant_as_it_is(setup, how, fallback):
    tmp, ws, config, cli = setup
    state = tmp / "state"
    state.mkdir()
    if not _run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(state)]):
        pytest.skip("cannot mount a tmpfs here")
    try:
        cfg = config(state, fallback=fallback)
        assert cli(cfg, "index").returncode == 0
        (ws / "memory" / "2026-11-21.md").write_text("- 10:00 The zeppelin hangar lease was signed.\n" * 200)
        if how == "read-only mount":
            assert _run(["mount", "-o", "remount,ro", str(state)])
        else:
            subprocess.run(["dd", "if=/dev/zero", f"of={state / 'filler'}", "bs=64k"], capture_output=True)
        answer = _found(cli(cfg, "search", QUESTION, "--json"))
        assert "could not be updated" in answer["syncError"], answer
        assert cli(cfg, "status").returncode == 0
        index = cli(cfg, "index")
        assert index.returncode == 4 and ("full" in index.stderr or "read-only" in index.stderr), index.stderr[-1500:]
    finally:
        (ws / "memory" / "2026-11-21.md").unlink(missing_ok=True)
        subprocess.run(["umount", "-l", str(state)], capture_output=True)
