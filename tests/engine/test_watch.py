"""Watching: real files, a real watcher, the real builtin index (fake embeddings)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import anyio
import pytest

from helpers import hangup_as_from_a_terminal, make_settings, write_transcript
from memsift.backends.builtin import BuiltinSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.compose.host import SessionDeltaTracker, serve_freshness
from memsift.engine.files.watcher import GUARD_S, MemoryWatcher


def _host_and(tmp_path, ws, body, **ms):
    """Run the freshness host, then `body(manager, events)`; return what body returns."""
    settings = make_settings(tmp_path, ws, {"sync": {"watchDebounceMs": 200}, **ms})
    manager = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    events: list[tuple[str, dict]] = []

    async def main():
        async with anyio.create_task_group() as tg:
            await tg.start(
                lambda task_status: serve_freshness(
                    manager, settings, on_event=lambda k, p: events.append((k, p)), task_status=task_status
                )
            )
            result = await body(manager, events)
            tg.cancel_scope.cancel()
        return result

    return anyio.run(main)


async def _wait_for(events, predicate, timeout=15.0):
    with anyio.fail_after(timeout):
        while not any(predicate(k, p) for k, p in events):
            await anyio.sleep(0.05)


def _watch_syncs(events):
    return [p for k, p in events if k == "synced" and p["reason"] == "watch"]


def test_a_written_note_becomes_searchable_and_a_deleted_one_goes(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")

    async def body(manager, events):
        await anyio.sleep(0.3)  # the watches are armed
        note = ws / "memory" / "2026-11-22.md"
        note.write_text("- adopted the xylophone naming scheme\n")
        await _wait_for(events, lambda k, p: k == "synced" and p["reason"] == "watch")
        found = (await manager.search("xylophone naming", min_score=0)).results
        note.unlink()
        n = len(_watch_syncs(events))
        await _wait_for(events, lambda k, p: len(_watch_syncs(events)) > n)
        gone = (await manager.search("xylophone naming", min_score=0)).results
        return found, gone

    found, gone = _host_and(tmp_path, ws, body)
    assert found and found[0].path == "memory/2026-11-22.md"
    assert all(h.path != "memory/2026-11-22.md" for h in gone)


def test_memory_folder_created_later_and_root_file_edits_are_seen(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()

    async def body(manager, events):
        await anyio.sleep(0.3)
        (ws / "memory").mkdir()
        await anyio.sleep(0.5)  # the recursive watch restarts on the new folder
        (ws / "memory" / "later.md").write_text("- the quokka project kicked off\n")
        await _wait_for(
            events, lambda k, p: k == "synced" and p["reason"] == "watch" and p["report"].files_indexed >= 1
        )
        n = len(_watch_syncs(events))
        (ws / "MEMORY.md").write_text("# Memory\n- prefers green tea\n")
        await _wait_for(events, lambda k, p: len(_watch_syncs(events)) > n)
        await anyio.sleep(0.3)
        return (await manager.search("quokka project", min_score=0)).results, (
            await manager.search("green tea", min_score=0)
        ).results

    quokka, tea = _host_and(tmp_path, ws, body)
    assert quokka[0].path == "memory/later.md" and tea[0].path == "MEMORY.md"


def test_ignored_folders_and_other_files_do_not_trigger(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory" / "node_modules").mkdir(parents=True)
    (ws / "memory" / ".git").mkdir()
    settings = make_settings(tmp_path, ws)
    seen: list[set[str]] = []

    async def on_change(paths):
        seen.append(paths)

    async def main():
        w = MemoryWatcher(settings, on_change, debounce_ms=100)
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run)
            await anyio.sleep(0.3)
            (ws / "memory" / "node_modules" / "pkg.md").write_text("x")
            (ws / "memory" / ".git" / "HEAD.md").write_text("x")
            (ws / "memory" / "notes.txt").write_text("x")
            await anyio.sleep(0.8)
            ignored = list(seen)
            (ws / "memory" / "real.md").write_text("x")
            with anyio.fail_after(10):
                while len(seen) == len(ignored):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        return ignored, seen

    ignored, seen = anyio.run(main)
    assert ignored == [] and seen[-1] == {str(ws / "memory" / "real.md")}


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_watching_10000_files_uses_a_fixed_number_of_fds_and_threads(tmp_path):
    ws = tmp_path / "ws"
    for d in range(100):
        folder = ws / "memory" / f"d{d:03d}"
        folder.mkdir(parents=True)
        for f in range(100):
            (folder / f"n{f:03d}.md").write_text("x")
    settings = make_settings(tmp_path, ws)

    async def main():
        fds, threads = _fds(), threading.active_count()
        w = MemoryWatcher(settings, lambda paths: anyio.sleep(0), debounce_ms=100)
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run)
            await anyio.sleep(1.0)
            during = _fds() - fds, threading.active_count() - threads
            tg.cancel_scope.cancel()
        return during

    extra_fds, extra_threads = anyio.run(main)
    assert extra_fds <= 6 and extra_threads <= 4  # two watches: an inotify fd and a thread each


def test_session_delta_thresholds(tmp_path):
    t = tmp_path / "s.jsonl"
    t.write_text("")
    tracker = SessionDeltaTracker(delta_bytes=1000, delta_messages=3)
    tracker.baseline([t])
    t.write_text('{"a": 1}\n')
    assert not tracker.observe(t)
    t.write_text('{"a": 1}\n{"b": 2}\n{"c": 3}\n')
    assert tracker.observe(t)  # three messages appended in all
    assert tracker.pending[str(t)] == [27 - 0, 0] or tracker.pending[str(t)][1] == 0
    t.write_text("x" * 1500)  # shrunk-then-grown counts as new: bytes cross the threshold
    assert tracker.observe(t)
    t.unlink()
    assert tracker.observe(t)  # deleted: sync so its rows go
    zero = SessionDeltaTracker(0, 0)
    t.write_text("y")
    assert zero.observe(t)  # 0 means any growth


def test_memsift_watch_cli_syncs_changes_and_stops_cleanly_on_ctrl_c(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false",
    }
    env.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SYNC__WATCHDEBOUNCEMS": "200"})
    proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "watch", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[dict] = []

    import queue

    q: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [q.put(line) for line in proc.stdout], daemon=True).start()

    def read_until(pred, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            lines.append(json.loads(line))
            if pred(lines[-1]):
                return lines[-1]
        proc.kill()
        raise AssertionError(f"no matching event in {lines}; stderr: {proc.stderr.read()[-2000:]}")

    read_until(lambda e: e["event"] == "ready")
    (ws / "memory" / "n.md").write_text("- a note about walruses\n")
    event = read_until(lambda e: e["event"] == "synced" and e["reason"] == "watch")
    assert event["report"]["filesIndexed"] == 1
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0


def test_a_search_sees_every_change_written_before_it_started(tmp_path):
    # Fifteen notes back to back, each searched the moment it is written: the search must see it
    # (the watcher's debounce window is long, so only the search-time check can make it visible).
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")

    async def body(manager, events):
        missed = []
        note = ws / "memory" / "2026-11-22.md"
        for i in range(15):
            with open(note, "a") as fh:
                fh.write(f"- 10:{i:02d} Order heron{i} supplies\n")
            answer = await manager.search(f"heron{i}", min_score=0)
            if not any(f"heron{i}" in h.snippet for h in answer.results) and not answer.sync_pending:
                missed.append(i)
        return missed

    assert _host_and(tmp_path, ws, body, sync={"watchDebounceMs": 1500}) == []


def test_sigterm_stops_watch_at_once_and_a_change_a_search_synced_is_reported_so(tmp_path):
    # Issue 17: SIGTERM took 2.7 s (the watch threads were left to their 5 s timeout), and a change a
    # search had already synced was logged as "1 file(s) changed" then "synced: 0 indexed".
    import queue
    import shutil
    import tempfile

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")
    runtime = tempfile.mkdtemp(prefix="msr")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false",
    }
    env.update(
        {
            "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "XDG_RUNTIME_DIR": runtime,
            "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SYNC__WATCHDEBOUNCEMS": "1000",
        }
    )
    proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "watch", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    q: queue.Queue[dict] = queue.Queue()
    threading.Thread(target=lambda: [q.put(json.loads(line)) for line in proc.stdout], daemon=True).start()

    def wait_for(pred, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if pred(event):
                return event
        proc.kill()
        raise AssertionError(f"no matching event; stderr: {proc.stderr.read()[-2000:]}")

    try:
        wait_for(lambda e: e["event"] == "resident")
        (ws / "memory" / "n.md").write_text("- a note about walruses\n")
        r = subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "search", "walruses", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert json.loads(r.stdout)["results"]  # the search synced the note, within the debounce window
        event = wait_for(lambda e: e["event"] == "synced" and e["reason"] == "watch")
        assert event["alreadyIndexed"] is True and event["report"]["filesIndexed"] == 0
        # The watch threads restarted a moment ago (after that change): stopping must not wait for them.
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - started < 2.5  # it used to wait for the watch threads' 5 s timeout
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_workspace_deleted_and_made_again_or_swapped_is_watched_again(tmp_path):
    """A watch follows a folder, not a path: after `rm -rf ws; mkdir ws` (a restore, a fresh clone) or
    `mv ws.new ws`, both watches stayed on the old folder and new notes were never indexed."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")

    async def indexed_after(events, n):
        await _wait_for(events, lambda k, p: len([s for s in _watch_syncs(events)[n:] if s["report"].files_indexed]),
                        timeout=30)

    async def body(manager, events):
        await anyio.sleep(0.3)
        shutil.rmtree(ws)
        await anyio.sleep(GUARD_S + 0.5)  # the guard sees it gone
        n = len(_watch_syncs(events))
        (ws / "memory").mkdir(parents=True)
        (ws / "memory" / "2026-12-06.md").write_text("- rebuilt the garden shed\n")
        await indexed_after(events, n)
        n = len(_watch_syncs(events))
        with open(ws / "memory" / "2026-12-06.md", "a") as fh:  # seen by the new watches, not only the guard
            fh.write("- painted the shed a zeppelin grey\n")
        await indexed_after(events, n)
        shed = (await manager.search("zeppelin grey shed", min_score=0)).results
        swapped = tmp_path / "ws.new"
        (swapped / "memory").mkdir(parents=True)
        (swapped / "memory" / "2026-12-07.md").write_text("- planted the quokka tulips\n")
        n = len(_watch_syncs(events))
        ws.rename(tmp_path / "ws.old")
        swapped.rename(ws)
        await indexed_after(events, n)
        return shed, (await manager.search("quokka tulips", min_score=0)).results

    shed, tulips = _host_and(tmp_path, ws, body)
    assert shed and shed[0].path == "memory/2026-12-06.md" and "zeppelin" in shed[0].snippet
    assert tulips and tulips[0].path == "memory/2026-12-07.md"


