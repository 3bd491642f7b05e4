"""What the memsift wheel holds, found rather than listed (pyproject.toml holds everything else).

The repository's folders map onto import names (`engine/` is `memsift.engine`, `backends/` is
`memsift.backends`), and the OpenClaw plugin (`contrib/openclaw-plugin`, JavaScript) ships inside
the wheel as `memsift.openclaw_plugin`, so `pip install` alone brings it (`memsift openclaw install`
puts it into a Gateway). Every sub-package under a mapped folder is shipped, and its data files by
one rule; the plugin's files are those its package.json gives npm (`files`), so the wheel and the
npm tarball hold the same plugin. tests/test_packaging.py builds the wheel and checks it.
"""

from __future__ import annotations

import json
from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).parent
PACKAGE_DIRS = {"memsift.engine": "engine", "memsift.backends": "backends", "memsift.openclaw_plugin": "contrib/openclaw-plugin"}
PLUGIN = "memsift.openclaw_plugin"
# Data a module reads beside itself: the model's tokenizer, the evidence ranker's weights, the
# WordNet lexicon, and the licences that go with them.
DATA_FILES = ["*.json", "*.tsv", "NOTICE", "*-LICENSE"]


def discovered() -> list[str]:
    packages = []
    for name, folder in PACKAGE_DIRS.items():
        if name == PLUGIN:
            continue  # not Python: its files come from package.json, below
        packages.append(name)
        packages += [f"{name}.{sub}" for sub in find_namespace_packages(str(HERE / folder), exclude=["*__pycache__*"])
                     if "__pycache__" not in sub]
    return packages + [PLUGIN]


def plugin_files() -> list[str]:
    """The plugin's package.json `files` (folders as every file under them), and package.json itself."""
    folder = HERE / PACKAGE_DIRS[PLUGIN]
    listed = json.loads((folder / "package.json").read_text(encoding="utf-8"))["files"]
    return ["package.json", *(f"{entry}/*" if (folder / entry).is_dir() else entry for entry in listed)]


setup(packages=discovered(), package_dir=PACKAGE_DIRS,
      package_data={"": DATA_FILES, PLUGIN: plugin_files()}, include_package_data=False)
