"""One search, every door: the same options give the same answer through the cold CLI, the CLI
answered by the resident helper, the CLI answered by `memsift watch`, MCP over stdio, MCP over
streamable HTTP and the Python API — hits, scores (to float noise), snippets, citations, the time
filter and windows, degraded reasons, denials, and for a refused option the same exit code (2) or
MCP tool error naming the same option. Option sets are drawn by hypothesis (derandomized), plus
the edge cases people hit (a date that is no date, an empty key, a denied chat, an empty query).

Then: every citation a search prints reads back through `memsift get` and `memory_get` without
error, and no hit's endLine passes its file's last line — on builtin, QMD and Postgres.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
from datetime import date, timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from figures import FIGURES
from helpers import (CHAT_QUESTION, CHAT_SESSIONS, EXAMPLE_WORKSPACE, RESIDENT_DRIVER, HttpMcp, stop_helpers,
                     wait_for_socket, write_files)
from time_workspace import DOORS_DAY, topic_questions, write_time_workspace
from memsift.engine.requests import ReadOptions, SearchOptions, spellings
from memsift.engine.search.clock import parse_now

pytest.importorskip("mcp", reason="the MCP doors need the MCP SDK (a default dependency: pip install -e .)")

DOORS = ("cold-cli", "helper", "watch", "mcp-stdio", "mcp-http", "api")
DOORS_ZONE = "Pacific/Kiritimati"  # UTC+14: its noon is this machine's night before, if the machine runs in UTC
QUERIES = [
    "which database did we pick for the ledger?",
    "Marco certificates",
    "数据管道",
    "what happened last week?",
    "",
]
DENIED = "agent:main:discord:group:42"
# Names with accents: one question typed with them, decomposed (as pasted from a macOS file name), or without.
ACCENTED_CHAT = {"memory/2026-03-20.md": "# Session 4 — 2026-03-20 19:00 (Elena & Marcus)\n"
                 "[D4:1] Marcus: Jürgen Müller fixed the roof on Tuesday; his invoice came to €420.\n"
                 "[D4:2] Elena: Cheaper than the quote from Zoë's builder.\n",
                 # Letters no accent-stripping reaches, which people type without them: tromso, lodz, strasse.
                 "memory/2026-03-21.md": "# Session 5 — 2026-03-21 18:00 (Elena & Marcus)\n"
                 "[D5:1] Marcus: Małgorzata rented the cabin in Tromsø; the keys wait at Hauptstraße 9 in Łódź.\n"
                 # Soft hyphens, as text copied from a web page holds them: invisible, inside words.
                 "[D5:2] Elena: The se\u00admi\u00adnar on Born\u00adholm starts at nine.\n"}
ACCENTED_QUESTION = "What did Jürgen Müller charge for fixing the roof?"
# The old versions and deleted notes sync tools and note apps keep beside the notes.
STALE_COPIES = {"memory/.stversions/2026-11-02~20261101-101010.md": "- The ledger's zqstale code was 1111.\n",
                "memory/.trash/ledger.md": "- The ledger's zqstale code was 2222 (deleted).\n"}
# A checklist, as `memsift note "[ ] …"` writes one: its boxes are punctuation, which no keyword index holds.
CHECKLIST = {"memory/projects/errands.md": "# Errands\n\n- 09:41 [ ] renew the passport\n- 09:42 [ ] book the ferry\n"}
# A sync tool's conflict copies of a note: memory, but the same text twice is one hit, cited by the note.
CONFLICT_COPIES = {name: "- The shed's zqpadlock code is 4417.\n" for name in (
    "memory/projects/shed.md", "memory/projects/shed.sync-conflict-20261103-101010-ABCDEFG.md",
    "memory/projects/shed (conflicted copy 2026-11-03).md")}
SCOPE = {"default": "deny", "rules": [{"action": "allow", "match": {"chatType": "direct"}}]}


def _field(model, spelled: str, door: str) -> str:
    """The model field a door's spelling names (`--max-results`, `maxResults` → max_results)."""
    for name in model.model_fields:
        extra = spellings(model, name)
        if spelled == name or spelled in (extra.get("cli") or []) or spelled == extra.get("mcp"):
            return name
    return spelled