def test_an_extra_folder_moved_away_and_made_again_is_watched_again(tmp_path):
    """Nothing watches an extra folder's parent: after `mv notes notes.old; mkdir notes` the watch stayed
    on the moved folder, its files stayed in the index and the new folder's notes were never indexed."""
    ws, extra = tmp_path / "ws", tmp_path / "notes"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")
    extra.mkdir()
    (extra / "plants.md").write_text("- the orchid needs water every sunday\n")

    async def indexed_after(events, n, field):
        await _wait_for(events, lambda k, p: any(getattr(s["report"], field) for s in _watch_syncs(events)[n:]),
                        timeout=30)

    async def body(manager, events):
        await anyio.sleep(0.3)
        orchid = (await manager.search("orchid water sunday", min_score=0)).results
        n = len(_watch_syncs(events))
        extra.rename(tmp_path / "notes.old")
        await indexed_after(events, n, "files_removed")  # the guard: gone, and its files with it
        gone = (await manager.search("orchid water sunday", min_score=0)).results
        n = len(_watch_syncs(events))
        extra.mkdir()
        (extra / "cactus.md").write_text("- the cactus needs water once a month\n")
        await indexed_after(events, n, "files_indexed")
        n = len(_watch_syncs(events))
        (extra / "fern.md").write_text("- the fern likes the shade of the quokka shed\n")  # the new watch's
        await indexed_after(events, n, "files_indexed")
        return orchid, gone, (await manager.search("fern shade quokka", min_score=0)).results

    orchid, gone, fern = _host_and(tmp_path, ws, body, extraPaths=[str(extra)])
    assert orchid and orchid[0].path.endswith("notes/plants.md")
    assert all(not h.path.endswith("plants.md") for h in gone)
    assert fern and fern[0].path.endswith("notes/fern.md")


