"""The `memsift` command as a user runs it: real processes, real index, real local model."""

from __future__ import annotations

import json
import shutil
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _memsift(
    tmp_path: Path, *args: str, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    # No provider keys from the developer's shell: `auto` must pick the embedded local model.
    e = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT_NO_RESIDENT": "1",
    }
    e.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", *args],
        capture_output=True,
        text=True,
        env=e,
        cwd=cwd or tmp_path,
        timeout=300,
    )


def test_index_search_get_status_end_to_end(tmp_path, example_workspace):
    ws = str(example_workspace)
    r = _memsift(tmp_path, "-w", ws, "index", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["fullReindex"] and report["filesIndexed"] == 6 and report["chunksEmbedded"] >= 6

    r = _memsift(tmp_path, "-w", ws, "search", "what is my sister allergic to?", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["backend"] == "builtin" and answer["mode"] == "hybrid" and answer["provider"] == "local"
    top = answer["results"][0]
    assert top["path"] == "MEMORY.md" and "peanuts" in top["snippet"]
    assert {"startLine", "endLine", "score", "snippet", "source", "citation"} <= set(top)

    r = _memsift(tmp_path, "-w", ws, "search", "a828e60")
    assert r.returncode == 0 and "memory/2026-11-02.md" in r.stdout.splitlines()[0]

    r = _memsift(tmp_path, "-w", ws, "search", "zzqx nothing matches this", "--min-score", "0.99")
    assert r.returncode == 0 and "No results at or above minScore 0.99: " in r.stdout  # no hits is still success
    assert "scored lower (best 0." in r.stdout  # and why: the threshold, not an empty index

    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-02.md:3:2")
    assert r.returncode == 0
    assert r.stdout.splitlines()[0].startswith("- 09:40 Standup") and len(r.stdout.splitlines()) == 2
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-02.md", "--from", "3", "--lines", "1", "--json")
    assert json.loads(r.stdout)["text"].startswith("- 09:40 Standup")

    r = _memsift(tmp_path, "-w", ws, "status", "--json", "--deep")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["files"] == 6 and st["dirty"] is False and st["deep"]["embedding"]["ok"]
    r = _memsift(tmp_path, "-w", ws, "status")
    assert "Provider" in r.stdout and "local" in r.stdout


def test_two_workspaces_keep_their_own_indexes(tmp_path, example_workspace):
    # The workspace defaults to the current folder: searching another folder must not answer from
    # (or degrade to keyword-only on) the first folder's index, nor disturb it.
    other = tmp_path / "other"
    (other / "memory").mkdir(parents=True)
    (other / "MEMORY.md").write_text("# Other\n\n- The staging cluster runs in Frankfurt.\n")
    for ws, query, expect in ((example_workspace, "what is my sister allergic to?", "MEMORY.md"),
                              (other, "where does the staging cluster run?", "MEMORY.md"),
                              (example_workspace, "hotel shortlist for Lisbon", "memory/projects/travel.md")):
        r = _memsift(tmp_path, "search", query, "--json", cwd=ws)
        assert r.returncode == 0, r.stderr
        answer = json.loads(r.stdout)
        assert answer["mode"] == "hybrid" and not answer.get("degraded"), answer
        assert answer["results"][0]["path"] == expect
    assert len(list((tmp_path / "state" / "memory").glob("main-*.sqlite"))) == 2


def test_stdout_is_only_results(tmp_path, example_workspace):
    r = _memsift(tmp_path, "-w", str(example_workspace), "-vv", "search", "ledger", "--json")
    assert r.returncode == 0
    json.loads(r.stdout)  # logs went to stderr
    assert "sync done" in r.stderr


def test_config_show_prints_the_resolved_config(tmp_path, example_workspace):
    cfg = tmp_path / "c.json5"
    cfg.write_text(
        "{agents: {defaults: {memorySearch: {query: {hybrid: {vectorWeight: 0.6, textWeight: 0.2}}, remote: {apiKey: 'sk-live-abc'}}}}}"  # noqa: E501
    )
    r = _memsift(tmp_path, "-c", str(cfg), "-w", str(example_workspace), "config", "show")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["memorySearch"]["query"]["hybrid"]["vectorWeight"] == pytest.approx(0.75)
    assert data["agentId"] == "main" and Path(data["storePath"]).name.startswith("main-")
    assert "sk-live-abc" not in r.stdout


def test_config_show_key_prints_one_setting_and_where_it_came_from(tmp_path, example_workspace):
    """`memsift config show KEY` (and the names other tools give: `config get`, `config set`): one
    setting, its source on stderr; before, only the whole document, and "No such command 'get'"."""
    cfg = tmp_path / "c.json5"
    cfg.write_text("{memory: {backend: 'builtin'}, agents: {defaults: {memorySearch: {query: {maxResults: 4},"
                   " remote: {apiKey: 'sk-live-abc'}}}}}")
    ws = str(example_workspace)

    def show(*key: str):
        return _memsift(tmp_path, "-c", str(cfg), "-w", ws, "config", *key)

    for key in ("agents.defaults.memorySearch.query.maxResults", "memorySearch.query.max_results"):
        r = show("show", key)
        assert r.returncode == 0 and r.stdout == "4\n", (r.stdout, r.stderr)
        assert f"{cfg}: agents.defaults.memorySearch.query.maxResults" in r.stderr, r.stderr
    r = show("show", "memory.backend")
    assert r.stdout == "builtin\n" and "memory.backend from" in r.stderr
    r = show("show", "memorySearch.query.hybrid.vectorWeight")
    assert r.stdout == "0.7\n" and "is memsift's default" in r.stderr, r.stderr
    r = show("show", "memorySearch.query")
    assert json.loads(r.stdout)["maxResults"] == 4 and "memorySearch.query (the rest) is memsift's default" in r.stderr
    r = show("show", "memorySearch.remote.apiKey")
    assert r.returncode == 0 and "sk-live-abc" not in r.stdout + r.stderr and r.stdout.strip() == "**********"
    for args, said in ((("show", "memorySearch.query.maxResult"), "Did you mean 'memorySearch.query.maxResults'?"),
                       (("show", "memory.backend.kind"), "is a value"),
                       (("get", "memory.backend"), "Did you mean 'memsift config show KEY'?"),
                       (("set", "memory.backend", "qmd"), "never changes it; edit the file")):
        r = show(*args)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "backend: 'builtin'" in cfg.read_text()  # `set` changed nothing


def test_exit_codes(tmp_path, example_workspace):
    ws = str(example_workspace)
    bad = tmp_path / "bad.json5"
    bad.write_text("{agents: {defaults: {memorySearch: {chunking: {tokns: 3}}}}}")
    r = _memsift(tmp_path, "-c", str(bad), "-w", ws, "search", "x")
    assert r.returncode == 3 and "agents.defaults.memorySearch.chunking.tokns" in r.stderr

    r = _memsift(tmp_path, "-w", ws, "get", "../../etc/passwd")
    assert r.returncode == 6 and "path not allowed" in r.stderr

    store = tmp_path / "dir-not-db"
    store.mkdir()
    cfg = tmp_path / "store.json5"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"store": {"path": str(store)}}}}}))
    r = _memsift(tmp_path, "-c", str(cfg), "-w", ws, "search", "ledger")
    assert r.returncode == 4 and "not a regular file" in r.stderr

    r = _memsift(tmp_path, "-w", ws, "search")
    assert r.returncode == 2  # usage

    off = tmp_path / "off.json5"
    off.write_text("{agents: {defaults: {memorySearch: {enabled: false}}}}")
    r = _memsift(tmp_path, "-c", str(off), "-w", ws, "search", "x")
    assert r.returncode == 3 and "disabled" in r.stderr


