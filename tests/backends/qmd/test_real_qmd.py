"""The QMD backend against the real `qmd` 2.8.3 (installed by .ci/run; skipped when absent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from helpers import NO_REAL_QMD, make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.qmd import QmdSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.compose.fallback import FallbackSearchManager
from memsift.engine.compose.scoped import scoped


def _real_qmd() -> str | None:
    exe = shutil.which("qmd")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if "2.8.3" in out else None


QMD = _real_qmd()
pytestmark = pytest.mark.skipif(QMD is None, reason=NO_REAL_QMD)


def run(fn, *args, **kw):
    return anyio.run(lambda: fn(*args, **kw))


def _settings(tmp_path, ws, **qmd):
    return make_settings(tmp_path, ws, memory={"backend": "qmd", "qmd": {"update": {"debounceMs": 0}, **qmd}})


def _wrapped(settings):
    return scoped(FallbackSearchManager(
        lambda: QmdSearchManager(settings),
        lambda: BuiltinSearchManager(settings, provider=FakeEmbeddingProvider()),
        name="qmd",
    ), settings)


def _qmd_processes(home: Path) -> list[int]:
    """Live processes whose environment points into this QMD home."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            environ = (d / "environ").read_bytes()
            state = (d / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if str(home).encode() in environ and state != "Z":
            found.append(int(d.name))
    return found


def test_collections_update_search_status_and_get(tmp_path, example_workspace):
    settings = _settings(tmp_path, example_workspace)
    m = _wrapped(settings)
    answer = run(m.search, "Lisbon hotels")
    assert answer.backend == "qmd" and answer.mode == "search" and answer.fallback is None
    top = answer.results[0]
    assert top.path == "memory/projects/travel.md"
    lines = (example_workspace / top.path).read_text().split("\n")
    assert "Lisbon" in "\n".join(lines[top.start_line - 1 : top.end_line])
    assert run(m.search, "数据").results[0].path == "memory/2026-11-12.md"

    (example_workspace / "memory" / "2026-11-21.md").write_text(
        "# 2026-11-21\n\n- adopted Renovate for dependency updates\n"
    )
    answer = run(m.search, "Renovate")
    assert [h.path for h in answer.results] == ["memory/2026-11-21.md"]  # the update before search saw it

    st = run(m.status)
    assert st.backend == "qmd" and st.details["version"] == "2.8.3" and st.details["documents"] == 7
    assert {c["name"] for c in st.details["collections"] if c["registered"]} == {"memory-root-main", "memory-dir-main"}
    assert st.details["lastUpdateAt"] and "no local embedding model" in st.details["embedSkipped"]
    assert run(m.read, "memory/2026-11-21.md", 3, 1).text == "- adopted Renovate for dependency updates"
    user_index = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "qmd" / "memsift.sqlite"
    assert not user_index.exists()  # the user's own QMD home is never touched
    run(m.aclose)


@pytest.mark.parametrize("mode", ["vsearch", "query"])
def test_model_modes_time_out_cleanly_and_fall_back(tmp_path, example_workspace, mode):
    settings = _settings(tmp_path, example_workspace, searchMode=mode, limits={"timeoutMs": 2500})
    m = _wrapped(settings)
    run(QmdSearchManager(settings).sync)
    started = time.monotonic()
    answer = run(m.search, "Lisbon hotels", min_score=0)
    assert time.monotonic() - started < 20
    assert answer.backend == "builtin" and answer.fallback.from_ == "qmd"
    # query waits for a model download (killed at the timeout); vsearch finds nothing embedded.
    assert any(
        w in answer.fallback.reason for w in ("did not answer within 2.5 s", "exited with code", "no embeddings")
    )
    assert answer.results and answer.results[0].path == "memory/projects/travel.md"
    home = tmp_path / "state" / "agents" / "main" / "qmd"
    deadline = time.monotonic() + 5
    while _qmd_processes(home) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _qmd_processes(home) == []  # no orphaned qmd worker
    run(m.aclose)


def test_a_broken_index_mid_use_answers_from_builtin(tmp_path, example_workspace):
    settings = _settings(tmp_path, example_workspace)
    m = _wrapped(settings)
    assert run(m.search, "Lisbon").backend == "qmd"
    db = tmp_path / "state" / "agents" / "main" / "qmd" / "xdg-cache" / "qmd" / "memsift.sqlite"
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        if p.exists():
            p.write_bytes(b"garbage" * 1000)
    answer = run(m.search, "Lisbon hotels", min_score=0)
    assert answer.backend == "builtin" and answer.fallback.from_ == "qmd"
    assert answer.results[0].path == "memory/projects/travel.md"
    run(m.aclose)


def test_cli_switches_backends(tmp_path, example_workspace):
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}
    cfg = tmp_path / "c.json5"
    cfg.write_text(
        json.dumps({"memory": {"backend": "qmd"}, "agents": {"defaults": {"workspace": str(example_workspace)}}})
    )
    base = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg)]
    r = subprocess.run(
        [*base, "search", "Lisbon hotels", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["backend"] == "qmd"
    r = subprocess.run(
        [*base, "search", "Lisbon hotels", "--json", "--backend", "builtin"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["backend"] == "builtin"
    r = subprocess.run([*base, "status", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(r.stdout)["details"]["version"] == "2.8.3"



def test_index_reports_what_qmd_really_did(tmp_path, example_workspace):
    m = QmdSearchManager(_settings(tmp_path, example_workspace))
    first = run(m.sync)
    assert (first.files_indexed, first.files_seen, first.files_unchanged) == (6, 6, 0)  # indexed by `collection add`
    assert first.notes[:2] == ["collection memory-root-main added (1 new)", "collection memory-dir-main added (5 new)"]
    with open(example_workspace / "memory" / "2026-11-02.md", "a") as fh:
        fh.write("- 18:00 a line written after the first index\n")
    again = run(m.sync)
    assert (again.files_indexed, again.files_seen, again.files_unchanged) == (1, 6, 5)
    assert "qmd update: 0 new, 1 updated, 5 unchanged, 0 removed" in again.notes


def test_time_filters_and_windows_judge_qmds_hits_by_their_notes_days(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- nothing about pipelines\n")
    (ws / "memory" / "2026-10-01.md").write_text("# 2026-10-01\n- the deploy pipeline moved to canary releases\n")
    (ws / "memory" / "2026-11-03.md").write_text("# 2026-11-03\n- the deploy pipeline gained a canary dashboard\n")
    (ws / "memory" / "log.md").write_text("# Log\n## 2026-11-10 retro\n- the deploy pipeline canary review\n")
    m = QmdSearchManager(_settings(tmp_path, ws, limits={"timeoutMs": 120_000}))  # a loaded machine: no budget cut
    now = time.mktime((2026, 11, 12, 9, 0, 0, 0, 0, -1))
    answer = run(m.search, "canary pipeline", since="2026-11-01", now=now)
    assert answer.backend == "qmd" and answer.time_filter == "2026-11-01..… ('since 2026-11-01')"
    assert sorted(h.path for h in answer.results) == ["memory/2026-11-03.md", "memory/log.md"]  # a heading dates log.md
    answer = run(m.search, "canary pipeline", until="2026-10-31", now=now)
    assert [h.path for h in answer.results] == ["memory/2026-10-01.md"]
    answer = run(m.search, "canary pipeline in October", now=now)
    assert answer.time_windows == ["2026-10-01..2026-10-31 ('in October')"]
    assert answer.results[0].path == "memory/2026-10-01.md"
    run(m.aclose)
