"""Every CLI example in README.md and docs/ is a real run, refreshed by contrib/refresh_examples.py."""

from __future__ import annotations

import re
import subprocess
import sys


from helpers import REPO

SCRIPT = REPO / "contrib" / "refresh_examples.py"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# Examples whose output depends on nothing but the shipped workspace (no QMD, no Postgres, no
# clock): re-run on every test run, to catch drift between memsift and what the pages show.
STABLE = ["readme-search", "readme-get", "start-get", "bad-config", "search-json", "time-empty", "time-cut"]


def _shown_outside_illustrations(text: str) -> str:
    return re.sub(r"^````.*?^````$", "", text, flags=re.M | re.S)


def test_every_cli_example_in_the_readme_and_the_docs_is_generated():
    marked = examples = 0
    for page in PAGES:
        text = _shown_outside_illustrations(page.read_text(encoding="utf-8"))
        marked += len(re.findall(r"<!-- example: [\w-]+[^>]*-->\n[ \t]*```text\n(.*?)```", text, re.S))
        examples += len(re.findall(r"^[ \t]*```text\n[ \t]*\$ (.*?)$", text, re.M))
    assert examples >= 20 and marked == examples  # no `$ memsift …` block outside the markers
    listed = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == examples, listed.stdout + listed.stderr
    assert "README.md readme-search" in listed.stdout and "docs/getting-started.md start-search" in listed.stdout


def test_the_stable_examples_print_what_the_pages_show():
    run = subprocess.run([sys.executable, str(SCRIPT), "--verify", *STABLE], capture_output=True, text=True,
                         timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(": as shown") == len(STABLE)


def test_a_drifted_example_is_reported(tmp_path, capsys):
    """--verify compares for real: timings aside, a page whose output differs fails, naming the example."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import refresh_examples  # noqa: PLC0415
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert refresh_examples.normalised("1 result(s) · 12 ms · 0.4 s at 02:35:10") == \
        refresh_examples.normalised("1 result(s) · 130.5 ms · 2.25 s at 11:00:00")
    command = '$ memsift -w contrib/example-workspace get "memory/2026-11-05.md#L7"'
    right = "- 16:45 Decided to keep weekly releases on Wednesdays even during the holidays."
    page = tmp_path / "page.md"
    page.write_text(
        f"<!-- example: kept -->\n```text\n{command}\n{right}\n```\n<!-- /example -->\n\n"
        f"<!-- example: edited -->\n```text\n{command}\n- 16:45 Decided to ship on Fridays.\n```\n<!-- /example -->\n",
        encoding="utf-8")
    blocks = [(page, m) for m in refresh_examples.example_blocks(page.read_text(encoding="utf-8"))]
    box = refresh_examples.Sandbox()
    try:
        assert refresh_examples._verify(box, blocks, ["kept"]) == 0
        assert refresh_examples._verify(box, blocks, ["kept", "edited"]) == 1
    finally:
        box.close()
    out = capsys.readouterr().out
    assert "kept: as shown" in out and "edited (" in out and "drifted" in out and "+- 16:45 Decided to keep" in out