def test_a_search_that_runs_out_of_its_sync_budget_says_the_index_is_catching_up(tmp_path, example_workspace):
    # Issue 17: a cold search whose sync outran the 2 s budget printed "No results." and an
    # asyncio CancelledError traceback; only --json said syncPending.
    from provider_server import ProviderServer

    with ProviderServer("gemini") as server:
        cfg = tmp_path / "c.json"
        cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {
            "provider": "gemini", "remote": {"baseUrl": server.base_url, "apiKey": "test-key-123456789"}}}}}))
        ws = str(example_workspace)
        assert _memsift(tmp_path, "-c", str(cfg), "-w", ws, "index").returncode == 0
        with open(example_workspace / "memory" / "2026-11-12.md", "a") as fh:
            fh.write("- 18:00 The walrus lagoon permit arrived.\n")
        server.batch_delay = 6.0  # indexing the change outlasts the search's budget; queries stay fast
        r = _memsift(tmp_path, "-c", str(cfg), "-w", ws, "search", "walrus lagoon permit")
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr and "CancelledError" not in r.stderr, r.stderr
        assert "still catching up" in r.stdout and "memsift index" in r.stdout, r.stdout
        r = _memsift(tmp_path, "-c", str(cfg), "-w", ws, "search", "walrus lagoon permit", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["syncPending"] is True
        assert "Traceback" not in r.stderr, r.stderr
        server.batch_delay = 0.0
        r = _memsift(tmp_path, "-c", str(cfg), "-w", ws, "search", "walrus lagoon permit", "--json")
        answer = json.loads(r.stdout)  # the interrupted sync left the index whole: the next one finishes
        assert not answer.get("syncPending") and answer["results"][0]["path"] == "memory/2026-11-12.md"


def test_a_wrong_workspace_is_never_silent(tmp_path, example_workspace):
    # Issue 17: a missing folder, a config naming one, a folder with no memory files, and a run
    # from inside memory/ all printed "No results.", exited 0 and created another index.
    r = _memsift(tmp_path, "-w", str(tmp_path / "nonexistent" / "ws"), "search", "ledger")
    assert r.returncode == 3 and "does not exist" in r.stderr and "nonexistent" in r.stderr, r.stderr
    cfg = tmp_path / "c.json5"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(tmp_path / "gone")}}}))
    r = _memsift(tmp_path, "-c", str(cfg), "search", "ledger")
    assert r.returncode == 3 and "agents.defaults.workspace" in r.stderr and "does not exist" in r.stderr, r.stderr
    assert not list((tmp_path / "state").glob("memory/*.sqlite"))  # no index was made for them

    empty = tmp_path / "empty"
    empty.mkdir()
    r = _memsift(tmp_path, "-w", str(empty), "search", "ledger")
    assert r.returncode == 0 and "no memory files" in r.stderr, r.stderr

    # From inside a workspace's memory/ (or -w pointing there), the workspace is found upward.
    inside = example_workspace / "memory" / "projects"
    for args, cwd in (
        (("search", "Lisbon hotel shortlist", "--json"), inside),
        (("-w", str(example_workspace / "memory"), "search", "Lisbon hotel shortlist", "--json"), tmp_path),
    ):
        r = _memsift(tmp_path, *args, cwd=cwd)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["results"][0]["path"] == "memory/projects/travel.md"
        assert "no memory files" not in r.stderr