CONSOLE_SCRIPT = "import sys; from memsift.engine.cli import main; sys.argv[0] = 'memsift'; main()"  # its client


def test_a_hangup_stops_watch_cleanly_unless_nohup_ignores_it(tmp_path):
    """The terminal or SSH session running `memsift watch` closed: SIGHUP ended it with no cleanup
    (its resident socket and a sidecar's group left behind). It now stops as on SIGTERM; started
    under `nohup` (SIGHUP ignored) it goes on watching and answering searches."""
    import queue
    import tempfile

    runtime = tempfile.mkdtemp(prefix="msr")
    try:
        for ignored in (False, True):
            ws = tmp_path / f"ws-{ignored}"
            (ws / "memory").mkdir(parents=True)
            (ws / "MEMORY.md").write_text("# Memory\n- The kayak is stored in the boathouse.\n")
            env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
            env.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                        "XDG_RUNTIME_DIR": runtime})
            proc = subprocess.Popen(
                [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "watch", "--json"], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if ignored
                    else hangup_as_from_a_terminal)  # noqa: PLW1509
            events: queue.Queue[dict] = queue.Queue()
            threading.Thread(target=lambda p=proc: [events.put(json.loads(line)) for line in p.stdout],
                             daemon=True).start()
            try:
                while (event := events.get(timeout=120))["event"] != "resident":
                    pass
                sock = event["socket"]
                assert sock and os.path.exists(sock)
                proc.send_signal(signal.SIGHUP)
                if not ignored:
                    assert proc.wait(timeout=30) == 0
                    assert not os.path.exists(sock)  # removed on the way out
                    assert "Traceback" not in proc.stderr.read()
                    continue
                time.sleep(0.5)
                r = subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, "-w", str(ws), "search", "kayak"],
                                   env=env, capture_output=True, text=True, timeout=120)
                assert "boathouse" in r.stdout, r.stderr
                while (event := events.get(timeout=60))["event"] != "answered":
                    pass  # answered by the watch that outlived its hangup
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=30) == 0
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


