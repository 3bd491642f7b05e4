"""The evidence ranker (engine/rerank/evidence.py, evidence_stage.py): the shipped weights, its
features on hand-made hits, how it reorders, where it applies and where not (keyword-only and
time-only answers, a pool of documents), and on real indexes: README command 1 answers with the
decision first through the API and the CLI, on builtin and Postgres."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import anyio
import pytest

from helpers import CHAT_QUESTION as ELENA, CHAT_SESSIONS, backend_memory, make_settings, write_files
from memsift.engine.compose.factory import open_manager
from memsift.engine.config.models import QueryConfig, RankerConfig
from memsift.engine.rerank import evidence
from memsift.engine.compose.evidence_stage import (EvidenceRankedSearchManager, is_conversation, mostly_conversation,
                                                  rank_by_evidence)
from memsift.engine.results import SearchAnswer, SearchHit
from memsift.engine.search.expansion import variants_by_term
from memsift.engine.search.fts_query import question_words

COMMAND_1 = "why did we pick Postgres for the ledger?"
# Plain wording: no note says "pick" or "database", the section about the ledger names it twice,
# and only "chose" (a form of a synonym of "pick") tells the decision from it.
PLAIN = "which database did we pick for the ledger?"


def run(fn, *args, **kw):
    return anyio.run(lambda: fn(*args, **kw))


def _hit(path: str, score: float, snippet: str, line: int = 1) -> SearchHit:
    return SearchHit(path=path, start_line=line, end_line=line, score=score, snippet=snippet)


# --- the shipped weights --------------------------------------------------------------------------

def test_the_shipped_weights_load_and_name_only_known_features():
    model = evidence.load_model()
    assert model.version and set(model.weights) <= set(evidence.FEATURES)
    assert all(math.isfinite(w) for w in model.weights.values())
    assert model.scale == 1 + sum(w for w in model.weights.values() if w > 0)


@pytest.mark.parametrize("doc, message", [
    ({"format": 99, "version": "x", "weights": {}}, "format 99"),
    ({"format": 1, "version": "x", "weights": {"length": 1.0}}, "unknown features"),
    ({"format": 1, "version": "x", "weights": {"coverage": float("nan")}}, "not finite"),
])
def test_a_weights_file_of_another_shape_is_refused_with_the_reason(doc, message):
    with pytest.raises(ValueError, match=message):
        evidence._check(json.loads(json.dumps(doc)))


# --- features -------------------------------------------------------------------------------------

def test_features_count_the_question_words_each_hit_shows():
    terms = evidence.ranker_terms("Which database did we pick for the ledger?")
    assert terms == ["database", "pick", "ledger"]
    hits = [("MEMORY.md", 0.5, "## Decisions\nchose Postgres for the ledger"),
            ("memory/2026-11-02.md", 0.4, "ledger migration: which database? we pick Postgres"),
            ("MEMORY.md", 0.3, "## People\nPriya")]
    f = evidence.evidence_features(terms, hits)
    assert [round(x["coverage"], 3) for x in f] == [0.333, 1.0, 0.0]
    assert [x["reciprocal_rank"] for x in f] == [1.0, 0.5, 1 / 3]
    assert [x["file_best_other"] for x in f] == [0.3, 0.0, 0.5]  # the best *other* hit of the same file
    # "ledger" is in 2 of 3 hits, "database" and "pick" in 1: the first hit's one word is the commonest.
    rarity = {"ledger": math.log1p(3 / 3), "database": math.log1p(3 / 2), "pick": math.log1p(3 / 2)}
    assert f[0]["rare_coverage"] == pytest.approx(rarity["ledger"] / sum(rarity.values()))
    assert f[1]["rare_coverage"] == pytest.approx(1.0)


def test_a_words_other_forms_count_for_it_so_plain_wording_is_found():
    # "chose" is how notes say "pick" (the lexicon's synonyms of a verb, and their irregular forms).
    question = "Which database did we pick for the ledger?"
    terms = evidence.ranker_terms(question)
    variants = variants_by_term(question_words(question), terms)
    assert "chose" in variants["pick"] and "database" not in variants and "ledger" not in variants
    hits = [("MEMORY.md", 0.58, "## Projects\nLedger service: double-entry bookkeeping API, repo payments/ledger"),
            ("MEMORY.md", 0.52, "## Decisions\nchose PostgreSQL 16 over MongoDB for the ledger service")]
    plain, read = evidence.evidence_features(terms, hits), evidence.evidence_features(terms, hits, question, variants)
    assert [round(f["coverage"], 3) for f in plain] == [0.333, 0.333]
    assert [round(f["coverage"], 3) for f in read] == [0.333, 0.667]
    assert read[1]["rare_coverage"] > read[0]["rare_coverage"]
    assert plain[1]["rare_coverage"] == plain[0]["rare_coverage"]
    model = evidence.load_model()
    ranked = rank_by_evidence(question, [_hit(p, s, t, i) for i, (p, s, t) in enumerate(hits)], model, explain=False)
    assert "PostgreSQL 16" in ranked[0].snippet
    # `query.expansion: off` reads no other forms: the backend's order stands.
    off = rank_by_evidence(question, [_hit(p, s, t, i) for i, (p, s, t) in enumerate(hits)], model,
                           explain=False, expansion="off")
    assert "Projects" in off[0].snippet


def test_a_cjk_question_counts_its_character_pairs():
    assert evidence.ranker_terms("数据管道的延迟") == ["数据", "据管", "管道", "道的", "的延", "延迟"]
    f = evidence.evidence_features(
        evidence.ranker_terms("数据管道"), [("memory/2026-11-12.md", 0.5, "讨论数据管道的延迟问题")]
    )
    assert f[0]["coverage"] == 1.0


@pytest.mark.parametrize(
    "question, snippet, expected",
    [
        # the person the question names: their lines count, the other side's do not
        (
            "What breed is Elena's dog?",
            "[D31:9] Elena: a collar for Max, my golden retriever\n[D31:10] Marcus: dog collars by breed",
            1 / 3,
        ),
        ("What breed is Elena's dog?", "[D31:10] Marcus: dog collars for every breed Elena might like", 0.0),
        # a first-person question is about the user of a transcript or a chat log
        (
            "Which dog breed did I adopt?",
            "[s#0] user: I adopted a beagle, a dog breed I love\n[s#1] assistant: beagles",
            1.0,
        ),
        ("Which dog breed did I adopt?", "User: the beagle breed\nAssistant: a dog", 1 / 3),
        ("Which dog breed did Elena adopt?", "[s#0] user: I adopted a beagle, a dog breed I love", 0.0),
        # a CJK name has no word breaks around it
        ("小明的狗是什么品种", "小明: 我的狗是柴犬品种\n小红: 狗很可爱", 4 / 8),  # 小明 的狗 狗是 品种
        # no turns at all
        ("What breed is Elena's dog?", "Elena adopted a dog of a rare breed", 0.0),
    ],
)
def test_asker_coverage_counts_the_question_words_in_the_asked_persons_own_lines(question, snippet, expected):
    f = evidence.evidence_features(evidence.ranker_terms(question), [("memory/2026-01-01.md", 0.5, snippet)], question)
    assert f[0]["asker_coverage"] == pytest.approx(expected)


def test_the_speaker_of_a_turn_line():
    assert evidence.turn_speaker("[D3:8] Caroline: we met in May") == "Caroline"
    assert evidence.turn_speaker("- [09:14] Mary Ann: hello") == "Mary Ann"
    assert evidence.turn_speaker("- 09:00 Standup: ledger migration") is None
    assert evidence.turn_speaker("no turn here") is None


def test_the_persons_own_turn_overtakes_the_other_sides_longer_answer_with_the_shipped_weights():
    # The assistant's answer repeats the question's words; the user's own line states the fact.
    question = "What breed is Elena's dog?"
    hits = [_hit("memory/2026-01-02.md", 0.50, "[D2:4] Marcus: every dog breed has its needs; Elena, a breed guide"),
            _hit("memory/2026-01-01.md", 0.46, "[D1:3] Elena: my dog Max is a golden retriever, the breed I wanted")]
    out = rank_by_evidence(question, hits, evidence.load_model(), explain=True)
    assert out[0].path == "memory/2026-01-01.md"
    assert out[0].ranker.features["asker_coverage"] > 0 and out[1].ranker.features["asker_coverage"] == 0


def test_a_feature_no_hit_of_the_pool_has_leaves_the_scale_and_the_order_stands():
    model = evidence.EvidenceModel("t", {"coverage": 1.0, "asker_coverage": 2.0})
    notes = [_hit("memory/2026-01-01.md", 0.6, "- 10:20 chose Postgres for the ledger"),
             _hit("memory/2026-01-02.md", 0.5, "- 11:00 the ledger database")]
    out = rank_by_evidence("which database for the ledger?", notes, model, explain=True)
    # No speaker's turns in these notes: the scale is 1 + 1 (coverage), not 1 + 1 + 2.
    assert [h.path for h in out] == ["memory/2026-01-02.md", "memory/2026-01-01.md"]
    assert out[0].score == pytest.approx((0.5 + 1.0) / 2) and out[1].score == pytest.approx((0.6 + 0.5) / 2)
    turns = [_hit("memory/2026-01-03.md", 0.5, "[D1:1] Elena: the ledger database is Postgres")]
    assert rank_by_evidence("which database did Elena pick for the ledger?", turns, model,
                            explain=False)[0].score == pytest.approx((0.5 + 3 / 4 + 2 * 3 / 4) / 4)  # 3 of its 4 words


def test_a_score_stays_in_0_to_1_under_a_negative_weight():
    model = evidence.EvidenceModel("t", {"coverage": -1.0, "rare_coverage": 0.5})
    assert model.score(0.01, {"coverage": 1.0, "rare_coverage": 0.0}) == 0.0
    assert model.score(1.0, {"coverage": 0.0, "rare_coverage": 1.0}) == pytest.approx(1.0)


# --- reordering -----------------------------------------------------------------------------------

def test_a_hit_that_shows_the_question_words_overtakes_a_slightly_better_score():
    model = evidence.EvidenceModel("t", {"coverage": 1.0})
    hits = [_hit("memory/2026-01-01.md", 0.50, "nothing of the kind"),
            _hit("memory/2026-01-02.md", 0.45, "we chose the ledger database")]
    out = rank_by_evidence("ledger database", hits, model, explain=True)
    assert [h.path for h in out] == ["memory/2026-01-02.md", "memory/2026-01-01.md"]
    assert out[0].score == pytest.approx((0.45 + 1.0) / 2) and out[1].score == pytest.approx(0.25)
    assert (
        out[0].ranker.base_score == 0.45 and out[0].ranker.base_rank == 2 and out[0].ranker.features["coverage"] == 1.0
    )


def test_equal_scores_keep_the_backends_order():
    model = evidence.EvidenceModel("t", {"coverage": 1.0})
    hits = [_hit(f"memory/2026-01-0{i}.md", 0.4, "same words") for i in range(1, 5)]
    assert [h.path for h in rank_by_evidence("other", hits, model, explain=False)] == [h.path for h in hits]


class _Backend:
    """A backend with fixed answers (determinism: the stage's own decisions are under test)."""

    query_config = QueryConfig()

    def __init__(self, mode: str, paths: list[str], time_only: bool = False) -> None:
        self.mode, self.paths, self.time_only, self.asked = mode, paths, time_only, []

    async def answer(self, request) -> SearchAnswer:
        max_results = request.max_results
        self.asked.append((max_results, request.candidates))
        hits = [_hit(p, 0.5 - i * 0.01, "nothing" if i == 0 else "ledger database") for i, p in enumerate(self.paths)]
        return SearchAnswer(query=request.query, results=hits[:max_results], backend="builtin", mode=self.mode,
                            min_score=0.0, max_results=max_results, took_ms=1.0, time_only=self.time_only or None)


LOGS = [f"memory/2026-01-{d:02d}.md" for d in range(1, 9)]
DOCS = [f"docs/paper-{d}.md" for d in range(1, 9)]


@pytest.mark.parametrize("mode, paths, time_only, reordered", [
    ("hybrid", LOGS, False, True),
    ("query", LOGS, False, True),  # QMD's hybrid mode
    ("fts-only", LOGS, False, False),  # another score scale
    ("vector-only", LOGS, False, False),
    ("hybrid", LOGS, True, False),  # a day's notes, in order
    ("hybrid", DOCS, False, False),  # documents: the backend's order stands
])
def test_the_stage_reorders_hybrid_answers_over_conversation_only(mode, paths, time_only, reordered):
    inner = _Backend(mode, paths, time_only)
    stage = EvidenceRankedSearchManager(inner, RankerConfig(candidates=6), default_max_results=3)
    answer = run(stage.search, "ledger database")
    assert (
        inner.asked == [(6, 12)] and len(answer.results) == 3 and answer.max_results == 3
    )  # 2 candidates a side per hit
    assert (answer.results[0].path != paths[0]) is reordered
    assert (answer.ranker is not None) is reordered


@pytest.mark.parametrize("snippet, turns", [
    ("[D1:1] Jordan: I finished The Nightingale\n[D1:2] Riley: a great book", True),
    ("## Session answer_x (12:34)\n[answer_x#0] user: I adopted a dog\n[answer_x#1] assistant: congratulations", True),
    ("Caroline: we met in May\nMelanie: at the lake", True),
    ("# A paper\nBACKGROUND: structured abstracts name their parts", False),
    ("- 09:00 Standup: ledger migration\n- 11:15 Priya approved the proposal", False),  # a log's times are no speakers
    ("As the nervous system develops, neurons vary.\nMore prose.", False),
])
def test_a_hit_anywhere_whose_lines_are_mostly_turns_is_conversation(snippet, turns):
    assert is_conversation(_hit("chats/conv-26/session_3.md", 0.5, snippet)) is turns


def test_a_pool_is_conversation_when_at_least_half_its_hits_are_daily_logs_or_sessions():
    assert mostly_conversation([_hit("MEMORY.md", 0.5, ""), _hit("memory/2026-11-02.md", 0.4, "")])
    assert not mostly_conversation(
        [_hit("MEMORY.md", 0.5, ""), _hit("notes/a.md", 0.4, ""), _hit("memory/2026-11-02.md", 0.4, "")]
    )
    assert mostly_conversation(
        [SearchHit(path="sessions/abc.jsonl", start_line=1, end_line=2, score=0.3, snippet="", source="sessions")]
    )


# --- on real indexes ------------------------------------------------------------------------------

def _api_search(settings, query: str) -> SearchAnswer:
    async def search() -> SearchAnswer:
        manager = open_manager(settings)  # one event loop for a search and the close (Postgres' pool)
        try:
            return await manager.search(query, explain=True)
        finally:
            await manager.aclose()

    return anyio.run(search)


def _mcp_search(settings, query: str):
    from memsift.engine.mcp.server import MemoryServer

    async def search():
        manager = open_manager(settings)
        try:
            return await MemoryServer(manager, settings).search(query)
        finally:
            await manager.aclose()

    return anyio.run(search)


@pytest.mark.parametrize("question", [COMMAND_1, PLAIN])
@pytest.mark.parametrize("backend", ["builtin", "postgres", "lancedb", "qdrant"])
def test_readme_command_1_shows_the_decision_first(tmp_path, example_workspace, backend, question):
    memory = backend_memory(backend)
    answer = _api_search(make_settings(tmp_path, example_workspace, {"provider": "local"}, memory=memory), question)
    top = answer.results[0]
    assert top.path == "MEMORY.md" and "chose **PostgreSQL 16**" in top.snippet, [
        h.snippet[:40] for h in answer.results
    ]
    if question == COMMAND_1 or answer.ranker is not None:
        assert answer.ranker is not None and top.ranker is not None
    # PLAIN's answer is first by its keyword side alone wherever the ranker does not run: whether a
    # daily log passes minScore beside the two MEMORY.md sections (a pool mostly of conversation, the
    # ranker's) turns on how the CPU rounds the int8 model's vectors (AVX2 or VNNI).


def test_readme_command_1_through_the_cli_and_off_when_configured(tmp_path, example_workspace):
    cfg = tmp_path / "memsift.json5"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))
    cmd = [
        sys.executable,
        "-m",
        "memsift.engine.cli.main",
        "--config",
        str(cfg),
        "--workspace",
        str(example_workspace),
        "search",
        COMMAND_1,
        "--json",
    ]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout)
    assert doc["results"][0]["path"] == "MEMORY.md" and "PostgreSQL 16" in doc["results"][0]["snippet"]
    assert doc["ranker"]["version"] == evidence.load_model().version
    plain = [*cmd[:-2], PLAIN, "--json"]
    doc = json.loads(subprocess.run(plain, capture_output=True, text=True, timeout=120, check=True).stdout)
    assert doc["results"][0]["path"] == "MEMORY.md" and "PostgreSQL 16" in doc["results"][0]["snippet"]
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state"),
                               "agents": {"defaults": {"memorySearch": {"query": {"ranker": {"enabled": False}}}}}}))
    off = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout)
    assert off.get("ranker") is None and all(h.get("ranker") is None for h in off["results"])


