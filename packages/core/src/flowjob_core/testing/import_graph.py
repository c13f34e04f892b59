"""The import graph of a source tree, read from the code (nothing is imported): what the layout tests of
flowjob's distributions (and of a plugin that wants the same rules) check for cycles and directions.

Every ``import`` and ``from ... import`` counts, wherever it stands (a deferred import inside a
function is still an edge: it only moves the cycle to run time), except those under
``if TYPE_CHECKING:``, which never run. ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module of the tree, else to ``pkg``.
"""
from __future__ import annotations

import ast
from pathlib import Path


def modules(src: Path, package: str | None = None) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``src`` (a package's ``src/`` folder), or
    only under its top-level ``package`` (``src`` then may hold others, as site-packages does)."""
    found = {}
    for path in sorted((src / package if package else src).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, str | None]]:
    """(module, imported name or None) for every import that can run."""
    found: list[tuple[str, str | None]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for other in child.orelse:
                    visit_statement(other)
            else:
                visit_statement(child)

    def visit_statement(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            found.extend((target, alias.name) for alias in node.names)
        else:
            visit(node)

    visit(tree)
    return found


def import_graph(src: Path, package: str | None = None) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports (``package``: see ``modules``)."""
    known = modules(src, package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for target, imported in _imports(tree, name, path.name == "__init__.py"):
            if imported is not None and f"{target}.{imported}" in known:
                target = f"{target}.{imported}"
            if target in known and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found