def test_note_from_a_folder_that_is_not_a_workspace_creates_nothing(tmp_path, example_workspace):
    stray = tmp_path / "stray"
    stray.mkdir()
    r = _memsift(tmp_path, "note", "Order heron supplies", cwd=stray)
    assert r.returncode == 3 and "not a memory workspace" in r.stderr and "-w" in r.stderr, r.stderr
    assert not (stray / "memory").exists()
    # From inside a workspace's memory/ folder, the note goes to that workspace.
    r = _memsift(tmp_path, "note", "Order heron supplies", cwd=example_workspace / "memory")
    assert r.returncode == 0 and r.stdout.startswith("memory/"), r.stderr
    assert not (example_workspace / "memory" / "memory").exists()
    # A new workspace named explicitly is created, and the CLI says so.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    r = _memsift(tmp_path, "-w", str(fresh), "note", "First note")
    assert r.returncode == 0 and (fresh / "memory").is_dir() and "created" in r.stderr, r.stderr


def test_get_accepts_what_search_prints(tmp_path, example_workspace):
    # Issue 17: the hit header (`path:5-8`) and the citation (`path#L1-L3`) were refused with
    # "only .md memory files can be read".
    ws = str(example_workspace)
    day = (example_workspace / "memory" / "2026-11-05.md").read_text().split("\n")
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-05.md:4-6")
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n").split("\n") == day[3:6]
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-05.md#L1-L3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["path"] == "memory/2026-11-05.md" and got["text"].split("\n") == day[:3] and got["from"] == 1
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-05.md#L6")
    assert r.stdout.rstrip("\n") == day[5]

    # The header of a real hit, as printed, goes straight back in.
    r = _memsift(tmp_path, "-w", ws, "search", "Lisbon trip with Lena", "-n", "1")
    header = r.stdout.split("\n")[0].split()[1]
    r = _memsift(tmp_path, "-w", ws, "get", header)
    assert r.returncode == 0 and "Lisbon" in r.stdout, (header, r.stderr)