def _normal(doc: dict) -> dict:
    """An answer document (CLI/API JSON or MCP's SearchOutput) as the matrix compares it."""
    hits = []
    for h in doc.get("results") or []:
        snippet = h["snippet"]
        if h.get("citation") and snippet.rstrip().endswith(f"Source: {h['citation']}"):  # MCP decorates its snippets
            snippet = snippet.rstrip()[: -len(f"Source: {h['citation']}")]
        hits.append((h["path"], h["startLine"], h["endLine"], round(h["score"], 4), h.get("citation"), snippet.strip(),
                     bool(h.get("rescued"))))
    degraded = doc.get("degraded") or {}
    below = doc.get("belowMinScore")
    return {
        "invalid": None,
        "hits": hits,
        "timeFilter": doc.get("timeFilter"),
        "timeWindows": doc.get("timeWindows"),
        "timeOnly": doc.get("timeOnly"),
        "timeWindowDays": doc.get("timeWindowDays"),
        "timeNote": doc.get("timeNote"),
        "vector": degraded.get("vector"),
        "fts": degraded.get("fts"),
        "denied": (doc.get("denied") or {}).get("rule"),
        "below": (below["candidates"], round(below["bestScore"], 4)) if below else None,
        "mode": doc.get("mode") if hits or doc.get("denied") else None,
    }


def _invalid(field: str) -> dict:
    return {"invalid": field}


