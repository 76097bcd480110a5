"""The package's shape, checked: imports between its packages point one way (no cycles), and modules stay small."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "coco_sql"
MAX_LINES = 500  # issue 28: every module under 500 lines; split one by what it holds before it grows


def _imports(path: Path) -> set[str]:
    """coco_sql modules imported by `path`, lazy imports included, `if TYPE_CHECKING:` blocks excluded."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "coco_sql":  # from coco_sql import api
            found.update(f"coco_sql.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("coco_sql"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("coco_sql"))
    return found


PLUGIN_PACKAGES = ("languages", "engines")
PLUGIN_BASES = {"__init__", "base", "highlighting"}  # the protocols every layer may import


def _part(parts: list[str]) -> str:
    """The node of a module (its path parts under coco_sql, without `.py`): the top-level part, except that a
    kind or an engine is a node of its own above its package's protocols (`languages.base`): a kind may use the
    loop's parts (mutators, the draft environment) that themselves use only the protocols."""
    if not parts:
        return "__init__"
    if parts[0] in PLUGIN_PACKAGES:
        inner = parts[1] if len(parts) > 1 else "__init__"
        return f"{parts[0]}.base" if inner in PLUGIN_BASES else f"{parts[0]}.{inner}"
    return parts[0]


def package_graph() -> dict[str, set[str]]:
    """Top-level part of coco_sql (a subpackage or module; a kind or an engine) -> the parts it imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        source = _part([p.removesuffix(".py") for p in path.relative_to(PACKAGE).parts])
        for module in _imports(path):
            target = _part(module.split(".")[1:])
            if target != source:
                graph[source].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_imports_between_packages_point_one_way() -> None:
    graph = package_graph()
    assert "engine" in graph and "languages.base" in graph["engine"]  # the graph is really built
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_is_a_monolith() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


# -- kinds and engines are plug-ins (issue 28) ----------------------------------------------------------------
KIND_NEUTRAL = ("engine", "api.py", "reflect", "search", "primitives")
KIND_COMPARISON = re.compile(r"""(language|dialect) ?[!=]= ?["']""")


def _concrete_kinds(path: Path) -> set[str]:
    """The modules of a concrete kind (`coco_sql.languages.<kind>...`) or engine that `path` imports."""
    neutral = {"coco_sql.languages", "coco_sql.languages.base", "coco_sql.engines"}
    return {
        module
        for module in _imports(path)
        if module.startswith(("coco_sql.languages.", "coco_sql.engines.")) and module not in neutral
    }


def test_kind_neutral_packages_import_no_concrete_kind() -> None:
    """engine, api, reflect, search and primitives reach a kind only through `coco_sql.plugins`."""
    found = {
        str(path.relative_to(PACKAGE)): sorted(kinds)
        for part in KIND_NEUTRAL
        for path in ([PACKAGE / part] if part.endswith(".py") else (PACKAGE / part).rglob("*.py"))
        if (kinds := _concrete_kinds(path))
    }
    assert found == {}


def test_no_kind_or_dialect_comparison_outside_kinds_and_engines() -> None:
    """`language == "sql"` and `dialect == "snowflake"` live in `languages/` and `engines/` only (templates too)."""
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*"))
        if path.suffix in {".py", ".j2"}
        and path.relative_to(PACKAGE).parts[0] not in {"languages", "engines"}
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if KIND_COMPARISON.search(line)
    ]
    assert found == []


def test_the_rules_find_what_they_forbid(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        'from coco_sql.languages.sql.exports import SqlExports\nif task.language == "sql":\n    pass\n'
    )
    assert _concrete_kinds(planted) == {"coco_sql.languages.sql.exports"}
    assert KIND_COMPARISON.search(planted.read_text().splitlines()[1])