def test_get_of_a_missing_file_or_past_the_end_says_so(tmp_path, example_workspace):
    ws = str(example_workspace)
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2031-01-01.md")
    assert r.returncode == 1 and "does not exist" in r.stderr and r.stdout == "", r.stderr
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2026-11-05.md:40-45")
    assert r.returncode == 1 and "7 lines" in r.stderr and "40" in r.stderr, r.stderr
    r = _memsift(tmp_path, "-w", ws, "get", "memory/2031-01-01.md", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["missing"] is True


def _on_a_terminal(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """Run memsift with stderr on a pseudo-terminal (as in a shell); returns (exit, stdout, terminal output)."""
    import pty

    master, slave = pty.openpty()
    e = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
        "MEMSIFT_NO_RESIDENT": "1",
    }
    e.update({"MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "COLUMNS": "120",
              "TERM": "xterm"})
    proc = subprocess.Popen([sys.executable, "-m", "memsift.engine.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=slave, env=e, cwd=tmp_path)
    os.close(slave)
    seen = bytearray()
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        seen += data
    out = proc.stdout.read().decode()
    proc.wait(timeout=300)
    os.close(master)
    return proc.returncode, out, seen.decode(errors="replace")


def test_long_work_shows_progress_on_a_terminal(tmp_path, example_workspace):
    # Issue 17: `memsift index` showed "0/?" then jumps of 256 with no rate or ETA, and a first
    # search that had to build the index printed nothing meanwhile.
    for i in range(30):
        body = "\n".join(f"- {i}.{j} " + "notes about the quarterly planning offsite agenda " * 8 for j in range(8))
        (example_workspace / "memory" / f"2026-09-{i % 28 + 1:02d}-{i}.md").write_text(body + "\n")
    code, _out, term = _on_a_terminal(tmp_path, "-w", str(example_workspace), "index")
    assert code == 0, term
    assert "checking files" in term and "embedding chunks" in term and "chunks/s" in term, term
    assert "0/?" not in term

    other = tmp_path / "other"
    shutil.copytree(example_workspace, other)
    code, out, term = _on_a_terminal(tmp_path, "-w", str(other), "search", "quarterly planning offsite")
    assert code == 0 and "memory/2026-09-" in out
    assert "building the index" in term, term
    # Not on a terminal: nothing but the results (and nothing at all once the index exists).
    r = _memsift(tmp_path, "-w", str(other), "search", "quarterly planning offsite")
    assert r.returncode == 0 and r.stderr == ""


def test_rescued_hits_are_marked_in_plain_and_json_output(tmp_path, example_workspace):
    # Issue 17: `--min-score 0.9` returned hits scoring 0.27-0.49 with nothing saying why.
    ws = str(example_workspace)
    r = _memsift(tmp_path, "-w", ws, "search", "a828e60", "--min-score", "0.9", "--json")
    hits = json.loads(r.stdout)["results"]
    assert hits and all(h["score"] < 0.9 and h["rescued"] is True for h in hits), hits
    r = _memsift(tmp_path, "-w", ws, "search", "a828e60", "--min-score", "0.9")
    first = r.stdout.split("\n")[0]
    assert first.startswith(f"{hits[0]['score']:.3f} memory/2026-11-02.md") and "rescued" in first, r.stdout
    r = _memsift(tmp_path, "-w", ws, "search", "Lisbon trip with Lena", "--json", "-n", "1")
    assert "rescued" not in json.loads(r.stdout)["results"][0]  # a hit over the threshold carries no mark


def _status(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    r = _memsift(tmp_path, *args, "status")
    return r, r.stdout.split("\n")


def test_status_says_what_a_search_would_do_right_now(tmp_path, example_workspace):
    # Issue 17: status said "FTS unavailable" before the first index, "hybrid" while searches were
    # keyword-only, "Dirty yes (0 file(s) changed)", buried why search went keyword-only at the end
    # of a long list, and failed with exit 5 when the local model path was wrong.
    ws = str(example_workspace)
    r, lines = _status(tmp_path, "-w", ws)
    assert r.returncode == 0 and lines[0].startswith("Searches") and "build the index first" in lines[0], r.stdout
    assert "FTS" not in r.stdout or "not built yet" in r.stdout
    assert "unavailable" not in r.stdout

    auto_bad = tmp_path / "auto-bad.json5"
    auto_bad.write_text(
        json.dumps({"agents": {"defaults": {"memorySearch": {"local": {"modelPath": "/nope/model.onnx"}}}}})
    )
    assert _memsift(tmp_path, "-c", str(auto_bad), "-w", ws, "index").returncode == 0
    r, lines = _status(tmp_path, "-c", str(auto_bad), "-w", ws)
    assert r.returncode == 0 and lines[0].startswith("Searches") and "keyword only" in lines[0], r.stdout
    assert (
        "/nope/model.onnx" in lines[0]
        and lines[0].index("/nope/model.onnx") < lines[0].find("API key")
        or "API key" not in lines[0]
    )

    local_bad = tmp_path / "local-bad.json5"
    local_bad.write_text(
        json.dumps(
            {
                "agents": {
                    "defaults": {"memorySearch": {"provider": "local", "local": {"modelPath": "/nope/model.onnx"}}}
                }
            }
        )
    )
    r, lines = _status(tmp_path, "-c", str(local_bad), "-w", ws)
    assert r.returncode == 0 and "fail" in lines[0] and "/nope/model.onnx" in lines[0], (r.stdout, r.stderr)

    # The index was built keyword-only (the bad path above); with the default provider a search
    # answers keyword-only until `memsift index` rebuilds, and status says exactly that.
    r, lines = _status(tmp_path, "-w", ws)
    assert "keyword only until `memsift index`" in lines[0] and "embedding provider changed" in lines[0], r.stdout
    mode = next(line for line in lines if line.startswith("Search mode"))
    assert "fts-only" in mode
    assert "(0 file(s) changed)" not in r.stdout
    answer = json.loads(_memsift(tmp_path, "-w", ws, "search", "Lisbon trip", "--json").stdout)
    assert answer["mode"] == "fts-only"  # what status said
    # A note written meanwhile is found by keyword before the rebuild (it was not until `memsift index`).
    (example_workspace / "memory" / "2026-11-30.md").write_text("- Booked the zqferry to Bornholm.\n")
    answer = json.loads(_memsift(tmp_path, "-w", ws, "search", "zqferry", "--json").stdout)
    assert [h["path"] for h in answer["results"]] == ["memory/2026-11-30.md"] and answer["mode"] == "fts-only"
    r, lines = _status(tmp_path, "-w", ws)
    assert "keyword only until `memsift index`" in lines[0] and "changed file" not in lines[0], r.stdout

    assert _memsift(tmp_path, "-w", ws, "index").returncode == 0
    (example_workspace / "MEMORY.md").write_text((example_workspace / "MEMORY.md").read_text() + "- one more fact\n")
    r, lines = _status(tmp_path, "-w", ws)
    assert lines[0].startswith("Searches") and "hybrid" in lines[0] and "first syncs 1 changed file" in lines[0], (
        r.stdout
    )


def test_small_outputs_say_what_happened(tmp_path, example_workspace):
    ws = str(example_workspace)
    # An empty query: not "0 result(s) · none · None · 0 ms".
    r = _memsift(tmp_path, "-w", ws, "search", "   ")
    assert r.returncode == 0 and "None" not in r.stdout and "empty query" in r.stdout.lower(), r.stdout
    # A scope denial (no QMD process is started for it).
    r = _memsift(tmp_path, "-w", ws, "-b", "qmd", "search", "hotels", "--session-key", "agent:main:discord:group:42")
    assert r.returncode == 0 and "Denied by scope" in r.stdout and "None" not in r.stdout, r.stdout
    # `note ""` is a usage error, not "path not allowed".
    r = _memsift(tmp_path, "-w", ws, "note", "")
    assert r.returncode == 2 and "needs some text" in r.stderr and "path not allowed" not in r.stderr, r.stderr
    # config show prints integers as integers.
    data = json.loads(_memsift(tmp_path, "-w", ws, "config", "show").stdout)
    assert data["memorySearch"]["query"]["hybrid"]["candidateMultiplier"] == 4
    assert "4.0" not in json.dumps(data["memorySearch"]["query"]) and '"maxInjectedChars": 4000,' in json.dumps(
        data, indent=1
    ).replace("\n", "")
    assert isinstance(data["memory"]["qmd"]["limits"]["maxResults"], int)
    # -vv shows more than -v: how the config resolved and how the search went.
    _memsift(tmp_path, "-w", ws, "search", "ledger")  # both below on a built index
    v = _memsift(tmp_path, "-w", ws, "-v", "search", "ledger")
    vv = _memsift(tmp_path, "-w", ws, "-vv", "search", "ledger")
    assert "config resolved" in vv.stderr and "search done" in vv.stderr
    assert "config resolved" not in v.stderr and len(vv.stderr.splitlines()) > len(v.stderr.splitlines())


def test_coverage_settings_get_their_own_index(tmp_path, example_workspace):
    # Issue 17: running with and without a config that adds extraPaths flipped one index between
    # "rebuild needed" states, and searches dropped to keyword-only.
    ws = str(example_workspace)
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "deploy.md").write_text("# Deploy\n\n- Canary first, then the zebra cluster.\n")
    cfg = tmp_path / "extra.json5"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"extraPaths": [str(tmp_path / "runbooks")]}}}}))
    for args, query, expect in (((), "Lisbon trip with Lena", "memory/projects/travel.md"),
                                (("-c", str(cfg)), "zebra cluster canary", "../runbooks/deploy.md"),
                                ((), "Lisbon trip with Lena", "memory/projects/travel.md"),
                                (("-c", str(cfg)), "zebra cluster canary", "../runbooks/deploy.md")):
        r = _memsift(tmp_path, *args, "-w", ws, "search", query, "--json")
        answer = json.loads(r.stdout)
        assert answer["mode"] == "hybrid" and not answer.get("degraded"), answer
        assert answer["results"][0]["path"] == expect
    assert len(list((tmp_path / "state" / "memory").glob("main-*.sqlite"))) == 2


