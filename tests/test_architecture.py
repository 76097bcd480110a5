"""The package's shape, checked: imports point one way (no circle between packages, none between modules), a kind or
an engine is reached only through the plug-in registry (transitively, with the remaining exemptions listed), the
values live low, the store's roles stay small, and modules stay small."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from import_graph import Graph, cycles, module_graph, reach, without
from import_graph import path as way_to

from coco_sql.store.base import ROLES

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


def _part(parts: list[str]) -> str:
    """The node of a module (its path parts under coco_sql, without `.py`): the top-level part, except that a
    kind or an engine is a node of its own above its package's protocols (`languages.base`): a kind may use the
    loop's parts (mutators, the draft environment) that themselves use only the protocols. (The SQL checker other
    kinds read is no kind's library any more: it is `sqlkit/`, issue 41.)"""
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


# -- kinds and engines are plug-ins (issues 28, 41): checked on the module graph, transitively ------------------
# Every module and what it imports, lazily too (`tests/import_graph.py`): a rule below holds for everything a
# module reaches, not only for what it names. What would still cross a line is listed below, edge by edge.
GRAPH = module_graph(PACKAGE)
KIND_NEUTRAL = ("engine", "api.py", "reflect", "search", "primitives", "mutate")
KIND_COMPARISON = re.compile(r"""(language|dialect) ?[!=]= ?["']""")
# Empty (issue 41 step 6): a kind's own CLI commands are plug-in commands (`plugin_loader.BUILTIN_COMMANDS`,
# `BUILTIN_INIT_SOURCES`), the AI_CLASSIFY arguments both kinds edit are `sqlkit.ai_classify`, and the CLI, the
# SQL kind and `coco_sql.connect` reach an engine's parts (`connect`, `ai_optimizer`, `warehouse_commands`) through
# the registry. An edge that has to cross a line again is listed here with why; the lists only shrink.
KIND_EXEMPTIONS: dict[tuple[str, str], str] = {}
NEUTRAL_EXEMPTIONS: dict[tuple[str, str], str] = {}
ENGINE_EXEMPTIONS: dict[tuple[str, str], str] = {}


def kind_of(module: str) -> str | None:
    """The concrete kind a module belongs to (`languages/<kind>/`), None for every other module."""
    parts = module.split(".")
    seam = {"base", "kind", "highlighting"}
    return parts[2] if len(parts) > 2 and parts[1] == "languages" and parts[2] not in seam else None


def engine_of(module: str) -> str | None:
    """The concrete engine a module belongs to (`engines/<engine>/`), None for every other module."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "engines" else None


def crossings(graph: Graph, line: Callable[[str, str], bool]) -> dict[str, str]:
    """For each module, the first module across `line(module, target)` that it reaches (and the way there)."""
    found = {}
    for module in sorted(graph):
        parents = reach(graph, module)
        across = sorted(t for t in parents if line(module, t))
        if across:
            found[module] = way_to(parents, across[0])
    return found


def other_kind(module: str, target: str) -> bool:
    """A kind reaching another kind's module; a module of no kind reaching a kind's module (engines too)."""
    return kind_of(target) is not None and kind_of(target) != kind_of(module)


def an_engine(module: str, target: str) -> bool:
    """A module outside `engines/` reaching an engine's module."""
    return engine_of(target) is not None and engine_of(module) is None


def test_imports_form_no_circle_module_by_module() -> None:
    """No import circle at all, one node per module (lazy imports in, TYPE_CHECKING out): issue 41 found one of
    27 modules closing through `languages/base.py`, and three small ones in the Snowflake and Python packages."""
    assert len(GRAPH) > 250 and "coco_sql.languages.base" in GRAPH["coco_sql.evaluate.evaluator"]
    assert cycles(GRAPH) == []


def test_no_kind_reaches_another_kind_but_through_the_listed_edges() -> None:
    assert crossings(without(GRAPH, KIND_EXEMPTIONS | NEUTRAL_EXEMPTIONS), other_kind) == {}