@pytest.mark.parametrize("question", [COMMAND_1, PLAIN])
def test_mcp_memory_search_says_the_ranker_reordered(tmp_path, example_workspace, question):
    pytest.importorskip("mcp", reason="the MCP SDK is not installed (a default dependency)")
    out = _mcp_search(make_settings(tmp_path, example_workspace, {"provider": "local"}), question)
    if question == COMMAND_1 or out.ranker is not None:  # PLAIN: see test_readme_command_1_shows_the_decision_first
        assert out.ranker is not None and out.ranker.version == evidence.load_model().version
    assert out.results[0].path == "MEMORY.md" and "PostgreSQL 16" in out.results[0].snippet


def test_status_names_the_ranker_and_not_when_it_is_off(tmp_path, example_workspace):
    async def status(ranker: dict):
        manager = open_manager(make_settings(tmp_path / str(ranker), example_workspace,
                                             {"provider": "none", "query": {"ranker": ranker}}))
        try:
            return await manager.status()
        finally:
            await manager.aclose()

    on = anyio.run(status, {"candidates": 25})
    assert on.ranker["version"] == evidence.load_model().version and on.ranker["candidates"] == 25
    assert anyio.run(status, {"enabled": False}).ranker is None


# --- who the question is about, through every door -------------------------------------------------

