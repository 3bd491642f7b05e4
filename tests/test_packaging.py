"""What memsift ships: the built wheel holds every module and data file of the tree and every
`memsift.*` module the tree imports (the kit, which the plugin packages import, was once left out
of it), it carries the OpenClaw plugin, and the plugin's version is memsift's.

The wheel is built here from this tree (`python -m build --wheel`, about 15 s); the checks are
contrib/release/checks.py's, which `contrib/release/build.py` runs on the release files too.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from helpers import REPO

sys.path.insert(0, str(REPO / "contrib" / "release"))

from checks import imported_memsift_modules, tree_modules, wheel_problems  # noqa: E402

PLUGIN = REPO / "contrib" / "openclaw-plugin"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if importlib.util.find_spec("build") is None:
        pytest.skip("the `build` package is not installed (pip install -e \".[test]\" brings it)")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return next(out.glob("memsift-*.whl"))


def test_the_wheel_holds_every_module_and_data_file_the_tree_has_and_imports(wheel):
    assert wheel_problems(wheel, REPO) == []
    names = zipfile.ZipFile(wheel).namelist()
    assert "memsift/engine/kit/__init__.py" in names and "memsift/engine/kit/testing.py" in names
    # What was compared: the whole package, and the plugin packages' imports among the tree's.
    assert len(tree_modules(REPO)) > 120
    importers = imported_memsift_modules(REPO)["memsift.engine.kit"]
    assert any(i.startswith("contrib/plugins/memsift-qdrant/") for i in importers)


def test_the_check_names_what_a_wheel_lacks(wheel, tmp_path):
    """The wheel of the hand-written package list (no kit, no data folder): every loss is named."""
    lacking = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as whole, zipfile.ZipFile(lacking, "w") as cut:
        for name in whole.namelist():
            if not name.startswith(("memsift/engine/kit/", "memsift/engine/search/data/", "memsift/openclaw_plugin/")):
                cut.writestr(name, whole.read(name))
    problems = wheel_problems(lacking, REPO)
    assert "module memsift.engine.kit is in the tree but not in the wheel" in problems
    assert any(p.startswith("memsift.engine.kit is imported (") for p in problems), problems
    assert "data file memsift/engine/search/data/lexicon.tsv is in the tree but not in the wheel" in problems
    assert "the wheel lacks the OpenClaw plugin (memsift/openclaw_plugin/package.json)" in problems


def test_the_wheel_carries_the_openclaw_plugin_of_memsifts_version(wheel):
    package = json.loads((PLUGIN / "package.json").read_text())
    with zipfile.ZipFile(wheel) as z:
        shipped = {
            n.removeprefix("memsift/openclaw_plugin/") for n in z.namelist() if n.startswith("memsift/openclaw_plugin/")
        }
        assert json.loads(z.read("memsift/openclaw_plugin/package.json"))["version"] == VERSION
    wanted = {
        "package.json",
        *(
            str(p.relative_to(PLUGIN))
            for entry in package["files"]
            for p in ([PLUGIN / entry] if (PLUGIN / entry).is_file() else (PLUGIN / entry).rglob("*.js"))
        ),
    }
    assert shipped == wanted  # package.json's `files`, as npm packs them: no tests, no node_modules
    assert "index.js" in shipped and "src/version.js" in shipped


def test_one_version_for_memsift_and_its_openclaw_plugin():
    package = json.loads((PLUGIN / "package.json").read_text())
    assert package["version"] == VERSION
    assert package["openclaw"]["install"]["npmSpec"] == package["name"]  # install by name, once published
    from memsift.engine.cli.openclaw import plugin_folder, plugin_version  # noqa: PLC0415

    assert plugin_version(plugin_folder()) == VERSION


def test_staging_copies_only_what_npm_would_pack(tmp_path):
    from memsift.engine.cli.openclaw import stage_plugin  # noqa: PLC0415

    staged = stage_plugin(tmp_path)
    got = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    assert "index.js" in got and "openclaw.plugin.json" in got and "src/memsift-process.js" in got
    assert not [p for p in got if p.startswith(("test/", "node_modules/"))]
    assert (staged / "index.js").read_bytes() == (PLUGIN / "index.js").read_bytes()


def test_an_install_into_a_missing_openclaw_says_what_to_do(tmp_path):
    done = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "openclaw", "install", "--openclaw",
                           str(tmp_path / "no-openclaw")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "OpenClaw was not found" in done.stderr and "Traceback" not in done.stderr