def test_index_list_and_prune(tmp_path, example_workspace):
    gone = tmp_path / "gone"
    shutil.copytree(example_workspace, gone)
    for ws in (example_workspace, gone):
        assert _memsift(tmp_path, "-w", str(ws), "index").returncode == 0
    folder = tmp_path / "state" / "memory"
    (folder / "notes.sqlite").write_bytes(b"not memsift's")  # something else in the folder: never touched
    shutil.rmtree(gone)

    r = _memsift(tmp_path, "-w", str(example_workspace), "index", "--list", "--json")
    assert r.returncode == 0, r.stderr
    listed = {Path(i["workspace"]).name: i for i in json.loads(r.stdout)["indexes"]}
    assert set(listed) == {example_workspace.name, "gone"}
    assert listed["gone"]["workspaceExists"] is False and listed[example_workspace.name]["workspaceExists"] is True
    r = _memsift(tmp_path, "-w", str(example_workspace), "index", "--list")
    assert "workspace missing" in r.stdout and str(gone) in r.stdout

    r = _memsift(tmp_path, "-w", str(example_workspace), "index", "--prune")
    assert r.returncode == 0 and "removed" in r.stdout and str(gone) in r.stdout, r.stdout
    assert not Path(listed["gone"]["path"]).exists() and not list(folder.glob(Path(listed["gone"]["path"]).name + "*"))
    assert (
        Path(listed[example_workspace.name]["path"]).exists()
        and (folder / "notes.sqlite").read_bytes() == b"not memsift's"
    )
    r = _memsift(tmp_path, "-w", str(example_workspace), "index", "--prune")
    assert r.returncode == 0 and "nothing to remove" in r.stdout.lower()


