"""`memsift config init` writes a starter config that loads, is private, names the workspace it
was run in, and never replaces a file unless asked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from helpers import EXAMPLE_WORKSPACE


def _memsift(tmp_path, *args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")}
    env.update(
        XDG_CONFIG_HOME=str(tmp_path / "xdg"), MEMSIFT_STATE_DIR=str(tmp_path / "state"), MEMSIFT_NO_RESIDENT="1"
    )
    return subprocess.run(
        [sys.executable, "-m", "memsift.engine.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_config_init_writes_a_private_starter_that_loads_and_keeps_an_existing_file(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    made = _memsift(tmp_path, "config", "init", cwd=ws / "memory")  # inside the workspace: found upwards
    path = tmp_path / "xdg" / "memsift" / "config.json5"
    assert made.returncode == 0 and made.stdout.strip() == f"wrote {path}", made.stderr
    assert path.stat().st_mode & 0o777 == 0o600
    shown = json.loads(_memsift(tmp_path, "config", "show", cwd=tmp_path).stdout)
    # The starter says what the default is (auto: the bundled model unless a provider has a key), not "local".
    assert (
        shown["configPath"] == str(path)
        and shown["workspace"] == str(ws)
        and shown["memorySearch"]["provider"] == "auto"
    )
    assert 'provider: "auto"' in path.read_text()
    path.write_text('{ memory: { backend: "qmd" } }')
    again = _memsift(tmp_path, "config", "init", cwd=ws)
    assert again.returncode == 2 and "exists" in again.stderr and "--force" in again.stderr
    assert "qmd" in path.read_text()  # untouched
    assert (
        _memsift(tmp_path, "config", "init", "--force", cwd=ws).returncode == 0
        and 'backend: "builtin"' in path.read_text()
    )
    elsewhere = _memsift(tmp_path, "-c", str(tmp_path / "other.json5"), "config", "init", cwd=tmp_path)
    assert elsewhere.returncode == 0 and "set agents.defaults.workspace" in elsewhere.stdout
    assert '"~/agent-workspace"' in (tmp_path / "other.json5").read_text()


def test_config_init_takes_the_file_after_the_command_too(tmp_path):
    # `config init -c FILE` was refused: -c was only the global option before the command.
    target = tmp_path / "here" / "memsift.json5"
    made = _memsift(tmp_path, "config", "init", "-c", str(target), cwd=tmp_path)
    assert made.returncode == 0 and made.stdout.startswith(f"wrote {target}"), made.stderr
    shown = json.loads(
        _memsift(tmp_path, "-c", str(target), "-w", str(EXAMPLE_WORKSPACE), "config", "show", cwd=tmp_path).stdout
    )
    assert shown["configPath"] == str(target)
    assert _memsift(tmp_path, "config", "init", "--config", str(target), cwd=tmp_path).returncode == 2  # exists


def test_config_init_never_writes_a_markdown_file_even_through_a_link_or_with_force(tmp_path):
    """`config init --force -c MEMORY.md` (or a config path that is a link to it) replaced the user's
    curated memory with a starter config."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, ws)
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}
    link = tmp_path / "memsift.json5"
    link.symlink_to(ws / "MEMORY.md")
    for target in (ws / "MEMORY.md", link, ws / "memory" / "2026-12-01.md"):
        r = _memsift(tmp_path, "config", "init", "--force", "-c", str(target), cwd=tmp_path)
        assert r.returncode == 2 and "is a Markdown file" in r.stderr and "never writes one" in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in ws.rglob("*.md")} == before