class StdioMcp:
    """`memsift mcp` over stdio, spoken as a client does: one JSON-RPC line per request."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(cmd + ["mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.buf, self.next_id = b"", 1
        self.call(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + 120
        while b"\n" not in self.buf:
            assert time.monotonic() < deadline, "no answer over stdio"
            if select.select([self.proc.stdout], [], [], 0.2)[0]:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert chunk, "the stdio server ended"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class Doors:
    """Every door onto one workspace and config, set up once for the module."""

    def __init__(self, root: Path, backend: str = "builtin") -> None:
        self.backend = backend
        self.ws = root / "ws"
        shutil.copytree(EXAMPLE_WORKSPACE, self.ws)
        # Every door asks as of DOORS_DAY ($MEMSIFT_NOW; the API's now=), so no answer depends on the day the
        # suite runs. Yesterday's note, for the time-only questions:
        yesterday = (DOORS_DAY - timedelta(days=1)).isoformat()
        (self.ws / "memory" / f"{yesterday}.md").write_text(
            f"# {yesterday}\n\n- Fixed the flaky login test; paired with Helga on the billing export.\n")
        write_files(self.ws, CHAT_SESSIONS)  # chat sessions of two named people, for the evidence ranker
        write_files(self.ws, ACCENTED_CHAT)
        write_files(self.ws, STALE_COPIES)  # no memory: never found, by any door
        write_files(self.ws, CHECKLIST)
        write_files(self.ws, CONFLICT_COPIES)
        # Notes dated relative to that day, for questions that name a topic and a time (tests/time_workspace.py).
        self.time = write_time_workspace(self.ws, DOORS_DAY, with_memory_md=False)
        self.cfg = root / "cfg.json"
        # A generous answer bound: MCP would cut the last snippets at 4,000 characters, by design.
        # The user lives in DOORS_ZONE (OpenClaw's key): every door reads DOORS_DAY and its "yesterday" there, a
        # day ahead of this machine's evening if it runs in UTC.
        self.cfg.write_text(json.dumps({"stateDir": str(root / "state"), "memory": {"backend": backend, "qmd": {
            "scope": SCOPE, "limits": {"maxInjectedChars": 50_000}}}, "agents": {"defaults": {
                "userTimezone": DOORS_ZONE}}}))
        base = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")}
        base["MEMSIFT_NOW"] = DOORS_DAY.isoformat()
        self.runtime = {d: Path(tempfile.mkdtemp(prefix=f"msd{d[:2]}")) for d in ("helper", "watch", "other")}
        self.env = {"cold": {**base, "MEMSIFT_NO_RESIDENT": "1", "XDG_RUNTIME_DIR": str(self.runtime["other"])},
                    "helper": {**base, "XDG_RUNTIME_DIR": str(self.runtime["helper"])},
                    "watch": {**base, "XDG_RUNTIME_DIR": str(self.runtime["watch"]),
                              "MEMSIFT__MEMORY__RESIDENTHELPER__ENABLED": "false"}}
        self.cmd = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(self.cfg), "-w", str(self.ws)]
        assert (
            subprocess.run([*self.cmd, "index"], env=self.env["cold"], capture_output=True, timeout=300).returncode == 0
        )
        # The helper: started by a first search, then waited for.
        subprocess.run([*self.cmd, "search", "warm up"], env=self.env["helper"], capture_output=True, timeout=300)
        wait_for_socket(self.runtime["helper"])
        self.watch = subprocess.Popen([*self.cmd, "watch", "--json"], env=self.env["watch"], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
        wait_for_socket(self.runtime["watch"])
        self.stdio = StdioMcp(self.cmd, {**self.env["cold"], "XDG_RUNTIME_DIR": str(self.runtime["other"])})
        self.http = HttpMcp(self.cmd, self.env["cold"])
        from memsift.engine import open_manager, resolve_config

        self.manager = open_manager(resolve_config(str(self.cfg), workspace=str(self.ws), environ=self.env["cold"]))
        self.declined = 0
        self.answered = {"helper": 0, "watch": 0}  # requests the resident servers answered themselves

    def close(self) -> None:
        for door in (self.stdio, self.http):
            try:
                door.close()
            except Exception:  # noqa: BLE001  (closing is best effort)
                pass
        self.watch.send_signal(signal.SIGINT)
        self.watch.wait(timeout=30)
        anyio.run(self.manager.aclose)
        for runtime in self.runtime.values():
            stop_helpers(runtime)
            shutil.rmtree(runtime, ignore_errors=True)

    # --- one search through one door ---------------------------------------------------------

    @staticmethod
    def argv(query: str, opts: dict) -> list[str]:
        out = ["search", query, "--json"]
        for name, value in opts.items():
            flag = spellings(SearchOptions, name)["cli"][0]
            if isinstance(value, bool):
                out += [flag] if value else []
            else:
                out += [flag, str(value)]
        return out

    def cli(self, env: dict[str, str], query: str, opts: dict) -> dict:
        r = subprocess.run([*self.cmd, *self.argv(query, opts)], env=env, capture_output=True, text=True, timeout=300)
        if r.returncode == 2:
            flag = r.stderr.split("Invalid value for ", 1)[1].split(":", 1)[0].strip("'\"")
            return _invalid(_field(SearchOptions, flag, "cli"))
        assert r.returncode == 0, r.stderr[-2000:]
        return _normal(json.loads(r.stdout))

    def resident(self, door: str, query: str, opts: dict) -> dict:
        r = subprocess.run(
            [sys.executable, "-c", RESIDENT_DRIVER, "-c", str(self.cfg), "-w", str(self.ws), *self.argv(query, opts)],
            env=self.env[door],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if r.returncode == 99:  # declined: the CLI answers by itself, as the real entry point does
            self.declined += 1
            return {**self.cli(self.env[door], query, opts), "declined": True}
        assert r.returncode == 0, r.stderr[-2000:]
        self.answered[door] += 1
        return _normal(json.loads(r.stdout))

    def mcp(self, door: str, query: str, opts: dict) -> dict:
        args = {"query": query}
        for name, value in opts.items():
            wire = spellings(SearchOptions, name)["mcp"]
            if wire:
                args[wire] = value
        reply = (self.stdio if door == "mcp-stdio" else self.http).call(
            "tools/call", {"name": "memory_search", "arguments": args}
        )
        result = reply["result"]
        text = result["content"][0]["text"] if result.get("content") else ""
        if result.get("isError"):
            assert "invalid arguments: " in text, text
            return _invalid(_field(SearchOptions, text.split("invalid arguments: ", 1)[1].split(":", 1)[0], "mcp"))
        return _normal(result.get("structuredContent") or json.loads(text))

    def api(self, query: str, opts: dict) -> dict:
        from memsift.engine.requests import InvalidRequest

        try:
            answer = anyio.run(lambda: self.manager.search(query, now=parse_now(DOORS_DAY.isoformat(), DOORS_ZONE),
                                                           **opts))
        except InvalidRequest as exc:
            return _invalid(exc.field)
        return _normal(answer.to_json_dict())

    def through(self, door: str, query: str, opts: dict) -> dict:
        if door == "cold-cli":
            return self.cli(self.env["cold"], query, opts)
        if door in ("helper", "watch"):
            return self.resident(door, query, opts)
        if door.startswith("mcp"):
            return self.mcp(door, query, {k: v for k, v in opts.items() if k != "explain"})  # MCP has no explain
        return self.api(query, opts)


# builtin, and backends from other packages (contrib/plugins/memsift-lancedb, memsift-qdrant in its
# local mode): a plugin is served by every door as a built-in is.
@pytest.fixture(scope="module", params=["builtin", "lancedb", "qdrant"])
def doors(request, tmp_path_factory):
    if request.param != "builtin":
        pytest.importorskip(f"memsift_{request.param}", reason=f"the {request.param} plugin is not installed "
                            f"(pip install -e contrib/plugins/memsift-{request.param})")
    d = Doors(tmp_path_factory.mktemp("doors"), request.param)
    yield d
    d.close()


OPTIONS = st.fixed_dictionaries({}, optional={
    "max_results": st.sampled_from([1, 3, 6, 0, 101]),
    "min_score": st.sampled_from([0.0, 0.2, 0.5, 0.99, 1.5]),
    "mode": st.sampled_from(["auto", "hybrid", "keyword", "vector", "fts", "bogus"]),
    "since": st.sampled_from(["2026-11-05", "last week", "3 weeks ago", "not a date", "2027-01-01"]),
    "until": st.sampled_from(["2026-11-12", "yesterday", "someday soon"]),
    "session_key": st.sampled_from(["agent:main:telegram:direct:7", DENIED, "agent:main:main", ""]),
    "explain": st.booleans(),
})


def _check_same(doors: Doors, query: str, opts: dict) -> None:
    answers = {door: doors.through(door, query, opts) for door in DOORS}
    FIGURES["door matrix: option sets"] += 1
    FIGURES["door matrix: door calls"] += len(DOORS)
    reference = {k: v for k, v in answers["cold-cli"].items() if k != "declined"}
    for door, answer in answers.items():
        declined = answer.pop("declined", False)
        assert answer == reference, (door, query, opts, answer, reference)
        if door in ("helper", "watch"):  # a valid request is answered by the server; a refused one is declined
            assert declined == (reference.get("invalid") is not None), (door, opts, declined)
    return reference


@settings(max_examples=24, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(QUERIES[:4]), opts=OPTIONS)
def test_every_door_gives_the_same_answer_for_random_option_sets(doors, query, opts):
    if doors.backend != "builtin":
        pytest.skip("random option sets on builtin only (the cases people hit run on every backend here)")
    _check_same(doors, query, opts)


@pytest.mark.parametrize("query, opts", [
    ("billing review invoices", {"since": "2026-11-10"}),  # the resident helper used to drop since/until
    ("ledger", {"since": "not a date"}),  # exit 2 cold, 0 through the helper before
    ("ledger", {"until": "2026-11-01", "since": "2026-11-10"}),  # an empty range
    ("ledger", {"session_key": ""}),  # an unset shell variable
    ("ledger", {"session_key": DENIED, "since": "not a date"}),  # a refused value, even for a denied chat
    ("ledger", {"session_key": DENIED}),
    ("", {}),  # the empty query: nothing searched, on every door
    ("ledger", {"mode": "fts", "max_results": 2, "min_score": 0.0, "explain": True}),
    ("数据管道", {"mode": "vector"}),  # the script warning (MiniLM does not read Chinese)
    ("ledger", {"min_score": 0.99}),  # minScore removes every hit: said the same way
    ("what did I do yesterday?", {}),  # a time-only question: that day's notes, first
    ("what did I do yesterday?", {"min_score": 0.99, "explain": True}),  # never cut by minScore
    ("what did we talk about on November 5?", {"since": "last March"}),
    ("what did we do over Thanksgiving?", {}),  # a holiday's days, read alike by every door
    ("ledger", {"since": "Thanksgiving"}),  # a holiday's name as a bound
    ("what did we decide Friday?", {}),  # a weekday said alone: the latest Friday
    ("这周一我们决定了什么？", {}),  # this week's Monday, in Chinese
    ("ledger", {"since": "this past Monday"}),
    ("ledger", {"corpus": "memory", "max_results": 2}),  # the corpus asked of memsift, ranked and cut within it
    ("ledger", {"corpus": "sessions"}),  # no transcripts indexed: nothing, on every door
    ("ledger", {"corpus": "wiki"}),  # refused, named as each door spells it
])
def test_every_door_agrees_on_the_cases_people_hit(doors, query, opts):
    _check_same(doors, query, opts)


def test_a_holiday_of_a_year_names_its_days_through_every_door(doors):
    answer = _check_same(doors, "what happened over Thanksgiving 2026?", {})
    assert "2026-11-26" in json.dumps(answer["timeWindows"]) and "2026-11-29" in json.dumps(answer["timeWindows"])


@pytest.mark.parametrize("min_score", [None, 0.99])
def test_a_time_only_question_gets_that_days_notes_through_every_door(doors, min_score):
    yesterday = (DOORS_DAY - timedelta(days=1)).isoformat()
    answer = _check_same(doors, "what did I do yesterday?", {} if min_score is None else {"min_score": min_score})
    assert answer["timeOnly"] is True
    assert [h[0] for h in answer["hits"]] == [f"memory/{yesterday}.md"]


def test_the_previous_week_and_the_same_time_last_year_are_read_alike_through_every_door(doors):
    """"the previous week" is last week, Monday to Sunday; "the same time last year" (a bound here) that day a year
    back, give or take a week: before, neither was read, and the question searched every day."""
    answer = _check_same(doors, "what did we decide the previous week?", {"since": "the same time last year"})
    monday = DOORS_DAY - timedelta(days=DOORS_DAY.weekday() + 7)
    windows = json.dumps(answer["timeWindows"])
    assert monday.isoformat() in windows and (monday + timedelta(days=6)).isoformat() in windows, windows
    a_year_back = DOORS_DAY.replace(year=DOORS_DAY.year - 1)
    assert (a_year_back - timedelta(days=7)).isoformat() in json.dumps(answer["timeFilter"]), answer["timeFilter"]


def test_old_versions_and_deleted_notes_are_found_through_no_door(doors):
    """Syncthing's `.stversions` and Obsidian's `.trash` hold stale copies: no door finds them, by their own word
    or by the topic they share with the notes ("ledger")."""
    assert _check_same(doors, "zqstale", {"mode": "fts"})["hits"] == []
    ledger = _check_same(doors, "ledger code", {})
    assert ledger["hits"] and not [h for h in ledger["hits"] if "/." in h[0]], ledger["hits"]


def test_the_open_bounds_scripts_send_leave_out_no_day_through_every_door(doors):
    """since 0001-01-01, until 9999-12-31: year 0 in the user's zone (UTC+14 here) and nanoseconds past 64
    bits ended every door's search in a traceback."""
    wide = _check_same(doors, "ledger", {"since": "0001-01-01", "until": "9999-12-31"})
    assert wide["hits"] and [h[0] for h in wide["hits"]] == [h[0] for h in _check_same(doors, "ledger", {})["hits"]]