def test_prune_removes_only_memsifts_own_files(tmp_path, example_workspace):
    """--prune deletes an index's quarantined copies by memsift's own names only, and never
    follows a symlink at its lock (as every other clean-up of memsift's)."""
    gone = tmp_path / "gone"
    shutil.copytree(example_workspace, gone)
    assert _memsift(tmp_path, "-w", str(gone), "index").returncode == 0
    db = next((tmp_path / "state" / "memory").glob("main-*.sqlite"))
    theirs = db.with_name(f"{db.name}.corrupt-notes")  # not a name memsift gives
    theirs.write_text("someone else's file\n")
    outside = tmp_path / "outside.txt"  # a symlink at the lock must not be followed (nor created)
    Path(f"{db}.lock").unlink(missing_ok=True)
    Path(f"{db}.lock").symlink_to(outside)
    shutil.rmtree(gone)
    r = _memsift(tmp_path, "index", "--prune")
    assert r.returncode == 0, r.stderr
    assert theirs.read_text() == "someone else's file\n" and not outside.exists()


def test_search_since_until_and_the_time_a_question_names(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-10-01.md").write_text("- the deploy pipeline moved to canary releases\n")
    (ws / "memory" / "2026-11-01.md").write_text("- the deploy pipeline gained a canary dashboard\n")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}))
    r = _memsift(
        tmp_path, "-c", str(cfg), "--workspace", str(ws), "search", "canary pipeline", "--until", "2026-10-31", "--json"
    )
    assert r.returncode == 0, r.stderr
    assert [h["path"] for h in json.loads(r.stdout)["results"]] == ["memory/2026-10-01.md"]
    r = _memsift(
        tmp_path,
        "-c",
        str(cfg),
        "--workspace",
        str(ws),
        "search",
        "canary pipeline in October 2026",
        "--explain",
        "--min-score",
        "0",
    )
    assert r.returncode == 0, r.stderr
    assert "time named in the question: 2026-10-01..2026-10-31 ('in October 2026')" in r.stdout
    assert "day=2026-10-01 (file name)" in r.stdout
    r = _memsift(tmp_path, "--workspace", str(ws), "search", "canary", "--since", "someday")
    assert r.returncode == 2 and "since 'someday' is not a date" in r.stderr and "Traceback" not in r.stderr


