"""The manual builds with `mkdocs build --strict`, its references cover the code, and the README
stays a front page."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys

import click
import pytest

from helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _text(path) -> str:
    raw = path.read_text(encoding="utf-8")
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", raw)))


def test_the_readme_is_a_front_page():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert text.count("```bash") >= 2 and "pip install -e ." in text and "python -m pytest" in text
    for page in ("docs/index.md", "docs/getting-started.md", "docs/operators/postgres.md"):
        assert f"({page})" in text or page.removeprefix("docs/") in text


def test_no_issue_numbers_or_commit_hashes_in_the_readme_or_the_docs():
    for page in [*PAGES, REPO / "CHANGELOG.md"]:
        text = re.sub(r"^(`{3,}).*?^\1$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)  # prose, not output
        assert not re.search(r"\bissues? \d+\b|\(issue\b", text, re.I), page
        # 7-hex words, other than the example workspace's own commit (a828e60)
        hashes = {h for h in re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text)}
        assert hashes <= {"a828e60"}, (page, hashes)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if shutil.which("mkdocs") is None and not _has_module("mkdocs"):
        pytest.skip('the docs tools are not installed: pip install -e ".[docs]"')
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=REPO,
                         capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                            "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


def _has_module(name: str) -> bool:
    import importlib.util  # noqa: PLC0415

    return importlib.util.find_spec(name) is not None


def test_the_cli_reference_has_every_command_and_option(site):
    from memsift.engine.cli.main import cli  # noqa: PLC0415

    text = _text(site / "reference" / "cli" / "index.html")
    ctx = click.Context(cli)
    commands = {name: cmd for name, cmd in cli.commands.items() if not cmd.hidden}
    assert {"search", "get", "status", "index", "watch", "mcp", "parity", "note", "config", "helpers"} <= set(commands)
    for name, cmd in commands.items():
        assert f"memsift {name}" in text, name
        for param in cmd.get_params(ctx):
            if isinstance(param, click.Option) and not param.hidden:
                assert param.opts[-1] in text, (name, param.opts)
        if isinstance(cmd, click.Group):
            for sub in cmd.commands:
                assert f"memsift {name} {sub}" in text
    assert "resident-helper" not in text  # hidden: not for users
    for code in range(8):
        assert re.search(rf"\b{code}\b", text)


def test_the_config_reference_has_every_section(site):
    from memsift.engine.config import models  # noqa: PLC0415

    text = _text(site / "reference" / "config" / "index.html")
    sys.path.insert(0, str(REPO / "contrib" / "docs"))
    from reference import config_keys  # noqa: PLC0415

    for path, info, _owner in config_keys(models.MemsiftConfig):
        assert path.rsplit(".", 1)[-1] in text, path
    for section in ("agents.defaults.memorySearch", "agents.list[]", "memory"):
        assert section in text


def test_the_mcp_reference_has_every_tool_and_argument(site):
    text = _text(site / "reference" / "mcp" / "index.html")
    for tool, args in {"memory_search": ("query", "maxResults", "minScore", "mode", "since", "until", "sessionKey"),
                       "memory_get": ("path", "from", "lines", "offset", "sessionKey"),
                       "memory_status": ("deep", "sessionKey")}.items():
        assert tool in text
        for arg in args:
            assert arg in text, (tool, arg)


def test_the_python_api_reference_documents_the_public_api(site):
    text = _text(site / "reference" / "python-api" / "index.html")
    for name in ("open_manager", "resolve_config", "SearchManager", "SearchAnswer", "SearchHit", "ReadResult",
                 "MemsiftError"):
        assert name in text, name


def test_the_performance_page_shows_the_benchmark_tables_and_plots(site):
    text = _text(site / "performance" / "index.html")
    assert "SciFact" in text and "LongMemEval" in text and "python contrib/bench/run.py" in text
    for plot in (REPO / "contrib" / "bench" / "results").glob("*.png"):
        assert (site / "performance" / plot.name).is_file(), plot.name


def _default_at(model, dotted: str):
    """The default of `a.b.c` (camelCase keys) in a config record; KeyError when there is none."""
    from memsift.engine.records import Record  # noqa: PLC0415

    value = model()
    for part in dotted.split("."):
        if not isinstance(value, Record):
            raise KeyError(dotted)
        names = {(f.alias or re.sub(r"_(\w)", lambda m: m.group(1).upper(), n.rstrip("_"))): n
                 for n, f in type(value).model_fields.items()}
        if part not in names:
            raise KeyError(dotted)
        value = getattr(value, names[part])
    return value


def test_the_configuration_pages_defaults_are_the_codes():
    """Every plain default in "How values are normalised" (a number, true/false, a quoted string) is
    the model's: the page once said `query.time.weight` 0.5 where the code had 0.7."""
    from memsift.engine.config.models import MemorySearchConfig  # noqa: PLC0415

    page = (REPO / "docs" / "operators" / "configuration.md").read_text(encoding="utf-8")
    checked = 0
    for row in re.findall(r"^\| (`[^|]+) \| ([^|]+) \|", page, flags=re.M):
        keys = re.findall(r"`([A-Za-z0-9_.*]+)`", row[0])
        values = [v.strip().strip("`") for v in row[1].split(" / ")]
        if not keys or len(values) != len(keys):
            continue
        head = keys[0].rsplit(".", 1)[0] + "." if "." in keys[0] else ""
        for key, shown in zip(keys, values):
            path = key if "." in key or key == keys[0] else head + key
            if not re.fullmatch(r'-?\d+(\.\d+)?|true|false|"[^"]*"', shown):
                continue  # prose ("provider defaults", "unbounded"): not a value to compare
            try:
                actual = _default_at(MemorySearchConfig, path)
            except KeyError:
                continue
            expected = json.loads(shown)
            assert actual == expected, (
                f"docs/operators/configuration.md: {path} is {shown} there, {actual!r} in the code"
            )
            checked += 1
    assert checked >= 30, checked  # the table is read, not skipped