HOG = """
import ctypes, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
libc = ctypes.CDLL(None, use_errno=True)
held = 0
while held < 20000 and libc.inotify_init1(0) >= 0:
    held += 1
print(held, ctypes.get_errno(), flush=True)
sys.stdin.read()  # held until the test closes stdin
"""


@pytest.mark.parametrize("sources", [["memory"], ["memory", "sessions"]])
def test_watch_polls_when_the_systems_inotify_instances_are_all_taken(tmp_path, sources):
    """An editor, a few dev servers and a file sync take the 128 inotify instances a user has by
    default: `memsift watch` (and `memsift mcp`, which watches) ended in an internal error, and with
    session transcripts a source it still did (their watch). It now says which limit and how to
    raise it, and polls: a note written then is indexed, and a transcript's growth."""
    import errno
    import queue

    if not os.path.exists("/proc/sys/fs/inotify/max_user_instances"):
        pytest.skip("no inotify on this system")
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n")
    transcript = tmp_path / "state" / "agents" / "main" / "sessions" / "s1.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                "MEMSIFT_NO_RESIDENT": "1", "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SYNC__WATCHDEBOUNCEMS": "200"})
    if "sessions" in sources:
        env.update({"MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SOURCES": json.dumps(sources),
                    "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__EXPERIMENTAL__SESSIONMEMORY": "true",
                    "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SYNC__SESSIONS__DELTABYTES": "0",
                    "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__SYNC__SESSIONS__DELTAMESSAGES": "0"})
    subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "index"], env=env,
                   capture_output=True, timeout=300, check=True)  # the model loaded before the instances go
    hog = subprocess.Popen([sys.executable, "-c", HOG], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc = None
    try:
        held, err = map(int, hog.stdout.readline().split())
        if err != errno.EMFILE:
            pytest.skip(f"could not take every inotify instance (held {held}, errno {err})")
        proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "watch", "--json"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        events: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=lambda: [events.put(json.loads(line)) for line in proc.stdout], daemon=True).start()
        while (event := events.get(timeout=120))["event"] != "ready":
            pass
        (ws / "memory" / "n.md").write_text("- a note about walruses\n")
        while (event := events.get(timeout=60))["event"] != "synced" or event["reason"] != "watch":
            assert event["event"] != "error", event
        assert event["report"]["filesIndexed"] == 1
        if "sessions" in sources:  # its folder made now, as a Gateway's first chat does
            transcript.parent.mkdir(parents=True)
            write_transcript(transcript, [("user", "where are the walrus photos?")])
            while (event := events.get(timeout=60))["event"] != "synced" or event["reason"] != "session-delta":
                assert event["event"] != "error", event
            assert event["report"]["filesIndexed"] == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        err_text = proc.stderr.read()
        assert "cannot watch for changes with inotify" in err_text and "max_user_instances" in err_text, err_text
        assert "internal error" not in err_text and "Traceback" not in err_text
    finally:
        hog.stdin.close()
        hog.wait(timeout=30)
        if proc is not None and proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("output", ["--json on stdout", "lines on stderr"])