def test_a_first_search_off_a_terminal_says_in_one_line_that_it_builds_the_index(tmp_path, example_workspace):
    """Off a terminal there is no bar, but the wait of a first search (seconds over a thousand
    files) is said once on stderr, for a script's log; a later search says nothing."""
    for as_json in ((), ("--json",)):
        state = tmp_path / f"state{len(as_json)}"
        first = _memsift(tmp_path, "-w", str(example_workspace), "search", "ledger", *as_json,
                         env={"MEMSIFT_STATE_DIR": str(state)})
        assert first.returncode == 0
        said = [line for line in first.stderr.splitlines() if "building the index" in line]
        assert len(said) == 1 and str(example_workspace) in said[0], first.stderr
        again = _memsift(tmp_path, "-w", str(example_workspace), "search", "ledger", *as_json,
                         env={"MEMSIFT_STATE_DIR": str(state)})
        assert "building the index" not in again.stderr


_CONSOLE_SCRIPT = "import sys; from memsift.engine.cli import main; sys.argv[0] = 'memsift'; main()"


@pytest.mark.parametrize("entry", [["-c", _CONSOLE_SCRIPT], ["-m", "memsift.engine.cli.main"]])
def test_a_command_started_with_closed_standard_streams_works_and_keeps_the_index_whole(tmp_path, example_workspace,
                                                                                         entry):
    """Started with stdout or stderr closed (`>&-`, a service manager), a command died with a traceback
    or silently (exit 1, nothing indexed), and the first file it opened would have taken the closed
    descriptor: the index written to by whatever prints. Now a closed stream is the null device."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}, "MEMSIFT_NO_RESIDENT": "1",
           "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}

    def run(*args: str, close: tuple[int, ...]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *entry, "-w", str(example_workspace), *args], env=env,
                              capture_output=True, text=True, timeout=300,
                              preexec_fn=lambda: [os.close(fd) for fd in close])  # noqa: PLW1509

    assert run("index", close=(1, 2)).returncode == 0
    status = run("status", "--json", close=())
    assert json.loads(status.stdout)["files"] > 0, status.stderr
    quiet = run("search", "ledger database", close=(1,))
    assert quiet.returncode == 0 and "Traceback" not in quiet.stderr, quiet.stderr[-2000:]
    loud = run("search", "ledger database", "--json", close=(2,))
    assert loud.returncode == 0 and json.loads(loud.stdout)["results"]
    deep = run("status", "--json", "--deep", close=())
    assert json.loads(deep.stdout)["deep"]["integrity"] == "ok", deep.stdout[-2000:]


def test_a_terminal_that_is_not_unicode_gets_every_note_without_a_traceback(tmp_path):
    """stdout in latin-1 (`PYTHONIOENCODING`, an old locale) ended a search whose snippet held an emoji
    or CJK text with a UnicodeEncodeError traceback. Text escapes what the terminal lacks; JSON is
    escaped to ASCII, so it stays valid and reads back to the note's own characters."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    line = "Data pipeline review 数据管道 Ünïcødé ✓ 🎉"
    (ws / "memory" / "2026-12-03.md").write_text(f"## Review\n{line}\n")
    env = {"PYTHONIOENCODING": "latin-1", "MEMSIFT_NO_RESIDENT": "1"}  # the helper's side: test_resident_helper.py
    for entry in (["-c", _CONSOLE_SCRIPT], ["-m", "memsift.engine.cli.main"]):
        for fmt in ([], ["--json"]):
            r = subprocess.run([sys.executable, *entry, "-w", str(ws), "search", "data pipeline review", *fmt],
                               capture_output=True, env={**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
                                                         "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **env}, timeout=300)
            assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr[-2000:]
            out = r.stdout.decode("latin-1")
            if fmt:
                assert line in json.loads(out)["results"][0]["snippet"]
            else:
                assert "Ünïcødé" in out and "\\U0001f389" in out and "\\u6570" in out


def test_an_openclaw_command_that_is_no_command_line_or_not_openclaw_is_one_line(tmp_path):
    """`--openclaw` with an unclosed quote ended in shlex's traceback; another program's failing
    `--version` (coreutils `false` prints its licence) was shown whole, as `openclaw --version`."""
    for args in (["install", "--openclaw", '"unterminated'], ["uninstall", "--openclaw", "gateway\\"]):
        r = _memsift(tmp_path, "openclaw", *args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "Invalid value for --openclaw" in r.stderr and "is no command line" in r.stderr
    fake = tmp_path / "not-openclaw"
    fake.write_text("#!/bin/sh\necho 'Copyright (C) Someone'\necho 'NO WARRANTY'\nexit 1\n")
    fake.chmod(0o755)
    r = _memsift(tmp_path, "openclaw", "install", "--openclaw", str(fake))
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"`{fake} --version` failed (its last line: 'NO WARRANTY'): is it OpenClaw?" in r.stderr