def test_a_day_of_last_month_is_read_alike_through_every_door(doors):
    """"on the 31st" asked on 1 January: the day read by memsift's calendar (time_phrases.py), across the year."""
    answer = _check_same(doors, "what did I do on the 31st?", {})
    assert answer["timeOnly"] is True
    assert [h[0] for h in answer["hits"]] == [f"memory/{DOORS_DAY - timedelta(days=1)}.md"]


def test_a_topic_at_a_time_gets_that_times_note_first_through_every_door(doors):
    for question, words in topic_questions(doors.time):
        answer = _check_same(doors, question, {})
        assert answer["hits"] and words in answer["hits"][0][5], (question, [h[0] for h in answer["hits"]])


def test_a_day_without_notes_says_so_through_every_door(doors):
    tw = doors.time
    answer = _check_same(doors, tw.question_for_empty_day(), {})
    assert answer["timeWindowDays"] == 0 and answer["timeNote"].startswith("no notes in"), answer["timeNote"]
    assert [h[0] for h in answer["hits"]][:1] == [f"memory/{tw.nearest_to_empty.isoformat()}.md"]
    # Daily notes of the days around it (MEMORY.md's dated lines of those days may be shown too).
    assert all(
        abs((date.fromisoformat(h[0][7:17]) - tw.empty_day).days) <= 7 for h in answer["hits"] if h[0] != "MEMORY.md"
    )


