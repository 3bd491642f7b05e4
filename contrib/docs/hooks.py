"""MkDocs hooks: the parts of the docs made from the code and from files outside docs/.

In a page, `<!-- generated: NAME -->` is replaced by a reference made from the code
(contrib/docs/reference.py: `config`, `mcp`, `exit-codes`), and `<!-- include: PATH -->` by a file of the
repository (CHANGELOG.md, SECURITY.md, contrib/bench/results/tables.md). The benchmark plots in
contrib/bench/results/ are published beside the Performance page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference import config_reference, exit_codes_reference, mcp_reference  # noqa: E402

GENERATED = {"config": config_reference, "mcp": mcp_reference, "exit-codes": exit_codes_reference}
MARKER = re.compile(r"<!-- (generated|include): ([\w./-]+) -->")
PLOTS = REPO / "contrib" / "bench" / "results"


def _expand(match: re.Match[str]) -> str:
    kind, name = match.groups()
    if kind == "generated":
        return GENERATED[name]()
    text = (REPO / name).read_text(encoding="utf-8")
    return re.sub(r"\A# [^\n]*\n", "", text)  # the page has its own title


def on_page_markdown(markdown: str, **_: Any) -> str:
    return MARKER.sub(_expand, markdown)


def on_files(files: Any, config: Any, **_: Any) -> Any:
    from mkdocs.structure.files import File  # noqa: PLC0415

    for plot in sorted(PLOTS.glob("*.png")):
        files.append(File.generated(config, f"performance/{plot.name}", abs_src_path=str(plot)))
    return files
