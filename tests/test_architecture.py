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
PLUGIN_BASES = {"__init__", "base", "kind", "highlighting"}  # the protocols every layer may import
# A kind's parts that other layers read as a library, each a node of its own below the kind: the SQL checker
# (dbt and agent_spec check their SQL with it; tasks, the store's local-testing stand-in and PACE's SQL
# mechanics in `primitives` read it) and the SQL macros (`primitives` splits a program's macros with them).
KIND_LIBRARIES = {("languages", "sql", "check"), ("languages", "sql", "macros")}


def _part(parts: list[str]) -> str:
    """The node of a module (its path parts under coco_sql, without `.py`): the top-level part, except that a
    kind or an engine is a node of its own above its package's protocols (`languages.base`): a kind may use the
    loop's parts (mutators, the draft environment) that themselves use only the protocols; and a kind's library
    (`KIND_LIBRARIES`) is a node of its own below them."""
    if not parts:
        return "__init__"
    if tuple(parts[:3]) in KIND_LIBRARIES:
        return ".".join(parts[:3])
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


# -- kinds and engines are plug-ins (issue 28) ---------------------------------------------------------------
KIND_NEUTRAL = ("engine", "api.py", "reflect", "search", "primitives")
KIND_COMPARISON = re.compile(r"""(language|dialect) ?[!=]= ?["']""")


def _concrete_kinds(path: Path) -> set[str]:
    """The modules of a concrete kind (`coco_sql.languages.<kind>...`) or engine that `path` imports."""
    neutral = {"coco_sql.languages", "coco_sql.languages.base", "coco_sql.engines"}
    libraries = tuple(f"coco_sql.{'.'.join(parts)}" for parts in KIND_LIBRARIES)
    return {
        module
        for module in _imports(path)
        if module.startswith(("coco_sql.languages.", "coco_sql.engines."))
        and module not in neutral
        and not module.startswith(libraries)
    }


def test_kind_neutral_packages_import_no_concrete_kind() -> None:
    """engine, api, reflect, search and primitives reach a kind only through `coco_sql.plugins` (they may read
    a kind's library, `KIND_LIBRARIES`: `primitives` still holds the SQL half of PACE's mechanics)."""
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
    library = tmp_path / "library.py"
    library.write_text("from coco_sql.languages.sql.check.validator import parse_statement\n")
    assert _concrete_kinds(library) == set()
    assert _part(["languages", "sql", "check", "validator"]) == "languages.sql.check"
    assert _part(["languages", "sql", "mutate", "offline"]) == "languages.sql"


# -- a kind is one package (issue 28): what is kind-specific lives in languages/<kind>/ ----------------------
GENERIC = ("mutate",)  # the Mutator interface, the near-best pick and PACE's operators: no kind's AST in them
KIND_SPECIFIC_LIBRARIES = ("sqlglot", "coco_sql.languages.sql", "coco_sql.languages.python")


def _kind_specific_imports(path: Path) -> set[str]:
    """What `path` imports (lazily too) that only a kind's module needs: sqlglot (a SQL AST) or a concrete
    kind's modules, its library included."""
    tree = ast.parse(path.read_text())
    names = {
        name
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    }
    return {
        n
        for n in names
        if n in KIND_SPECIFIC_LIBRARIES or n.startswith(tuple(f"{k}." for k in KIND_SPECIFIC_LIBRARIES))
    }


def _misplaced_modules(root: Path = PACKAGE) -> list[str]:
    """Modules outside `languages/<kind>/` named for a kind: a top-level SQL checker, `languages/sql_*.py`,
    `mutate/python_*.py` and the like (the kind's package holds them)."""
    kinds = ("sql", "python", "dbt", "agent_spec")
    found = [
        str(p.relative_to(root)) for p in (root / "sqlcheck",) if any(p.rglob("*.py"))
    ]  # not a stale cache
    for folder in ("languages", *GENERIC):
        found += [
            str(p.relative_to(root))
            for p in (root / folder).glob("*.py")
            if p.stem.startswith(tuple(f"{k}_" for k in kinds))
            or p.stem.endswith(tuple(f"_{k}" for k in kinds))
        ]
    return sorted(found)


def test_kind_specific_modules_live_in_their_kind() -> None:
    """The generic packages hold no kind's operators: no module under mutate/ reads a SQL AST (sqlglot) or
    imports a concrete kind, and no module outside a kind's package is named for one."""
    scanned = [p for part in GENERIC for p in (PACKAGE / part).rglob("*.py")]
    assert {p.stem for p in scanned} >= {"base", "choice", "pace"}  # the rule really reads mutate/
    found = {str(p.relative_to(PACKAGE)): sorted(i) for p in scanned if (i := _kind_specific_imports(p))}
    assert found == {}
    assert _misplaced_modules() == []
    assert (PACKAGE / "languages" / "sql" / "check" / "validator.py").is_file()
    assert (PACKAGE / "languages" / "sql" / "mutate" / "offline.py").is_file()


def test_the_kind_rule_finds_a_kind_module_in_a_generic_package(tmp_path: Path) -> None:
    planted = tmp_path / "edits.py"
    planted.write_text(
        "import sqlglot\n\ndef f():\n    from coco_sql.languages.sql.check.validator import parse_statement\n"
    )
    assert _kind_specific_imports(planted) == {"sqlglot", "coco_sql.languages.sql.check.validator"}
    generic = tmp_path / "choice.py"
    generic.write_text("import numpy as np\nfrom coco_sql.mutate.base import Proposal\n")
    assert _kind_specific_imports(generic) == set()
    whole = tmp_path / "kind.py"
    whole.write_text("from coco_sql.languages.sql import PLUGIN\n")
    assert _kind_specific_imports(whole) == {"coco_sql.languages.sql"}
    for path in (
        "sqlcheck/validator.py",
        "languages/sql_export.py",
        "mutate/python_ops.py",
        "mutate/scoring_sql.py",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "mutate" / "choice.py").write_text("")
    assert _misplaced_modules(tmp_path) == [
        "languages/sql_export.py", "mutate/python_ops.py", "mutate/scoring_sql.py", "sqlcheck",
    ]  # fmt: skip