def test_nothing_outside_engines_reaches_an_engine_but_through_the_listed_edges() -> None:
    assert crossings(without(GRAPH, ENGINE_EXEMPTIONS), an_engine) == {}


def test_every_listed_exemption_is_still_an_edge() -> None:
    """An exemption whose import is gone is deleted, not kept: the lists only shrink."""
    listed = {**KIND_EXEMPTIONS, **NEUTRAL_EXEMPTIONS, **ENGINE_EXEMPTIONS}
    assert [edge for edge in listed if edge[1] not in GRAPH.get(edge[0], set())] == []


def test_the_sql_toolkit_reaches_no_kind_and_no_engine() -> None:
    """`sqlkit/` (parsing, the read-only check, allow-list, macros, the one-line rejection) is below every kind
    that holds SQL and names no engine: it reaches nothing of `languages/` or `engines/`, lazily either."""
    toolkit = [m for m in GRAPH if m.startswith("coco_sql.sqlkit")]
    assert {"coco_sql.sqlkit.parsing", "coco_sql.sqlkit.macros", "coco_sql.sqlkit.rejection"} <= set(toolkit)
    below = {m: way_to(p, t) for m in toolkit if (p := reach(GRAPH, m))
             for t in p if t.startswith(("coco_sql.languages.", "coco_sql.engines."))}  # fmt: skip
    assert below == {}


def test_a_shortcut_added_back_fails_the_rules() -> None:
    """Planted edges (the issue's own examples) are found, however far they reach."""
    planted = {m: set(t) for m, t in GRAPH.items()}
    planted["coco_sql.primitives.library"].add("coco_sql.languages.dbt.edits")  # a neutral module, a kind
    assert "coco_sql.primitives.library" in crossings(without(planted, NEUTRAL_EXEMPTIONS), other_kind)
    reached = crossings(without(planted, NEUTRAL_EXEMPTIONS | KIND_EXEMPTIONS), other_kind)
    assert "coco_sql.languages.python.primitives" in reached  # python reaches dbt through primitives/
    planted["coco_sql.store.base"].add("coco_sql.engines.snowflake.translate")  # the store, an engine
    assert "coco_sql.api" in crossings(without(planted, ENGINE_EXEMPTIONS), an_engine)
    # the shortcuts step 6 took out, put back: a kind's command, a kind's edits, an engine's part named directly
    planted = {m: set(t) for m, t in GRAPH.items()}
    planted["coco_sql.cli_init"].add("coco_sql.languages.dbt.init_task")
    planted["coco_sql.languages.dbt.ai_labels"].add("coco_sql.languages.sql.mutate.ai_edits")
    reached = crossings(without(planted, KIND_EXEMPTIONS | NEUTRAL_EXEMPTIONS), other_kind)
    assert {"coco_sql.cli", "coco_sql.cli_init", "coco_sql.languages.dbt.ai_labels"} <= set(reached)
    planted["coco_sql.languages.sql.aifo"].add("coco_sql.engines.snowflake.aifo")
    planted["coco_sql"].add("coco_sql.engines.duckdb.procedures")
    reached = crossings(without(planted, ENGINE_EXEMPTIONS), an_engine)
    found = {"coco_sql", "coco_sql.languages.sql.aifo", "coco_sql.languages.sql.export.ai_function"}
    assert found <= set(reached)  # the export reaches the engine through the kind's aifo
    planted["coco_sql.languages.base"].add("coco_sql.evaluate")  # a type import made real: the old circle
    assert any("coco_sql.languages.base" in c for c in cycles(planted))


# -- engine-neutral numerics (issue 41 step 2) ------------------------------------------------------------------
AI_RUNTIME = ("coco_sql.engines.", "coco_sql.languages.")  # the AI runtime is the DuckDB engine's (`ai/`)


def numerics_reach(graph: Graph) -> set[str]:
    """What the neutral numerics module, and the SQL kind's offline fitting that uses it, reach of the AI runtime
    (`engines/duckdb/ai/`), an engine or (for numerics) a kind."""
    fitting = ("coco_sql.languages.sql.mutate.centroid_head", "coco_sql.languages.sql.mutate.proxy_fit")
    found = {t for t in reach(graph, "coco_sql.numerics") if t.startswith(AI_RUNTIME)}
    return found | {
        t for m in fitting for t in graph.get(m, set()) if t.startswith("coco_sql.engines.duckdb.ai.semantic")
    }