def test_a_window_cut_by_max_results_says_how_many_days_through_every_door(doors):
    answer = _check_same(doors, "what happened in the past few weeks?", {"max_results": 1})
    assert answer["timeWindowDays"] > 1 and f"holds notes on {answer['timeWindowDays']} days, 1 shown" in \
        answer["timeNote"], answer["timeNote"]


def test_a_list_of_times_is_read_whole_through_every_door(doors):
    # "in March and April": a window each (only March was read before), the same on every door.
    answer = _check_same(doors, "what did we decide in March and April?", {})
    assert [w.split(" ", 1)[1] for w in answer["timeWindows"]] == ["('in March')", "('April')"], answer["timeWindows"]


def test_the_asked_persons_own_line_comes_first_through_every_door(doors):
    # The evidence ranker's "who is the question about" (asker_coverage), above every backend.
    answer = _check_same(doors, CHAT_QUESTION, {})
    path, _start, _end, _score, _citation, snippet, _rescued = answer["hits"][0]
    assert path == "memory/2026-03-09.md" and "golden retriever" in snippet, answer["hits"][:3]


def test_a_name_asked_with_or_without_its_accents_gets_the_same_answer_through_every_door(doors):
    # The keyword index folds accents; the ranking and snippet stages above every backend compared
    # "muller" with "müller" as different words, so the plain spelling scored the answer lower.
    spellings = (ACCENTED_QUESTION, unicodedata.normalize("NFD", ACCENTED_QUESTION),
                 ACCENTED_QUESTION.replace("ü", "u"))
    answers = [_check_same(doors, question, {}) for question in spellings]
    assert answers[0]["hits"][0][0] == "memory/2026-03-20.md", answers[0]["hits"][:3]
    assert answers[1] == answers[0] and answers[2] == answers[0], [a["hits"][:2] for a in answers]


