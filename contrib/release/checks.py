"""What a release file must hold, checked against the tree it was built from.

- The memsift wheel holds every module of `engine/` and `backends/`, and every `memsift.*` module
  anything in the tree imports (engine, backends, the plugin packages, the tests), and every data
  file those folders hold (the tokenizer, the ranker's weights, the lexicon, their licences).
- It carries the OpenClaw plugin (`memsift/openclaw_plugin/`): the same files, byte for byte, as
  the plugin's npm tarball, and of memsift's version.
- Two wheels are equal when they hold the same files with the same bytes (the sdist's rebuild).

Used by contrib/release/build.py and tests/test_packaging.py.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import tarfile
import zipfile
from pathlib import Path

TOPS = {"engine": "memsift.engine", "backends": "memsift.backends"}
IMPORTERS = ("engine", "backends", "contrib/plugins", "tests")
PLUGIN_PREFIX = "memsift/openclaw_plugin/"


def _skipped(path: Path) -> bool:
    return "__pycache__" in path.parts or any(part.startswith(".") or part in ("build", "dist") for part in path.parts)


def tree_modules(repo: Path) -> set[str]:
    """`memsift.*` modules of the tree's `engine/` and `backends/`, packages included."""
    out = set()
    for top, name in TOPS.items():
        for path in (repo / top).rglob("*.py"):
            rel = path.relative_to(repo / top)
            if _skipped(rel):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.add(".".join([name, *parts]))
    return out


def tree_data_files(repo: Path) -> set[str]:
    """The data files under `engine/` and `backends/`, as wheel paths (`memsift/engine/...`)."""
    out = set()
    for top in TOPS:
        for path in (repo / top).rglob("*"):
            rel = path.relative_to(repo / top)
            if path.is_file() and path.suffix not in (".py", ".pyc") and not _skipped(rel):
                out.add(f"memsift/{top}/{rel.as_posix()}")
    return out


def imported_memsift_modules(repo: Path) -> dict[str, list[str]]:
    """Every absolute `memsift.…` name imported anywhere in the tree's code, with the files that import it."""
    found: dict[str, list[str]] = {}
    for folder in IMPORTERS:
        for path in (repo / folder).rglob("*.py"):
            if _skipped(path.relative_to(repo)):
                continue
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]  # a module; what it imports from it may be a name or a sub-module
                for name in names:
                    if name.startswith("memsift.") and name != "memsift.openclaw_plugin":
                        found.setdefault(name, []).append(str(path.relative_to(repo)))
    return found


def wheel_modules(names: list[str]) -> set[str]:
    out = set()
    for name in names:
        if name.endswith(".py") and name.startswith("memsift/"):
            parts = name[:-3].split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.add(".".join(parts))
        elif "/" in name and name.startswith("memsift/"):
            out.add(".".join(name.split("/")[:-1]))  # a data folder (memsift.engine.embeddings.data) is a package too
    return out


def wheel_problems(wheel: Path, repo: Path) -> list[str]:
    """What the memsift wheel lacks, as sentences (empty: it ships what the tree imports)."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        version = _wheel_version(z)
        plugin_json = (
            json.loads(z.read(f"{PLUGIN_PREFIX}package.json")) if f"{PLUGIN_PREFIX}package.json" in names else None
        )
    shipped = wheel_modules(names)
    problems = [f"module {m} is in the tree but not in the wheel" for m in sorted(tree_modules(repo) - shipped)]
    for name, importers in sorted(imported_memsift_modules(repo).items()):
        top = ".".join(name.split(".")[:2])
        if top in TOPS.values() and name not in shipped:
            shown = ", ".join(sorted(set(importers))[:3]) + (
                f" and {len(set(importers)) - 3} more" if len(set(importers)) > 3 else ""
            )
            problems.append(f"{name} is imported ({shown}) but the wheel lacks it")
    problems += [
        f"data file {d} is in the tree but not in the wheel" for d in sorted(tree_data_files(repo) - set(names))
    ]
    if plugin_json is None:
        problems.append("the wheel lacks the OpenClaw plugin (memsift/openclaw_plugin/package.json)")
    elif plugin_json.get("version") != version:
        problems.append(f"the wheel's OpenClaw plugin is {plugin_json.get('version')}, memsift is {version}")
    return problems


def _wheel_version(z: zipfile.ZipFile) -> str:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    found = re.search(r"^Version: (\S+)$", z.read(meta).decode(), re.M)
    return found.group(1) if found else ""


def file_digests(wheel: Path) -> dict[str, str]:
    """Each file's sha256, but the RECORD (which lists them)."""
    with zipfile.ZipFile(wheel) as z:
        return {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist() if not n.endswith(".dist-info/RECORD")}


def wheels_differ(a: Path, b: Path) -> list[str]:
    first, second = file_digests(a), file_digests(b)
    return ([f"only in {a.name}: {n}" for n in sorted(first.keys() - second.keys())]
            + [f"only in {b.name}: {n}" for n in sorted(second.keys() - first.keys())]
            + [f"{n} differs" for n in sorted(first.keys() & second.keys()) if first[n] != second[n]])


def plugin_mismatch(wheel: Path, tarball: Path) -> list[str]:
    """Where the wheel's OpenClaw plugin and the npm tarball's differ (npm puts files under `package/`)."""
    with zipfile.ZipFile(wheel) as z:
        in_wheel = {n[len(PLUGIN_PREFIX):]: hashlib.sha256(z.read(n)).hexdigest()
                    for n in z.namelist() if n.startswith(PLUGIN_PREFIX) and not n.endswith("/")}
    with tarfile.open(tarball) as t:
        in_tar = {m.name.split("/", 1)[1]: hashlib.sha256(t.extractfile(m).read()).hexdigest()  # type: ignore[union-attr]
                  for m in t.getmembers() if m.isfile()}
    return ([f"only in the wheel's plugin: {n}" for n in sorted(in_wheel.keys() - in_tar.keys())]
            + [f"only in the tarball: {n}" for n in sorted(in_tar.keys() - in_wheel.keys())]
            + [f"{n} differs between the wheel and the tarball" for n in sorted(in_wheel.keys() & in_tar.keys())
               if in_wheel[n] != in_tar[n]])
