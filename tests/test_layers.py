"""The package's layers, read from its imports: no import circle anywhere, the engine's core never
imports a backend (only composition and the front-ends do), backends never import each other,
nothing imports contrib, and engine/ keeps at most a dozen loose modules beside its role folders.

Imports are read with `ast` from the source, at module level and inside functions alike; only
those under `if TYPE_CHECKING:` (never run) are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

TOPS = {"engine": "memsift.engine", "backends": "memsift.backends"}


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