@pytest.fixture
def chat_workspace(tmp_path):
    ws = tmp_path / "chats"
    write_files(ws, {"MEMORY.md": "# Memory\n- Elena and Marcus are long-term friends.\n", **CHAT_SESSIONS})
    return ws


def _asked(features: dict) -> float:
    return features["asker_coverage"]


@pytest.mark.parametrize("backend", ["builtin", "postgres"])
def test_the_asked_persons_own_line_is_found_first_on_every_backend(tmp_path, chat_workspace, backend):
    settings = make_settings(tmp_path, chat_workspace, {"provider": "local"}, memory=backend_memory(backend))
    hits = _api_search(settings, ELENA).results
    assert hits[0].path == "memory/2026-03-09.md" and "golden retriever" in hits[0].snippet
    # Elena's line holds all three words; the collar session's Elena lines hold only her name.
    assert _asked(hits[0].ranker.features) == 1.0
    assert all(_asked(h.ranker.features) < 1.0 for h in hits[1:])


def test_the_asked_persons_own_line_through_the_cli_and_mcp(tmp_path, chat_workspace):
    cfg = tmp_path / "memsift.json5"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))
    cmd = [sys.executable, "-m", "memsift.engine.cli.main", "--config", str(cfg), "--workspace", str(chat_workspace),
           "search", ELENA, "--json", "--explain"]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout)
    top = doc["results"][0]
    assert top["path"] == "memory/2026-03-09.md" and _asked(top["ranker"]["features"]) == 1.0

    pytest.importorskip("mcp", reason="the MCP SDK is not installed (a default dependency)")
    out = _mcp_search(make_settings(tmp_path / "mcp", chat_workspace, {"provider": "local"}), ELENA)
    assert out.ranker is not None and out.results[0].path == "memory/2026-03-09.md"
