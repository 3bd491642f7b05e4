"""Text typed in an input method's full-width mode (`ＡＰＩ`, `１９６８`), half-width katakana (`ｶﾌｪ`)
and ligatures pasted from a PDF (`ﬁ`) are searched as their plain forms (NFKC), in the notes and in
the question alike, through the cold CLI, the resident helper and MCP over stdio and HTTP. Before,
"staging API key" missed a note that wrote `ｓｔａｇｉｎｇ ＡＰＩ`, and "ｆｉｇ ｔｒｅｅ" missed "fig
tree", on every backend. The snippet still shows the note as written. QMD indexes the notes with
its own engine: there only the question is folded."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import backend_memory, tools_over_mcp
from memsift.engine.search.fts_query import index_text, query_terms
from memsift.engine.testing.doors import run_cli
from memsift.engine.text import compat_form, match_form

NOTES = {
    "MEMORY.md": "# Memory\n- The ｓｔａｇｉｎｇ ＡＰＩ key rotates every ９０ days.\n",
    "memory/2026-11-05.md": "- Planted a fig tree by the shed.\n",
    "memory/2026-11-06.md": "- ｶﾌｪで打ち合わせ、議題は予算。\n",
    "memory/2026-11-07.md": "- The ﬁnal draft of the grant went out.\n",
}


def test_the_plain_form_of_what_was_typed_full_width() -> None:
    assert compat_form("ｆｉｇ １９６８ ｶﾌｪ ﬁnal") == "fig 1968 カフェ final"
    assert compat_form("plain ascii") == "plain ascii"
    assert match_form("ＦＩＧ Café") == "fig cafe"  # full-width capitals lower once they are plain
    assert query_terms("ｓｔａｇｉｎｇ ＡＰＩ") == ["staging", "api"]
    assert "staging API" in index_text("ｓｔａｇｉｎｇ ＡＰＩ", "unicode61")
    assert "staging API" in index_text("ｓｔａｇｉｎｇ ＡＰＩ", "trigram")


def _json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _first(answer: dict) -> tuple[str, str]:
    hit = answer["results"][0] if answer["results"] else {"path": None, "snippet": ""}
    return hit["path"], hit["snippet"]


@pytest.mark.parametrize("backend", ["builtin", "qmd", "lancedb", "qdrant", "postgres"])
def test_full_width_notes_and_questions_meet_through_every_door(tmp_path: Path, backend: str) -> None:
    ws = tmp_path / "ws"
    for rel, text in NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    cfg = tmp_path / "memsift.json"
    cfg.write_text(json.dumps({"memory": backend_memory(backend), "agents": {"defaults": {"workspace": str(ws)}}}))
    assert run_cli(tmp_path, cfg, "index").returncode == 0
    # The question folded (every backend): full-width letters find the plain note.
    asked = [("ｆｉｇ ｔｒｅｅ", "memory/2026-11-05.md", "fig tree")]
    if backend != "qmd":  # the notes folded too (QMD indexes them itself)
        asked += [("staging API key", "MEMORY.md", "ｓｔａｇｉｎｇ ＡＰＩ key"),
                  ("カフェ", "memory/2026-11-06.md", "ｶﾌｪで打ち合わせ"),
                  ("final draft", "memory/2026-11-07.md", "ﬁnal draft")]
    for resident in (False, True, True):  # cold, then the resident helper's answers
        for question, path, shown in asked:
            got = _first(_json(run_cli(tmp_path, cfg, "search", question, "--mode", "keyword", "--json",
                                       resident=resident)))
            assert got[0] == path and shown in got[1], (question, got)
    run_cli(tmp_path, cfg, "helpers", "stop", "--all")
    calls = [("memory_search", {"query": q}) for q, _path, _shown in asked]
    for answers in tools_over_mcp(tmp_path, cfg, calls):
        for (question, path, shown), answer in zip(asked, answers):
            got = _first(answer)
            assert got[0] == path and shown in got[1], (question, got)
    assert all((ws / rel).read_text(encoding="utf-8") == text for rel, text in NOTES.items())