def test_the_neutral_numerics_reach_no_engine_and_no_ai_runtime() -> None:
    """`numerics.py` (softmax) is below the AI runtime and the kinds: the SQL kind's mutators fit their heads
    with it and do not import the runtime's `semantic` for it. A planted import back is found."""
    assert "coco_sql.numerics" in GRAPH and numerics_reach(GRAPH) == set()
    planted = {m: set(t) for m, t in GRAPH.items()}
    planted["coco_sql.languages.sql.mutate.centroid_head"].add("coco_sql.engines.duckdb.ai.semantic")
    assert numerics_reach(planted) == {"coco_sql.engines.duckdb.ai.semantic"}


# -- types live low (issue 41 step 5) --------------------------------------------------------------------------
LOW = ("coco_sql.core", "coco_sql.store.records", "coco_sql.llm.usage", "coco_sql.llm.cache", "coco_sql.lazy")
TYPED = module_graph(PACKAGE, typing_only=True)


def test_the_values_import_nothing_above_them_type_only_either() -> None:
    """`core/` (Program, Outcome, Proposal, ...) and the records it is made of import nothing of coco-sql but each
    other, even under TYPE_CHECKING: everything may name them, and they name nothing that could name them."""
    low = [m for m in TYPED if m.startswith(LOW)]
    assert {"coco_sql.core.outcome", "coco_sql.core.proposal", "coco_sql.core.program"} <= set(low)
    above = {m: sorted(t for t in TYPED[m] if not t.startswith(LOW) and t != "coco_sql") for m in low}
    assert {m: t for m, t in above.items() if t} == {}


def test_the_kind_seam_names_none_of_its_consumers() -> None:
    """`languages/base.py` imports, type-only included, no module that imports it (directly or not): the circle
    the issue found closed through its type-only imports of `evaluate`, `mutate.base`, `reflect.environment`."""
    base = "coco_sql.languages.base"
    consumers = {m for m in GRAPH if m != base and base in reach(GRAPH, m)}
    assert {"coco_sql.evaluate.evaluator", "coco_sql.reflect.environment"} <= consumers
    assert sorted(TYPED[base] & consumers) == []


def test_type_imports_close_no_circle_either() -> None:
    """With `if TYPE_CHECKING:` imports counted, no circle either. The last three: the kind registry's (17
    modules: `plugins.kind()` returns a `KindPlugin`, whose parts name the loop's types, and loop modules looked
    kinds up through `plugins`; they now read `plugin_loader`, which names no kind's type), the dbt kind's
    evidence and the SQL kind's label words (each named a type of a module that imports it)."""
    assert cycles(TYPED) == []
    planted = {m: set(t) for m, t in TYPED.items()}
    planted["coco_sql.reflect.environment"].add("coco_sql.plugins")  # the loop looks a kind up, typed
    assert any({"coco_sql.plugins", "coco_sql.languages.kind"} <= set(c) for c in cycles(planted))
    planted = {m: set(t) for m, t in TYPED.items()}
    planted["coco_sql.languages.sql.mutate.label_words"].add("coco_sql.languages.sql.mutate.ai_edits")
    assert any("coco_sql.languages.sql.mutate.label_words" in c for c in cycles(planted))


# -- no dialect named outside engines/ (issue 41 step 2) ---------------------------------------------------------
DIALECT_NAMES = frozenset({"duckdb", "snowflake"})
# Where a dialect's name may be written outside `engines/`: the registry, which names the built-ins and which of
# them checks candidates (SANDBOX_DIALECT) and takes deploys (DEPLOY_DIALECT); `messages` (it imports only the
# standard library, by rule); and dbt's adapter type in a dbt profile (dbt-duckdb's name, not ours).
DIALECT_NAMED = {
    "coco_sql/plugin_loader.py": "the registry's built-ins",
}


