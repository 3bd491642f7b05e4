"""A cold keyword search imports only what it needs: no numpy, onnxruntime or dateparser, and no
pydantic or JSON5 parser once its settings are known (engine/config/snapshot.py): the first call
of a CLI user pays for every import (`contrib/bench/second_call.py`, `cold_pair.py` measure it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import atexit, json, sys
heavy = ["numpy", "onnxruntime", "tokenizers", "sqlite_vec", "dateparser", "structlog", "httpx", "pydantic", "json5",
         "importlib.metadata"]
# The console script leaves without tearing the interpreter down, but runs the exit handlers.
atexit.register(lambda: print(json.dumps({"loaded": [m for m in heavy if m in sys.modules]}), file=sys.stderr))
from memsift.engine.cli import main
sys.argv = ["memsift", "-w", sys.argv[1], "search", "--json", sys.argv[2]]
main()
"""


def _cold_search(tmp_path, query: str) -> tuple[dict, list[str]]:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The ledger runs on PostgreSQL 16.\n", encoding="utf-8")
    (ws / "memory" / "2026-11-05.md").write_text("# 2026-11-05\n\n- Lunch with Lena about Lisbon.\n", encoding="utf-8")
    env = {**os.environ, "MEMSIFT_STATE_DIR": str(tmp_path / "state"), "MEMSIFT_NO_RESIDENT": "1",
           "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__PROVIDER": "none"}
    subprocess.run([sys.executable, "-c", "from memsift.engine.cli import main; main()", "-w", str(ws), "index"],
                   env=env, check=True, capture_output=True, timeout=120)
    run = subprocess.run([sys.executable, "-c", PROBE, str(ws), query], env=env, capture_output=True, text=True,
                         timeout=120)
    answer = json.loads(run.stdout)
    return answer, json.loads(run.stderr.strip().splitlines()[-1])["loaded"]


def test_a_cold_keyword_search_imports_no_numpy_onnxruntime_dateparser_or_pydantic(tmp_path):
    answer, loaded = _cold_search(tmp_path, "ledger database")
    assert answer["results"] and answer["results"][0]["path"] == "MEMORY.md"  # it did search
    assert loaded == [], loaded


def test_a_question_naming_a_time_still_reads_it(tmp_path):
    answer, loaded = _cold_search(tmp_path, "what did we talk about on November 5, 2026?")
    assert answer["results"][0]["path"] == "memory/2026-11-05.md"
    assert "dateparser" in loaded or answer.get("timeOnly")  # the time was read (by memsift's patterns or dateparser)
    assert "numpy" not in loaded and "onnxruntime" not in loaded