def test_a_place_typed_without_its_special_letters_is_found_through_every_door(doors):
    # ø, ł and ß do not decompose: FTS5 keeps them, so "tromso" never matched "Tromsø" by keyword.
    for plain, typed in (("tromso", "Tromsø"), ("lodz", "Łódź"), ("hauptstrasse", "Hauptstraße")):
        answers = [_check_same(doors, word, {"mode": "fts"}) for word in (plain, typed)]
        assert [h[0] for h in answers[0]["hits"]] == ["memory/2026-03-21.md"], (plain, answers[0]["hits"])
        assert answers[1]["hits"] == answers[0]["hits"], (typed, answers[1]["hits"])
    hybrid = _check_same(doors, "who rented the cabin in tromso?", {})
    assert hybrid["hits"][0][0] == "memory/2026-03-21.md", hybrid["hits"][:3]


def test_a_word_copied_with_soft_hyphens_is_found_by_its_plain_spelling_through_every_door(doors):
    answer = _check_same(doors, "Bornholm seminar", {"mode": "fts"})
    assert [h[0] for h in answer["hits"]][:1] == ["memory/2026-03-21.md"], answer["hits"]


def test_a_question_about_open_tasks_finds_the_checklist_through_every_door(doors):
    for question in ("what tasks are still open?", "what do I still need to do?"):
        answer = _check_same(doors, question, {})
        assert answer["hits"] and answer["hits"][0][0] == "memory/projects/errands.md", answer["hits"][:3]


