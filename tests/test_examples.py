"""Every CLI example in README.md is refreshed from real runs by contrib/readme_examples.py."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import REPO


def test_every_cli_example_in_the_readme_is_generated():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    marked = re.findall(r"<!-- example: [\w-]+[^>]*-->\n[ \t]*```text\n(.*?)```", text, re.S)
    examples = re.findall(r"^[ \t]*```text\n[ \t]*\$ (.*?)$", text, re.M)
    assert examples and len(marked) == len(examples)  # no `$ memsift …` block outside the markers
    listed = subprocess.run([sys.executable, str(REPO / "contrib" / "readme_examples.py"), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == len(examples), listed.stdout
