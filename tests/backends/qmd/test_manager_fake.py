"""The QMD backend against a stand-in `qmd` that replays real captures and injects faults."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import anyio
import pytest

from helpers import QMD_SAMPLES, make_settings, process_alive
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.qmd import QmdSearchManager
from memsift.backends.qmd.process import QmdError
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.compose.fallback import FallbackSearchManager
from memsift.engine.compose.scoped import scoped

FAKEBIN = Path(__file__).with_name("fakebin")


def run(fn, *args, **kw):
    return anyio.run(lambda: fn(*args, **kw))


@pytest.fixture
def env(tmp_path):
    return {
        "PATH": f"{FAKEBIN}:{os.environ['PATH']}",
        "FAKE_QMD_SAMPLES": str(QMD_SAMPLES),
        "FAKE_QMD_LOG": str(tmp_path / "qmd-calls.jsonl"),
        "FAKE_QMD_PIDS": str(tmp_path / "pids"),
        "PWD": "/somewhere/else",
        "CI": "true",
        "HOME": os.environ.get("HOME", "/root"),
    }


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    shutil.copytree(QMD_SAMPLES / "corpus", w)
    return w


def _settings(tmp_path, ws, **qmd):
    base = {"includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}], "update": {"debounceMs": 60_000}}
    return make_settings(tmp_path, ws, memory={"backend": "qmd", "qmd": {**base, **qmd}})


def _calls(tmp_path) -> list[dict]:
    path = tmp_path / "qmd-calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wrapped(settings, env, **kw):
    builtin = lambda: BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())  # noqa: E731
    return scoped(
        FallbackSearchManager(lambda: QmdSearchManager(settings, environ=env), builtin, name="qmd", **kw), settings
    )


def test_isolated_home_collections_and_search_mapping(tmp_path, ws, env):
    m = QmdSearchManager(_settings(tmp_path, ws), environ=env)
    answer = run(m.search, "aurora telemetry")
    assert answer.backend == "qmd" and answer.mode == "search"
    assert [(h.path, h.start_line, h.end_line, h.score) for h in answer.results] == [
        ("MEMORY.md", 3, 6, 0.52),
        ("memory/2026-02-10.md", 3, 6, 0.41),
        ("projects/aurora.md", 2, 5, 0.4),
    ]
    assert answer.results[0].citation == "MEMORY.md#L3-L6"
    calls = _calls(tmp_path)
    assert "PWD" not in m.child_env() and "CI" not in m.child_env()
    assert all(c["argv"][:2] == ["--index", "memsift"] for c in calls)
    home = tmp_path / "state" / "agents" / "main" / "qmd"
    for c in calls:
        assert c["env"]["XDG_CONFIG_HOME"] == str(home / "xdg-config") and c["env"]["XDG_CACHE_HOME"] == str(
            home / "xdg-cache"
        )
        # The caller's PWD (/somewhere/else) never reaches qmd: at most the real cwd, which a
        # shell in between (a pyenv shim) sets.
        assert c["env"]["PWD"] in (None, c["cwd"]) and c["env"]["CI"] is None and c["env"]["NO_COLOR"] == "1"
        assert c["cwd"] == str(home)
    adds = [c["argv"] for c in calls if c["argv"][2:4] == ["collection", "add"]]
    assert adds == [["--index", "memsift", "collection", "add", str(ws), "--name", "notes-main", "--glob", "**/*.md"]]
    search = next(c["argv"] for c in calls if c["argv"][2] == "search")
    assert search[2:] == ["search", "--json", "-n", "6", "-c", "notes-main", "--", "aurora telemetry"]
    # A second manager (a new process) reuses the registered collection: no second add.
    run(QmdSearchManager(_settings(tmp_path, ws), environ=env).search, "aurora")
    assert len([c for c in _calls(tmp_path) if c["argv"][2:4] == ["collection", "add"]]) == 1


def test_limits_min_score_and_injected_chars(tmp_path, ws, env):
    m = QmdSearchManager(
        _settings(tmp_path, ws, limits={"maxResults": 2, "maxSnippetChars": 50, "maxInjectedChars": 80}), environ=env
    )
    answer = run(m.search, "aurora", max_results=10)
    assert len(answer.results) == 2  # a tool cannot raise the limit above limits.maxResults
    assert len(answer.results[0].snippet) == 50 and len(answer.results[1].snippet) == 30
    answer = run(m.search, "aurora", min_score=0.45)
    assert [h.score for h in answer.results] == [0.52]
    assert run(m.search, "zebra").results == []


def test_noisy_output_is_parsed(tmp_path, ws, env):
    env["FAKE_QMD_MODE"] = "noisy"
    assert len(run(QmdSearchManager(_settings(tmp_path, ws), environ=env).search, "aurora").results) == 3


def test_unsupported_flags_retry_with_query(tmp_path, ws, env):
    env["FAKE_QMD_MODE"] = "unsupported-flag"
    answer = run(QmdSearchManager(_settings(tmp_path, ws), environ=env).search, "aurora")
    assert answer.mode == "query" and len(answer.results) == 3


def test_missing_collection_is_repaired_once(tmp_path, ws, env):
    env["FAKE_QMD_MODE"] = "missing-collection"
    answer = run(QmdSearchManager(_settings(tmp_path, ws), environ=env).search, "aurora")
    assert len(answer.results) == 3


def _no_process_left(pids: list[int]) -> bool:
    return not any(process_alive(pid) for pid in pids)


def test_a_hang_is_killed_with_its_whole_process_group_and_falls_back(tmp_path, ws, env):
    settings = _settings(tmp_path, ws, limits={"timeoutMs": 1500})
    run(QmdSearchManager(settings, environ=env).sync)  # collections registered while healthy
    env["FAKE_QMD_MODE"] = "hang"
    m = _wrapped(settings, env)
    started = time.monotonic()
    answer = run(m.search, "Aurora telemetry", min_score=0)
    assert time.monotonic() - started < 10
    assert answer.backend == "builtin" and answer.fallback.from_ == "qmd"
    assert (
        answer.fallback.reason
        == "qmd did not answer within 1.5 s (memory.qmd.limits.timeoutMs): searching collection notes-main was "
           "stopped after 1.5 s"
    )
    assert answer.results and answer.results[0].path in ("MEMORY.md", "projects/aurora.md", "memory/2026-02-10.md")
    pids = [int(p) for p in Path(env["FAKE_QMD_PIDS"]).read_text().split()]
    assert len(pids) == 2 and _no_process_left(pids)  # launcher and worker are both gone
    st = run(m.status)
    assert st.backend == "builtin" and st.fallback.from_ == "qmd"


@pytest.mark.parametrize(
    "mode,reason",
    [
        ("crash", "qmd exited with code 1 while searching collection notes-main: TypeError: fetch failed"),
        ("garbage", "qmd returned invalid JSON"),
        # Output that parses but holds no hit, exit 0: was a silent empty answer.
        ("garbage-array", "qmd returned JSON that is not a list of hits"),
        ("garbage-dicts", "qmd returned JSON that is not a list of hits"),
        ("garbage-inline", "qmd returned invalid JSON"),
    ],
)
def test_crashes_and_garbage_fall_back_then_recover(tmp_path, ws, env, mode, reason):
    settings = _settings(tmp_path, ws)
    env["FAKE_QMD_MODE"] = mode
    m = _wrapped(settings, env, retry_after_s=0)
    answer = run(m.search, "Aurora telemetry", min_score=0)
    assert answer.backend == "builtin" and reason in answer.fallback.reason
    env["FAKE_QMD_MODE"] = "replay"  # QMD works again: the next search goes back to it
    answer = run(m.search, "aurora")
    assert answer.backend == "qmd" and answer.fallback is None


def test_missing_binary_falls_back_and_fail_closed_refuses(tmp_path, ws, env):
    settings = _settings(tmp_path, ws, command="/nonexistent/qmd-binary --flag")
    answer = run(_wrapped(settings, env).search, "Aurora", min_score=0)
    assert answer.backend == "builtin"
    assert (
        answer.fallback.reason
        == "qmd is not installed at /nonexistent/qmd-binary (memory.qmd.command; see The QMD backend in memsift's docs)"
    )
    closed = _settings(tmp_path, ws, command="/nonexistent/qmd-binary", fallback="none")
    answer = run(_wrapped(closed, env, fail_closed=True).search, "Aurora")
    assert answer.results == [] and "not installed" in answer.unavailable and answer.fallback is None
    off_path = _settings(tmp_path, ws, command="qmd")
    answer = run(_wrapped(off_path, {**env, "PATH": "/nonexistent"}).search, "Aurora", min_score=0)
    assert (
        answer.fallback.reason == "qmd is not installed or not on PATH (see The QMD backend in memsift's docs)"
    )  # no PATH dump


def test_scope_denial_is_visible_and_spawns_nothing(tmp_path, ws, env):
    m = _wrapped(_settings(tmp_path, ws), env)
    answer = run(m.search, "aurora", session_key="agent:main:discord:group:42")
    assert answer.results == [] and answer.denied.rule == "default deny"
    assert (answer.denied.channel, answer.denied.chat_type) == ("discord", "group")
    assert _calls(tmp_path) == []  # no qmd process at all
    assert run(m.search, "aurora", session_key="agent:main:telegram:direct:1").results


def test_vanished_folder_skips_the_update_and_keeps_the_index(tmp_path, ws, env):
    extra = tmp_path / "mounted"
    extra.mkdir()
    (extra / "a.md").write_text("# a")
    settings = _settings(tmp_path, ws, paths=[{"path": ".", "name": "notes"}, {"path": str(extra), "name": "mounted"}])
    m = QmdSearchManager(settings, environ=env)
    run(m.sync)
    updates = len([c for c in _calls(tmp_path) if c["argv"][2] == "update"])
    shutil.rmtree(extra)
    with pytest.raises(QmdError, match="folder missing"):
        run(m.sync)
    assert len([c for c in _calls(tmp_path) if c["argv"][2] == "update"]) == updates  # no update ran
    st = run(m.status)
    assert "folder missing" in st.details["lastError"]
    assert {c["name"]: c["folderExists"] for c in st.details["collections"]}["mounted"] is False


def test_embed_is_skipped_without_local_models_and_backs_off_on_failure(tmp_path, ws, env):
    m = QmdSearchManager(_settings(tmp_path, ws), environ=env)
    run(m.sync)
    assert "no local embedding model" in run(m.status).details["embedSkipped"]
    assert not any(c["argv"][2] == "embed" for c in _calls(tmp_path))
    models = m.cache_dir / "qmd" / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / "hf_ggml-org_embeddinggemma-300M-Q8_0.gguf").write_bytes(b"GGUF")
    run(m.sync, force=True)  # the replayed embed fails (fetch failed, exit 1)
    st = run(m.status).details
    assert st["embedFailures"] == 1 and st["embedBackoffUntil"] > time.time() + 50


def test_read_maps_qmd_prefixed_paths(tmp_path, ws, env):
    outside = tmp_path / "wiki"
    outside.mkdir()
    (outside / "page.md").write_text("line1\nline2\n")
    settings = _settings(tmp_path, ws, paths=[{"path": str(outside), "name": "wiki"}])
    m = QmdSearchManager(settings, environ=env)
    got = run(m.read, "qmd/wiki/page.md", 2, 1)
    assert (got.path, got.text) == ("qmd/wiki/page.md", "line2")
    assert run(m.read, "MEMORY.md").text.startswith("# Long-term memory")
    for bad in ("qmd/wiki/../../ws/people.md", "qmd/nosuch/page.md", "qmd/wiki/", "people.md"):
        with pytest.raises(PathNotAllowedError):
            run(m.read, bad)


def test_no_qmd_process_outlives_a_killed_memsift(tmp_path, ws, env):
    """SIGKILL memsift while qmd hangs silently: no timeout of ours can run, the kernel must."""
    import signal
    import subprocess
    import sys

    cfg = tmp_path / "c.json5"
    qmd_cfg = {"includeDefaultMemory": False, "paths": [{"path": ".", "name": "notes"}], "limits": {"timeoutMs": 60000}}
    cfg.write_text(
        json.dumps({"memory": {"backend": "qmd", "qmd": qmd_cfg}, "agents": {"defaults": {"workspace": str(ws)}}})
    )
    child_env = {**os.environ, **env, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "FAKE_QMD_MODE": "silent-hang"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "search", "aurora"],
        env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    pid_file = Path(env["FAKE_QMD_PIDS"])
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    qmd_pid = int(pid_file.read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while not _no_process_left([qmd_pid]) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = not _no_process_left([qmd_pid])
    if alive:
        os.kill(qmd_pid, signal.SIGKILL)
    assert not alive


@pytest.mark.parametrize("wait", [True, False])
def test_scheduler_boot_and_interval_updates(tmp_path, ws, env, wait):
    settings = _settings(tmp_path, ws, update={"interval": "300ms", "waitForBootSync": wait, "debounceMs": 0})
    m = QmdSearchManager(settings, environ=env)

    def updates() -> int:
        return len([c for c in _calls(tmp_path) if c["argv"][2] == "update"])

    async def host() -> int:
        async with anyio.create_task_group() as tg:
            await m.start_background(tg)
            booted = updates()
            with anyio.fail_after(30):
                while updates() < 3:  # the boot update, then the interval loop keeps updating
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        return booted

    booted = anyio.run(host)
    assert booted == (1 if wait else 0)  # waitForBootSync awaits the boot update before returning
    assert updates() >= 3


def test_interval_zero_disables_periodic_updates(tmp_path, ws, env):
    m = QmdSearchManager(_settings(tmp_path, ws, update={"interval": "0s", "waitForBootSync": True}), environ=env)

    async def host() -> None:
        async with anyio.create_task_group() as tg:
            await m.start_background(tg)
            await anyio.sleep(0.5)
            tg.cancel_scope.cancel()

    anyio.run(host)
    assert len([c for c in _calls(tmp_path) if c["argv"][2] == "update"]) == 1


def test_sessions_are_exported_into_their_own_collection(tmp_path, ws, env):
    settings = _settings(tmp_path, ws, sessions={"enabled": True, "retentionDays": 30})
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "chat1.jsonl").write_text(
        json.dumps({"type": "message", "message": {"role": "user", "content": "book the Lisbon hotel"}}) + "\n"
    )
    m = QmdSearchManager(settings, environ=env)
    run(m.sync)
    export = tmp_path / "state" / "agents" / "main" / "qmd" / "sessions"
    assert (export / "chat1.md").read_text().startswith("# Session chat1")
    adds = [c["argv"] for c in _calls(tmp_path) if c["argv"][2:4] == ["collection", "add"]]
    assert [
        "--index",
        "memsift",
        "collection",
        "add",
        str(export),
        "--name",
        "sessions-main",
        "--glob",
        "**/*.md",
    ] in adds
    st = run(m.status)
    assert st.sources == ["memory", "sessions"]


def test_no_collection_folder_is_an_empty_answer_that_says_so(tmp_path, ws, env):
    m = _wrapped(_settings(tmp_path, ws, paths=[{"path": "no-such-folder", "name": "gone"}]), env)
    answer = run(m.search, "aurora")
    assert answer.backend == "qmd" and answer.results == [] and answer.fallback is None
    assert answer.notes == [
        "QMD has no collection to search: none of its folders exists (memory.qmd.paths, "
        "memory.qmd.includeDefaultMemory)"
    ]


def test_a_task_groups_os_error_falls_back_and_says_what_failed(tmp_path, ws, env):
    """An OSError inside the primary's task group (QMD's files on a full disk) arrives as an
    exception group: it is a primary failure like any other, told in words."""
    import errno

    class FullDisk(QmdSearchManager):
        async def answer(self, request):
            raise ExceptionGroup("task group", [OSError(errno.ENOSPC, "No space left on device", "/state/qmd.lock")])

    settings = _settings(tmp_path, ws)
    builtin = lambda: BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())  # noqa: E731
    m = FallbackSearchManager(lambda: FullDisk(settings, environ=env), builtin, name="qmd", retry_after_s=0)
    answer = run(m.search, "aurora telemetry", min_score=0)
    assert answer.backend == "builtin" and answer.results
    assert (
        answer.fallback.reason == "cannot write its files: No space left on device (/state/qmd.lock); the disk is full"
    )

    class Bug(QmdSearchManager):
        async def answer(self, request):
            raise ExceptionGroup("task group", [KeyError("a bug is not an outage")])

    with pytest.raises(ExceptionGroup):
        run(FallbackSearchManager(lambda: Bug(settings, environ=env), builtin, name="qmd").search, "aurora")