def test_a_conflict_copy_is_one_hit_cited_by_the_note_through_every_door(doors):
    for query, opts in (("zqpadlock", {"mode": "fts"}), ("what is the shed's padlock code?", {})):
        answer = _check_same(doors, query, opts)
        paths = [h[0] for h in answer["hits"]]
        assert paths[:1] == ["memory/projects/shed.md"] and not [p for p in paths if "onflict" in p], paths


def test_the_resident_doors_answered_the_valid_requests(doors):
    """Valid requests were answered by the helper and the watch themselves, refused ones declined
    (the CLI then exited 2): checked per call in _check_same; here, that they answered at all."""
    FIGURES["door matrix: answered by the resident helper / watch"] += (
        doors.answered["helper"] + doors.answered["watch"]
    )
    need = 10 if doors.backend == "builtin" else 5  # the random option sets run on builtin only
    assert doors.answered["helper"] > need and doors.answered["watch"] > need, doors.answered



def test_a_running_mcp_server_answers_a_terminal_search_too(doors):
    """`memsift mcp` keeps the index fresh and serves `memsift search` from a terminal on the same
    settings (the CLI hands MCP its resident server): a search there is answered, not declined,
    and says what the cold CLI says."""
    env = {k: v for k, v in doors.env["cold"].items() if k != "MEMSIFT_NO_RESIDENT"}  # the MCP servers' runtime
    doors.stdio.call("tools/call", {"name": "memory_search", "arguments": {"query": "billing review"}})
    wait_for_socket(doors.runtime["other"])
    argv = doors.argv("billing review invoices", {})
    r = subprocess.run([sys.executable, "-c", RESIDENT_DRIVER, "-c", str(doors.cfg), "-w", str(doors.ws), *argv],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])  # 99: declined, nobody served it
    assert _normal(json.loads(r.stdout)) == doors.cli(doors.env["cold"], "billing review invoices", {})

# --- citations read back, on every backend ---------------------------------------------------


async def _read_back(manager, answer) -> int:
    """Every citation and hit range of `answer` reads back through the manager (memory_get's path)
    and ends at or before its file's last line; returns how many were checked."""
    checked = 0
    for hit in answer.results:
        if hit.source == "sessions":
            continue
        for ref in filter(None, (hit.citation, f"{hit.path}:{hit.start_line}-{hit.end_line}")):
            path, start, count = ReadOptions.build("api", path=ref).target()
            got = await manager.read(path, start, count)
            assert not got.missing and got.total_lines >= hit.end_line >= hit.start_line, (ref, got.total_lines)
            assert got.text, ref
            checked += 1
    return checked


