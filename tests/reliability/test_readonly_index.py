"""A real full filesystem, a read-only mount, an immutable index file: searches of notes already
indexed still answer (read-only, from the intact index) and say the index could not be updated;
`memsift index` fails with the real reason (exit 4), never a traceback or SQLite's
"cannot rollback - no transaction is active"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from figures import FIGURES
from helpers import EXAMPLE_WORKSPACE
from memory_guard import assert_untouched, snapshot

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem needs root")


def _run(args: list[str]) -> bool:
    """The command ran and succeeded (False when it is not installed: /sbin may not be on PATH)."""
    try:
        return subprocess.run(args, capture_output=True).returncode == 0
    except OSError:
        return False


def _mount(args: list[str]) -> bool:
    return _run(["mount", *args])


@pytest.fixture
def small_fs(tmp_path):
    """A 2 MB tmpfs (a real filesystem that fills up), unmounted afterwards."""
    where = tmp_path / "state"
    where.mkdir()
    if not _mount(["-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)]):
        pytest.skip("cannot mount a tmpfs here")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def ext4(tmp_path):
    """A small ext4 image (it supports `chattr +i`), unmounted afterwards."""
    image, where = tmp_path / "fs.img", tmp_path / "state"
    where.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(8 * 2**20)
    if not _run(["mkfs.ext4", "-q", str(image)]) or not _mount(["-o", "loop", str(image), str(where)]):
        pytest.skip("cannot mount an ext4 image here (mkfs.ext4, loop devices)")
    yield where
    subprocess.run(["chattr", "-R", "-i", str(where)], capture_output=True)
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _setup(tmp_path: Path, state: Path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"stateDir": str(state), "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), *args],
                              capture_output=True, text=True, env=env, timeout=120)

    assert cli("index").returncode == 0
    (ws / "memory" / "2026-11-21.md").write_text("- 10:00 The zeppelin hangar lease was signed.\n" * 200)
    return ws, cli


def _fill(folder: Path) -> None:
    subprocess.run(["dd", "if=/dev/zero", f"of={folder / 'filler'}", "bs=64k"], capture_output=True)
    os.sync()


def _check_read_only_answers(cli, how: str) -> None:
    found = cli("search", "Lisbon trip with Lena", "--json")
    assert found.returncode == 0, (how, found.stderr[-1500:])
    answer = json.loads(found.stdout)
    assert answer["results"] and "could not be updated" in answer["syncError"], (how, answer)
    human = cli("search", "Lisbon trip with Lena")
    assert human.returncode == 0 and "index not updated" in human.stdout and "Traceback" not in human.stderr, how
    st = cli("status")
    assert st.returncode == 0 and "Traceback" not in st.stderr, (how, st.stderr[-1500:])
    index = cli("index")
    assert (
        index.returncode == 4 and "Traceback" not in index.stderr and "no transaction is active" not in index.stderr
    ), (how, index.stderr[-1500:])
    FIGURES[f"read-only index situations where searches still answered ({how})"] += 1
    return index.stderr


def test_a_full_filesystem(tmp_path, small_fs):
    ws, cli = _setup(tmp_path, small_fs)
    before = snapshot(ws)
    _fill(small_fs)
    err = _check_read_only_answers(cli, "disk full")
    assert "full" in err, err
    assert not list(small_fs.rglob("*.tmp-*"))  # no half-built database left behind
    assert_untouched(before, ws)


def test_a_read_only_mount(tmp_path, small_fs):
    ws, cli = _setup(tmp_path, small_fs)
    assert _mount(["-o", "remount,ro", str(small_fs)])
    err = _check_read_only_answers(cli, "read-only mount")
    assert "read-only" in err.lower() and "can be searched but not updated" in err, err


def test_an_immutable_index_file(tmp_path, ext4):
    ws, cli = _setup(tmp_path, ext4)
    db = next(ext4.rglob("*.sqlite"))
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported here")
    _check_read_only_answers(cli, "immutable index file")


def test_the_real_error_of_a_transaction_sqlite_rolled_back_itself(tmp_path, small_fs):
    """On SQLITE_FULL SQLite may roll the transaction back by itself; apsw's rollback then fails
    with "no transaction is active", which hid the real error."""
    from memsift.backends.builtin.indexer import storage_failure

    conn = apsw.Connection(str(small_fs / "t.db"))
    for sql in ("PRAGMA journal_mode=WAL", "PRAGMA cache_size=10", "CREATE TABLE t(x)"):  # a small cache spills
        conn.execute(sql).fetchall()
    _fill(small_fs)
    with pytest.raises(apsw.Error) as caught:
        with conn:
            for _ in range(5000):
                conn.execute("INSERT INTO t VALUES (?)", (os.urandom(1000),))
    conn.close()
    failure = storage_failure(caught.value)
    assert failure is not None and "full" in str(failure), (caught.value, caught.value.__context__)


def test_the_qmd_backend_on_a_full_disk_answers_and_says_why(tmp_path, small_fs):
    """QMD's lock, state and update on a full disk: the search still answers (QMD's intact index,
    or the builtin fallback), says the update failed, and never shows a traceback."""
    fakebin = Path(__file__).resolve().parents[1] / "backends" / "qmd" / "fakebin"
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {
                "stateDir": str(small_fs),
                "memory": {"backend": "qmd", "qmd": {"update": {"debounceMs": 0}}},
                "agents": {"defaults": {"memorySearch": {"provider": "none"}}},
            }
        )
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
        "MEMSIFT_NO_RESIDENT": "1",
        "PATH": f"{fakebin}:{os.environ['PATH']}",
        "FAKE_QMD_SAMPLES": str(Path(__file__).resolve().parents[1] / "qmd-samples"),
    }

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), *args],
                              capture_output=True, text=True, env=env, timeout=120)

    assert cli("index").returncode == 0 and cli("-b", "builtin", "index").returncode == 0
    (small_fs / "agents" / "main" / "qmd" / "qmd.lock").unlink(missing_ok=True)  # made again on the full disk
    _fill(small_fs)
    for i in range(30):  # the last free blocks too
        if subprocess.run(
            ["dd", "if=/dev/zero", f"of={small_fs / f'more-{i}'}", "bs=4k", "count=64"], capture_output=True
        ).returncode:
            break
    (ws / "memory" / "2026-11-05.md").write_text("- the ledger database review moved to Friday\n")
    found = cli("search", "ledger database", "--json")
    assert found.returncode == 0 and "Traceback" not in found.stderr, found.stderr[-2000:]
    answer = json.loads(found.stdout)
    assert answer["results"], answer
    said = json.dumps(answer)
    assert ("disk is full" in said or "No space" in said) and ("update failed" in said or answer.get("fallback")), said
    index = cli("index")
    assert "Traceback" not in index.stderr and ("full" in index.stderr or "No space" in index.stderr), index.stderr[
        -1500:
    ]
    FIGURES["read-only index situations where searches still answered (qmd on a full disk)"] += 1
