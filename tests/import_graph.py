"""coco_sql's static import graph, one node per module (tests/test_architecture.py reads it).

An edge `a -> b` is an import of module `b` anywhere in `a`: at module level, or inside a function (a lazy
import runs as surely, only later). Imports under `if TYPE_CHECKING:` are left out unless asked for: they never
run. `from package import name` is an edge to the submodule `package.name` when there is one, else to `package`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

Graph = dict[str, set[str]]


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of `package` (a package is its `__init__.py`)."""
    root = package.parent
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def module_graph(package: Path, *, typing_only: bool = False) -> Graph:
    """module -> the modules of `package` it imports (`typing_only`: those under TYPE_CHECKING too)."""
    files = module_files(package)
    return {name: _imports(path, name, files, typing_only) for name, path in files.items()}


def _imports(path: Path, name: str, files: Mapping[str, Path], typing_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    skipped = set() if typing_only else _typing_blocks(tree)
    top = name.split(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, name, path.name == "__init__.py")
            if module.split(".")[0] == top:
                found.update(_resolve(f"{module}.{alias.name}", files) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(_resolve(a.name, files) for a in node.names if a.name.split(".")[0] == top)
    found.discard(name)
    found.discard("")
    return found


def _typing_blocks(tree: ast.AST) -> set[int]:
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _resolve(dotted: str, files: Mapping[str, Path]) -> str:
    """The module `dotted` names: itself, or its longest prefix that is a module (`package.attribute`)."""
    while dotted and dotted not in files:
        dotted = dotted.rpartition(".")[0]
    return dotted


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # iterative: the graph is deep enough to worry the recursion limit
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def reach(graph: Graph, start: str) -> dict[str, str | None]:
    """Every module `start` reaches, each with the module it was reached from (`path` rebuilds the way)."""
    parents: dict[str, str | None] = {start: None}
    pending = [start]
    while pending:
        node = pending.pop()
        for successor in sorted(graph.get(node, ())):
            if successor not in parents:
                parents[successor] = node
                pending.append(successor)
    return parents


def path(parents: Mapping[str, str | None], end: str) -> str:
    """`a -> b -> ... -> end` through `parents` (from `reach`), without the package prefix."""
    way = [end]
    while (previous := parents[way[-1]]) is not None:
        way.append(previous)
    return " -> ".join(m.partition(".")[2] or m for m in reversed(way))


def without(graph: Graph, edges: Iterable[tuple[str, str]]) -> Graph:
    """`graph` less `edges`."""
    dropped = set(edges)
    return {node: {t for t in targets if (node, t) not in dropped} for node, targets in graph.items()}