def test_every_printed_citation_reads_back_through_get_and_memory_get(doors):
    """`memory/2026-11-24.md:1-6` for a 5-line file made `get` exit 1; every door's citations now read."""
    ws = doors.ws
    (ws / "memory" / "2026-11-24.md").write_text("- one\n- the billing review moved\n- three\n- four\n- five\n")
    checked = 0
    read: set[str] = set()  # a citation printed by several searches is read back once
    for query in ("billing review", "ledger database", "Marco certificates", "decaf", "数据管道"):
        answer = anyio.run(lambda: doors.manager.search(query, min_score=0.0, max_results=10))
        checked += anyio.run(_read_back, doors.manager, answer)
        printed = subprocess.run([*doors.cmd, "search", query, "--json", "--min-score", "0", "-n", "10"],
                                 env=doors.env["cold"], capture_output=True, text=True, timeout=300)
        for hit in json.loads(printed.stdout)["results"]:
            if hit["citation"] in read:
                continue
            read.add(hit["citation"])
            got = subprocess.run(
                [*doors.cmd, "get", hit["citation"]], env=doors.env["cold"], capture_output=True, text=True, timeout=120
            )
            assert got.returncode == 0 and got.stdout.strip(), (hit["citation"], got.stderr)
            mcp = doors.stdio.call("tools/call", {"name": "memory_get", "arguments": {"path": hit["citation"]}})[
                "result"
            ]
            body = mcp.get("structuredContent") or json.loads(mcp["content"][0]["text"])
            assert not mcp.get("isError") and not body.get("error") and body["text"], (hit["citation"], body)
            assert body["lines"] == hit["endLine"] - hit["startLine"] + 1 <= body["totalLines"]
            checked += 2
    FIGURES[f"citations read back (get, memory_get, API; {doors.backend})"] += checked
    assert checked > 20


@pytest.mark.parametrize("backend", ["qmd", "postgres"])
def test_citations_read_back_on_the_other_backends(tmp_path, backend):
    from helpers import backend_memory, make_settings
    from memsift.engine import open_manager

    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    (ws / "memory" / "2026-11-24.md").write_text("- one\n- the billing review moved\n- three\n- four\n- five\n")
    memory = backend_memory(backend)
    settings = make_settings(tmp_path, ws, {"provider": "none"}, memory=memory)

    async def go() -> int:  # one event loop: Postgres pools belong to the loop that opened them
        manager = open_manager(settings)
        try:
            await manager.sync()
            checked = 0
            for query in ("billing review", "ledger", "Marco"):
                answer = await manager.search(query, min_score=0.0, max_results=10, mode="keyword")
                assert answer.backend == backend and not answer.unavailable, answer.unavailable
                checked += await _read_back(manager, answer)
            return checked
        finally:
            await manager.aclose()

    checked = anyio.run(go)
    FIGURES[f"citations read back ({backend})"] += checked
    assert checked > 0


def test_status_names_the_users_time_zone_through_every_door(doors):
    """Whose days "yesterday" reads, where an operator looks first: the zone OpenClaw's userTimezone gave."""
    cold = subprocess.run([*doors.cmd, "status", "--json"], env=doors.env["cold"], capture_output=True, text=True,
                          timeout=300)
    said = {"cold-cli": json.loads(cold.stdout)["timeZone"], "api": anyio.run(doors.manager.status).time_zone}
    for door in ("mcp-stdio", "mcp-http"):
        reply = (doors.stdio if door == "mcp-stdio" else doors.http).call(
            "tools/call", {"name": "memory_status", "arguments": {}})["result"]
        said[door] = (reply.get("structuredContent") or json.loads(reply["content"][0]["text"]))["status"]["timeZone"]
    assert set(said.values()) == {DOORS_ZONE}, said
    text = subprocess.run([*doors.cmd, "status"], env=doors.env["cold"], capture_output=True, text=True, timeout=300)
    assert f"Time zone        {DOORS_ZONE}\n" in text.stdout