def test_watch_stops_quietly_when_what_reads_its_lines_is_gone(tmp_path, output):
    """`memsift watch --json | head -1`, or a log shipper that exited: the next line met a broken
    pipe and the watch ended in an internal error with a crash report. It now stops, exit 0."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- The kayak is stored in the boathouse.\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
    env.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                "MEMSIFT_NO_RESIDENT": "1"})
    as_json = output.startswith("--json")
    proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws), "watch",
                             *(["--json"] if as_json else [])], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        read, other = (proc.stdout, proc.stderr) if as_json else (proc.stderr, proc.stdout)
        assert "synced" in read.readline()  # its first line, then the reader leaves
        read.close()
        (ws / "memory" / "n.md").write_text("- a note about walruses\n")  # more lines to write
        assert proc.wait(timeout=60) == 0
        left = other.read()
        assert "internal error" not in left and "Traceback" not in left, left
        assert not (tmp_path / "state" / "crashes").exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_second_watch_of_the_same_settings_says_so_and_one_of_other_settings_does_not(tmp_path):
    """Two `memsift watch` of one workspace and settings both sync every change; the second says so, with the
    first's pid and how to stop one. A watch of the same workspace for another agent is no repeat."""
    from helpers import Watch
    from memsift.engine.testing.doors import cli_env

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("- a note about walruses\n")
    command = [sys.executable, "-m", "memsift.engine.cli.main", "-w", str(ws)]
    env = cli_env(tmp_path, resident=True)
    first = Watch(command, env)
    try:
        first.wait_for(lambda e: e["event"] == "ready")
        runs = [Watch(command, env), Watch([*command, "--agent", "ops"], env)]  # another agent: another index
        for watch in runs:
            watch.wait_for(lambda e: e["event"] == "ready")
        said = [(w.stop(), w.proc.stderr.read().decode()) for w in runs]
    finally:
        assert first.stop() == 0
    assert said[0][0] == 0 and f"another `memsift watch` (pid {first.proc.pid}) already watches {ws}" in said[0][1]
    assert f"kill {first.proc.pid}" in said[0][1]
    assert "another `memsift watch`" not in said[1][1], said[1][1]


def test_the_watch_ignores_folders_that_hold_no_memory_below_its_roots_only(tmp_path):
    """A `.trash` or `node_modules` below `memory/` is no memory; a workspace that itself lives under a folder so
    named (`~/venv/agent`) is watched all the same (every change there was ignored)."""
    ws = tmp_path / "venv" / "agent"
    (ws / "memory").mkdir(parents=True)
    watcher = MemoryWatcher(make_settings(tmp_path, ws, {}), on_change=lambda _paths: anyio.sleep(0))
    assert watcher._relevant(str(ws / "memory" / "2026-11-02.md"))
    assert not watcher._relevant(str(ws / "memory" / ".trash" / "old.md"))
    assert not watcher._relevant(str(ws / "memory" / "tools" / "node_modules" / "README.md"))