def dialect_literals(path: Path) -> list[int]:
    """Lines of `path` with a string constant that is a dialect's name (docstrings are prose, not counted)."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }  # fmt: skip
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in DIALECT_NAMES and id(node) not in docs
    ]


def test_no_module_outside_engines_names_a_dialect(tmp_path: Path) -> None:
    """A module outside `engines/` writes `SANDBOX_DIALECT` or `DEPLOY_DIALECT` (`plugin_loader`), or asks its
    engine (`SqlRules.dialect`, `AiBinding.embed_model`), never "duckdb" or "snowflake" (issue 41 found 174 lines)."""
    root = PACKAGE.parent
    found = {
        str(path.relative_to(root)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if "engines" not in path.relative_to(PACKAGE).parts[:1] and (lines := dialect_literals(path))
    }
    assert sorted(set(found) - set(DIALECT_NAMED)) == []
    assert sorted(set(DIALECT_NAMED) - set(found)) == []  # the list only shrinks
    planted = tmp_path / "planted.py"
    planted.write_text('"""A module naming duckdb in prose."""\nDIALECT = "duckdb"\n')
    assert dialect_literals(planted) == [2]


def test_the_store_protocol_has_at_most_twelve_methods_per_role() -> None:
    sizes = {role.__name__: len([n for n in vars(role) if not n.startswith("_")]) for role in ROLES}
    assert sizes == {"RunWriter": 7, "RunReader": 12, "NamedQueries": 4, "TaskRegistry": 3}


def test_kind_neutral_packages_import_no_concrete_kind() -> None:
    """engine, api, reflect, search, primitives and mutate reach a kind only through `coco_sql.plugins`: PACE
    (`mutate/pace.py`, `primitives/`) and the shared draft -> test -> pick loop (`mutate/drafts.py`) reach none,
    not even the SQL checker (issue 41 step 3: each kind's half of PACE is in its own package)."""
    neutral = [
        m for m in GRAPH if m.count(".") and m.split(".")[1] in {p.removesuffix(".py") for p in KIND_NEUTRAL}
    ]
    assert len(neutral) > 40
    reached = crossings(without(GRAPH, NEUTRAL_EXEMPTIONS), other_kind)
    assert {m: w for m, w in reached.items() if m in neutral} == {}


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
    assert KIND_COMPARISON.search(planted.read_text().splitlines()[1])
    assert other_kind("coco_sql.engine.loop", "coco_sql.languages.sql.exports")
    assert other_kind("coco_sql.languages.dbt.task", "coco_sql.languages.sql.check.validator")
    assert not other_kind("coco_sql.languages.sql.plugin", "coco_sql.languages.sql.exports")
    assert not other_kind("coco_sql.languages.dbt.task", "coco_sql.languages.base")
    assert an_engine("coco_sql.api", "coco_sql.engines.duckdb.store")
    assert not an_engine("coco_sql.engines.snowflake.store", "coco_sql.engines.duckdb.store")
    assert _part(["sqlkit", "validate"]) == "sqlkit"
    assert _part(["languages", "sql", "mutate", "offline"]) == "languages.sql"


# -- a kind is one package (issue 28): what is kind-specific lives in languages/<kind>/ ----------------------
GENERIC = (
    "mutate",
    "primitives",
)  # the Mutator interface, the draft loop, PACE's operators and library: no AST
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
    """The generic packages hold no kind's operators: no module under mutate/ or primitives/ reads a SQL AST
    (sqlglot) or imports a concrete kind, and no module outside a kind's package is named for one."""
    scanned = [p for part in GENERIC for p in (PACKAGE / part).rglob("*.py")]
    assert {p.stem for p in scanned} >= {"base", "choice", "pace", "drafts", "edits", "extraction"}
    found = {str(p.relative_to(PACKAGE)): sorted(i) for p in scanned if (i := _kind_specific_imports(p))}
    assert found == {}
    assert _misplaced_modules() == []
    assert (PACKAGE / "sqlkit" / "validate.py").is_file()
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
