"""The package's layers, read from its imports: no import circle anywhere, between modules or
between engine's packages (each imports only the packages below it in `PACKAGE_ORDER`), the
engine's core never imports a backend (only composition and the front-ends do), backends never
import each other, nothing imports contrib, and engine/ keeps at most a dozen loose modules
beside its role folders.

Imports are read with `ast` from the source, at module level and inside functions alike; only
those under `if TYPE_CHECKING:` (never run) are left out.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

TOPS = {"engine": "memsift.engine", "backends": "memsift.backends"}
# engine's packages, lowest first: each may import those before it (and the loose modules), never
# one after it. The doors (mcp, cli) are on top; the CLI starts the MCP server, never the reverse.
PACKAGE_ORDER = (
    "records",
    "plugins",
    "config",
    "files",
    "search",
    "embeddings",
    "rerank",
    "compose",
    "testing",
    "kit",
    "mcp",
    "cli",
)


def _modules() -> dict[str, Path]:
    out = {}
    for top, name in TOPS.items():
        for path in (REPO / top).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(REPO / top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([name, *parts])] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import a.b.c` needs a.b.c; a name inside a module needs the module
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: _imports(m, p, known) for m, p in known.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_circle_anywhere_in_the_package():
    graph = _graph()
    assert len(graph) > 80  # the whole package was read
    assert _circles(graph) == []


def _package(module: str) -> str:
    """engine's package of a module (`memsift.engine.search.hits` → "search"), a loose module's own
    name, or the backend (`memsift.backends.qmd`)."""
    parts = module.split(".")
    if parts[1] == "engine":
        return parts[2] if len(parts) > 2 else "engine"
    return ".".join(parts[:3])


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, imports in graph.items():
        edges = out.setdefault(_package(module), set())
        edges.update(p for p in map(_package, imports) if p != _package(module))
    for targets in list(out.values()):
        for t in targets:
            out.setdefault(t, set())
    return out


def _order_breaks(packages: dict[str, set[str]]) -> list[tuple[str, str]]:
    rank = {p: i for i, p in enumerate(PACKAGE_ORDER)}
    return sorted((a, b) for a, targets in packages.items() if a in rank
                  for b in targets if b in rank and rank[b] >= rank[a])


def test_no_import_circle_between_packages_and_each_imports_only_those_below():
    packages = _package_graph(_graph())
    assert set(PACKAGE_ORDER) <= set(packages), set(PACKAGE_ORDER) - set(packages)  # every package was read
    assert _circles(packages) == []
    assert _order_breaks(packages) == []


def test_the_architecture_page_states_the_order_the_test_enforces():
    page = (REPO / "docs" / "contributing" / "architecture.md").read_text(encoding="utf-8")
    stated = re.search(r"^\*\*Layer order:\*\* (.+)$", page, re.M)
    assert stated is not None, "docs/contributing/architecture.md lost its 'Layer order:' line"
    assert tuple(name.strip() for name in stated[1].split("<")) == PACKAGE_ORDER


def test_the_package_checks_find_a_break():
    graph = {"memsift.engine.files.chunking": {"memsift.engine.search.snippets"},
             "memsift.engine.search.snippets": {"memsift.engine.files.sizes"}, "memsift.engine.files.sizes": set()}
    packages = _package_graph(graph)
    assert _circles(packages) == [["files", "search"]]
    assert _order_breaks(packages) == [("files", "search")]


def test_the_checker_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_only_composition_and_front_ends_import_backends():
    allowed = ("memsift.engine.compose", "memsift.engine.cli")
    for module, imports in _graph().items():
        if module.startswith("memsift.engine") and not module.startswith(allowed):
            assert not [i for i in imports if i.startswith("memsift.backends")], module


def test_backends_never_import_each_other_and_nothing_imports_contrib():
    for module, imports in _graph().items():
        assert not [i for i in imports if i.startswith("contrib")], module
        if module.startswith("memsift.backends."):
            own = ".".join(module.split(".")[:3])
            others = {i for i in imports if i.startswith("memsift.backends.") and not i.startswith(own)}
            assert not others, (module, others)


def test_engine_keeps_at_most_a_dozen_loose_modules():
    loose = sorted(p.name for p in (REPO / "engine").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 12, loose
    for folder in ("search", "files", "compose", "cli", "mcp", "config", "embeddings", "rerank"):
        assert (REPO / "engine" / folder / "__init__.py").is_file(), folder


KIT = ("memsift.engine.kit", "memsift.engine.kit.testing")


def _memsift_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return {name for name in found if name == "memsift" or name.startswith("memsift.")}


def test_plugins_import_memsift_only_through_the_kit():
    files = [p for p in (REPO / "contrib" / "plugins").rglob("*.py") if "__pycache__" not in p.parts]
    assert files
    outside = {str(p.relative_to(REPO)): sorted(_memsift_imports(p) - set(KIT)) for p in files}
    assert {k: v for k, v in outside.items() if v} == {}
    assert any(_memsift_imports(p) for p in files)  # the walk sees their imports at all



def test_the_plugin_pages_example_is_one_short_file_through_the_kit():
    source = REPO / "contrib" / "plugins" / "memsift-example" / "src" / "memsift_example" / "__init__.py"
    assert len(source.read_text(encoding="utf-8").splitlines()) < 150
    assert _memsift_imports(source) == {"memsift.engine.kit"}
    assert "contrib/plugins/memsift-example" in (REPO / "docs" / "contributing" / "plugins.md").read_text(
        encoding="utf-8"
    )
