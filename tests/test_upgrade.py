"""An upgrade, as an operator does it: the release before this one (its wheel, built from the last
commit of its version) writes its config and indexes a workspace; this release's wheel is installed
over it in the same environment; then search answers, the index is kept (or rebuilt) with one
clear line, `status` names the memsift that built the index and this one, the config still loads,
and no note was touched.

The environment is a fresh venv holding only the two memsift wheels (`--no-deps`); their
dependencies come from this interpreter's site-packages through a .pth file, so nothing is
downloaded. This release's wheel is $MEMSIFT_TEST_WHEEL when set (CI's release files), else built
from the tree. Skipped, saying why, without git history (a tarball of the tree, a shallow clone
missing the commit) or the `build` package.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from helpers import EXAMPLE_WORKSPACE, REPO, extract_tar, git, previous_release

QUESTION = "why did we pick Postgres for the ledger?"  # README command 1
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def _build_wheel(source: Path, out: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return next(out.glob("memsift-*.whl"))


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


class Env:
    """A venv whose memsift is whichever wheel was installed last."""

    def __init__(self, root: Path) -> None:
        self.root = root
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
        site = Path(
            subprocess.run(
                [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        (site / "_memsift_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
        self.env = {
            "PATH": f"{root / 'venv' / 'bin'}{os.pathsep}/usr/bin:/bin",
            "HOME": str(root / "home"),
            "LANG": "C.UTF-8",
            "MEMSIFT_STATE_DIR": str(root / "state"),
            "XDG_CONFIG_HOME": str(root / "xdg"),
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(root / "cache")),
            "MEMSIFT_NO_RESIDENT": "1",
        }

    @property
    def python(self) -> Path:
        return self.root / "venv" / "bin" / "python"

    def install(self, wheel: Path) -> None:
        done = subprocess.run(
            [str(self.python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def memsift(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.root / "venv" / "bin" / "memsift"), *args], capture_output=True, text=True,
                              env=self.env, cwd=self.root, timeout=600)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path | str]:
    if importlib.util.find_spec("build") is None:
        pytest.skip("the `build` package is not installed (pip install -e \".[test]\" brings it)")
    found = previous_release()
    if found is None:
        pytest.skip("no earlier release in this clone's git history (a tarball of the tree, or a shallow clone)")
    commit, version = found
    work = tmp_path_factory.mktemp("releases")
    archive = git("archive", "--format=tar", "-o", str(work / "previous.tar"), commit)
    assert archive.returncode == 0, archive.stderr
    extract_tar(work / "previous.tar", work / "previous")
    given = os.environ.get("MEMSIFT_TEST_WHEEL")
    new = Path(given) if given else _build_wheel(REPO, work / "new")
    return {"old": _build_wheel(work / "previous", work / "old"), "old_version": version, "new": new}


def test_an_index_and_config_of_the_release_before_carry_over(wheels, tmp_path):
    env = Env(tmp_path)
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    notes = _digests(ws)

    env.install(wheels["old"])  # type: ignore[arg-type]
    assert wheels["old_version"] in env.memsift("--version").stdout
    assert env.memsift("-w", str(ws), "config", "init").returncode == 0
    config = tmp_path / "xdg" / "memsift" / "config.json5"
    written = config.read_text()
    assert env.memsift("-w", str(ws), "index").returncode == 0
    before = json.loads(env.memsift("-w", str(ws), "search", QUESTION, "--json").stdout)
    assert "PostgreSQL 16" in before["results"][0]["snippet"]
    index = next((tmp_path / "state").rglob("*.sqlite"))

    env.install(wheels["new"])  # type: ignore[arg-type]
    assert f"version {VERSION}" in env.memsift("--version").stdout
    after = env.memsift("-w", str(ws), "search", QUESTION, "--json")
    assert after.returncode == 0, after.stderr
    answer = json.loads(after.stdout)
    hits = answer["results"]
    assert hits and hits[0]["path"] == before["results"][0]["path"] and "PostgreSQL 16" in hits[0]["snippet"]
    # The first search syncs first: the answer says once what became of the index.
    kept = [n for n in answer.get("notes") or [] if "is kept: memsift" in n]
    rebuilt = [n for n in answer.get("notes") or [] if "rebuil" in n]
    assert len(kept) + len(rebuilt) == 1, answer.get("notes")
    synced = env.memsift("-w", str(ws), "index")
    assert synced.returncode == 0, synced.stderr
    if kept:
        assert (
            kept[0]
            == f"the index built by an earlier memsift (0.1.x, which recorded no version) is kept: memsift {VERSION} "
               f"reads its format"
            if wheels["old_version"].startswith("0.1.")
            else f"memsift {wheels['old_version']}" in kept[0]
        )
        assert next((tmp_path / "state").rglob("*.sqlite")) == index  # the same file, not a new one
    assert "is kept" not in synced.stdout  # said once
    text = env.memsift("-w", str(ws), "search", QUESTION)
    assert "is kept" not in text.stdout + text.stderr and "PostgreSQL 16" in text.stdout
    status = env.memsift("-w", str(ws), "status")
    assert status.returncode == 0, status.stderr
    if kept:
        built = [line for line in status.stdout.splitlines() if line.startswith("Index built by")]
        assert (
            built
            and f"this is memsift {VERSION}" in built[0]
            and ("0.1.x" in built[0] or wheels["old_version"] in built[0])
        )

    assert config.read_text() == written  # the old config, untouched, and read
    shown = env.memsift("-w", str(ws), "config", "show")
    assert shown.returncode == 0 and json.loads(shown.stdout)["configPath"] == str(config)
    assert _digests(ws) == notes  # no note touched by either release
