"""EAP discovery without a model: extraction from a program and generation by combining two primitives.

PACE, "EAP Discovery": at most one new primitive per generation; extraction from a new history-best program
takes priority over generation, and the two never happen in the same generation (the loop's rule, not this
module's).

- Extraction (E2, offline): "refactors local logic from a newly evaluated historical best into a persistent EAP,
  strictly without altering or reevaluating the source program". `extract` returns a `Primitive` and leaves the
  program as it is.
  SQL: a guard (a CASE WHEN / IFF condition, or a WHERE / QUALIFY conjunct) becomes a scalar macro whose
  parameters are the columns it reads (sorted, unqualified). Python: a self-contained top-level helper the
  entry function calls becomes a primitive (renamed `p_<helper>`); only when there is none, a self-contained
  sub-expression of the entry function does (`def p_x(<the entry parameters it uses>): return <expr>`).
  Candidates are ranked largest first (AST nodes; ties: written order); `rng` picks uniformly among the `top`
  (default 3) largest, so the biggest guard does not always win; without an RNG the largest is taken; `prefer`
  (a candidate's text, from `sql_guards` / `python_candidates`) overrides the choice. Candidates whose
  definition, up to names, is already in the library are skipped.
- Generation (E3, offline stand-in): `combine` joins two primitives into one that differs from both (two SQL
  boolean macros by AND or OR; two numeric Python functions by a weighted sum). An LLM mutator generates
  richer ones from the E3 prompt.
- The edits operators use (`with_definitions`, `prune_definitions`, `replace_calls`, `refactor_into_call`) are in
  `primitives.edits`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import sqlglot
from sqlglot import exp

from coco_sql.primitives.calls import adapter, parse_python, top_functions
from coco_sql.primitives.edits import _sql_parts
from coco_sql.primitives.library import Primitive, PrimitiveLibrary
from coco_sql.primitives.python_defs import (
    ImportLine,
    bound_names,
    free_names,
    loaded_names,
    module_imports,
    params_of,
    rename_def,
    render,
    split_code,
)
from coco_sql.sqlkit.macros import render_macro, split_macros
from coco_sql.sqlkit.parsing import parse_statement

if TYPE_CHECKING:
    pass

MIN_GUARD_NODES = 3
MIN_EXPRESSION_NODES = 4
TOP_CANDIDATES = 3
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_BOOLEAN_ROOTS = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)


@dataclass(frozen=True)
class Candidate:
    """A piece of a program that could become a primitive: its text, size, parameters and definition."""

    text: str  # the guard or expression as written in the program (normal form)
    nodes: int
    params: tuple[str, ...]
    body: str  # SQL: the macro body over the params; Python: the def's source
    hint: str  # what the new primitive's name is made from
    imports: tuple[str, ...] = ()
    kind: str = "guard"  # guard (SQL) | helper | expression (Python)


# ------------------------------------------------------------------------------------------- SQL guards


def _is_ai(node: exp.Func) -> bool:
    """AI_COMPLETE, AI_FILTER, PROMPT (unknown to sqlglot) or AI_CLASSIFY, AI_AGG, ... (its own node types)."""
    if isinstance(node, exp.Anonymous):
        return node.name.upper().startswith(("AI_", "PROMPT"))
    return type(node).__name__.startswith("AI")


def _guard_nodes(query: exp.Expression) -> list[exp.Expression]:
    """CASE WHEN / IFF conditions and WHERE / QUALIFY conjuncts, in the order they are written."""
    found: list[exp.Expression] = []
    for node in query.walk(bfs=False):
        if isinstance(node, exp.If):
            found.append(node.this)
        elif isinstance(node, exp.Where | exp.Qualify):
            found.extend(node.this.flatten() if isinstance(node.this, exp.And) else [node.this])
    return found


def sql_guards(
    code: str, *, dialect: str = "duckdb", macro_names: frozenset[str] = frozenset()
) -> list[Candidate]:
    """The guards of a SQL program that qualify for extraction, largest first (then in written order), one per
    distinct text. A guard qualifies when it reads at least one column, has at least MIN_GUARD_NODES nodes, is
    not already a single macro call, calls no macro, and holds no subquery, window or AI function; its columns
    are plain identifiers of at most one table (qualifiers are dropped)."""
    macros, query_text = split_macros(code, dialect)
    names = macro_names | {m.name for m in macros}
    query = parse_statement(query_text, dialect)
    seen: dict[str, tuple[int, Candidate]] = {}
    for position, guard in enumerate(_guard_nodes(query)):
        candidate = _guard_candidate(guard, names, dialect)
        if candidate is not None and candidate.text not in seen:
            seen[candidate.text] = (position, candidate)
    ranked = sorted(seen.values(), key=lambda pc: (-pc[1].nodes, pc[0]))
    return [c for _, c in ranked]


def _guard_candidate(
    guard: exp.Expression, macros: set[str] | frozenset[str], dialect: str
) -> Candidate | None:
    columns = list(guard.find_all(exp.Column))
    nodes = sum(1 for _ in guard.walk())
    if not columns or nodes < MIN_GUARD_NODES:
        return None
    if isinstance(guard, exp.Anonymous) and guard.name.lower() in macros:
        return None
    for node in guard.walk():
        if isinstance(node, exp.Query | exp.Window | exp.AggFunc | exp.Star | exp.Dot) or (
            isinstance(node, exp.Func) and _is_ai(node)
        ):
            return None
        if isinstance(node, exp.Anonymous) and node.name.lower() in macros:
            return None
    if len({c.table.lower() for c in columns if c.table}) > 1:
        return None
    params = tuple(sorted({c.name.lower() for c in columns}))
    if not all(_IDENTIFIER.fullmatch(p) for p in params):
        return None

    def unqualify(node: exp.Expression) -> exp.Expression:
        return exp.column(node.name.lower()) if isinstance(node, exp.Column) else node

    body = guard.copy().transform(unqualify, copy=False)
    text = guard.sql(dialect=dialect)
    hint = "_".join([*params[:2], type(guard).__name__.lower()])
    return Candidate(text, nodes, params, body.sql(dialect=dialect), hint)


def canonical_sql(params: tuple[str, ...], body: str, dialect: str) -> str:
    """A macro body with its parameters renamed a0, a1, ... in order: equal for two macros that differ only in
    their name and parameter names."""
    rename = {p: f"a{i}" for i, p in enumerate(params)}
    tree = sqlglot.parse_one(body, read=dialect)

    def sub(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name.lower() in rename:
            return exp.column(rename[node.name.lower()])
        return node

    return tree.transform(sub).sql(dialect=dialect)


def library_sql_forms(library: PrimitiveLibrary, dialect: str) -> set[str]:
    forms = set()
    for p in library.for_language("sql"):
        params, body = _sql_parts(p, dialect)
        forms.add(canonical_sql(params, body.sql(dialect=dialect), dialect))
    return forms


# ------------------------------------------------------------------------------------- Python candidates


def _def_of(source: str) -> ast.FunctionDef:
    """The one def of a candidate's source."""
    function = parse_python(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    return function


def canonical_python(function: ast.FunctionDef) -> str:
    """A def written with a fixed name (two primitives differing only in name are equal)."""
    return ast.unparse(rename_def(function, "_"))


def library_python_forms(library: PrimitiveLibrary) -> set[str]:
    return {canonical_python(split_code(p.code)[1]) for p in library.for_language("python")}


def python_candidates(code: str, entry: str, *, exclude: frozenset[str] = frozenset()) -> list[Candidate]:
    """What a Python program offers, best first: the self-contained top-level helpers the entry function calls
    (in call order; names in `exclude`, the library's, are skipped), then the entry's self-contained
    sub-expressions (Call, BinOp or Subscript of at least MIN_EXPRESSION_NODES nodes whose free names are all
    entry parameters or imported names), largest first. A value the entry's body returns directly is not a
    candidate: it is the target's own decision, not a part of it ("smaller than the complete algorithm")."""
    tree = parse_python(code)
    functions = top_functions(tree)
    target = functions.get(entry)
    if target is None:
        return []
    imports = module_imports(tree)
    found: list[Candidate] = []
    called = [
        n.func.id
        for n in ast.walk(target)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions
    ]
    for name in dict.fromkeys(called):
        helper = functions[name]
        if (
            name == entry
            or name in exclude
            or helper.decorator_list
            or helper.args.vararg
            or helper.args.kwarg
        ):
            continue
        free = free_names(helper)
        if free - set(imports):
            continue  # reads a global, another function, or itself: not self-contained
        needed = tuple(sorted(imports[a].statement for a in free))
        nodes = sum(1 for _ in ast.walk(helper))
        found.append(
            Candidate(name, nodes, tuple(params_of(helper)), ast.unparse(helper), name, needed, "helper")
        )
    found.extend(_expression_candidates(target, imports))
    return found


def _expression_candidates(target: ast.FunctionDef, imports: dict[str, ImportLine]) -> list[Candidate]:
    params = params_of(target)
    local = bound_names(target) - set(params)
    returned = {id(n.value) for n in target.body if isinstance(n, ast.Return) and n.value is not None}
    ranked: list[tuple[int, int, int, Candidate]] = []
    seen: set[str] = set()
    for node in ast.walk(target):
        if id(node) in returned or not isinstance(node, ast.Call | ast.BinOp | ast.Subscript):
            continue
        if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            continue
        if any(
            isinstance(n, ast.Lambda | ast.comprehension | ast.NamedExpr | ast.Await) for n in ast.walk(node)
        ):
            continue
        nodes = sum(1 for _ in ast.walk(node))
        names = loaded_names(node)
        if nodes < MIN_EXPRESSION_NODES or names & local or names - set(params) - set(imports):
            continue
        text = ast.unparse(node)
        if text in seen:
            continue
        seen.add(text)
        used = tuple(p for p in params if p in names)
        needed = tuple(sorted(imports[n].statement for n in names if n in imports))
        body = f"def _({', '.join(used)}):\n    return {text}"
        candidate = Candidate(text, nodes, used, body, _expression_hint(node), needed, "expression")
        ranked.append((-nodes, node.lineno, node.col_offset, candidate))
    return [c for *_, c in sorted(ranked, key=lambda r: r[:3])]


def _expression_hint(node: ast.AST) -> str:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node, ast.Call):
        return node.func.id if isinstance(node.func, ast.Name) else "call"
    if isinstance(node, ast.BinOp):
        return type(node.op).__name__.lower()
    root = node
    while isinstance(root, ast.Subscript | ast.Attribute):
        root = root.value
    return f"{root.id}_at" if isinstance(root, ast.Name) else "item"


# ---------------------------------------------------------------------------------------------- extract


def _choose(
    candidates: list[Candidate], rng: np.random.Generator | None, prefer: str | None, top: int
) -> Candidate | None:
    if not candidates:
        return None
    if prefer is not None:
        return next((c for c in candidates if c.text == prefer), None)
    pool = candidates[: max(1, top)]
    return pool[int(rng.integers(len(pool)))] if rng is not None else pool[0]


def extract(
    code: str,
    language: str,
    library: PrimitiveLibrary,
    *,
    origin_program: str | None,
    iteration: int,
    dialect: str = "duckdb",
    entry: str | None = None,
    rng: np.random.Generator | None = None,
    prefer: str | None = None,
    top: int = TOP_CANDIDATES,
) -> Primitive | None:
    """One primitive refactored out of `code` (E2, offline), or None when nothing qualifies or every candidate
    is already in the library. The program itself is not touched. Python needs the task's `entry` function."""
    return adapter(language).extract(
        code, library, origin_program=origin_program, iteration=iteration, dialect=dialect, entry=entry, rng=rng,
        prefer=prefer, top=top,
    )  # fmt: skip


def extract_sql(
    code: str,
    library: PrimitiveLibrary,
    *,
    origin_program: str | None,
    iteration: int,
    dialect: str,
    rng: np.random.Generator | None,
    prefer: str | None,
    top: int,
) -> Primitive | None:
    """`extract` for SQL: a guard becomes a scalar macro."""
    forms = library_sql_forms(library, dialect)
    candidates = [
        c
        for c in sql_guards(code, dialect=dialect, macro_names=frozenset(library.names("sql")))
        if canonical_sql(c.params, c.body, dialect) not in forms
    ]
    chosen = _choose(candidates, rng, prefer, top)
    if chosen is None:
        return None
    name = library.unique_name(chosen.hint)
    body = sqlglot.parse_one(chosen.body, read=dialect)
    return Primitive(
        name, "sql", render_macro(name, chosen.params, body, dialect), f"{name}({', '.join(chosen.params)})",
        origin_program, iteration, "extracted",
    )  # fmt: skip


def extract_python(
    code: str,
    library: PrimitiveLibrary,
    *,
    origin_program: str | None,
    iteration: int,
    entry: str | None,
    rng: np.random.Generator | None,
    prefer: str | None,
    top: int,
) -> Primitive | None:
    """`extract` for Python: a self-contained helper, else a sub-expression of the entry function."""
    if entry is None:
        raise ValueError("Python extraction needs the entry function's name")
    forms = library_python_forms(library)
    candidates = [
        c
        for c in python_candidates(code, entry, exclude=frozenset(library.names("python")))
        if canonical_python(_def_of(c.body)) not in forms
    ]
    helpers = [c for c in candidates if c.kind == "helper"]
    chosen = _choose(helpers if helpers and prefer is None else candidates, rng, prefer, top)
    if chosen is None:
        return None
    name = library.unique_name(chosen.hint)
    function = rename_def(_def_of(chosen.body), name)
    return Primitive(
        name, "python", render(function, chosen.imports), f"{name}({', '.join(chosen.params)})", origin_program,
        iteration, "extracted",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------- generation


def _is_boolean(body: exp.Expression) -> bool:
    inner = body.unnest() if isinstance(body, exp.Paren) else body
    return isinstance(inner, _BOOLEAN_ROOTS)


_NON_NUMERIC = (
    ast.Compare, ast.BoolOp, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp, ast.JoinedStr, ast.Lambda,
)  # fmt: skip


def _returns_number(function: ast.FunctionDef) -> bool:
    """A heuristic: every return has a value that is not obviously a bool, a string or a collection."""
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    for r in returns:
        value = r.value
        if value is None or isinstance(value, _NON_NUMERIC):
            return False
        if isinstance(value, ast.Constant) and not isinstance(value.value, int | float):
            return False
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
            return False
    return bool(returns)


def combine(
    a: Primitive,
    b: Primitive,
    library: PrimitiveLibrary,
    rng: np.random.Generator,
    *,
    iteration: int,
    dialect: str = "duckdb",
) -> Primitive | None:
    """A new primitive made of two of the library's (E3 without a model: "a self-contained function whose
    capability differs from the current EAPs"), or None when they do not combine or the result is already in
    the library. SQL: two boolean macros joined by AND or OR (the RNG picks), over both parameter lists.
    Python: two functions returning numbers, as nested copies mixed by a weighted sum w*a + (1-w)*b with
    w drawn from `rng` (nested, because a primitive must not call another primitive)."""
    if a.language != b.language or a.name == b.name:
        return None
    return adapter(a.language).combine(a, b, library, rng, iteration=iteration, dialect=dialect)


def combine_sql(
    a: Primitive,
    b: Primitive,
    library: PrimitiveLibrary,
    rng: np.random.Generator,
    *,
    iteration: int,
    dialect: str,
) -> Primitive | None:
    """`combine` for SQL: two boolean macros joined by AND or OR."""
    (pa, ba), (pb, bb) = _sql_parts(a, dialect), _sql_parts(b, dialect)
    if not (_is_boolean(ba) and _is_boolean(bb)):
        return None
    params = (*pa, *(p for p in pb if p not in pa))
    op = "and" if int(rng.integers(2)) == 0 else "or"
    joined = (exp.and_ if op == "and" else exp.or_)(exp.Paren(this=ba.copy()), exp.Paren(this=bb.copy()))
    if canonical_sql(params, joined.sql(dialect=dialect), dialect) in library_sql_forms(library, dialect):
        return None
    name = library.unique_name(f"{_short(a)}_{op}_{_short(b)}")
    return Primitive(
        name, "sql", render_macro(name, params, joined, dialect), f"{name}({', '.join(params)})", None,
        iteration, "generated",
    )  # fmt: skip


def combine_python(
    a: Primitive, b: Primitive, library: PrimitiveLibrary, rng: np.random.Generator, *, iteration: int
) -> Primitive | None:
    """`combine` for Python: two numeric functions mixed by a weighted sum."""
    (ia, fa), (ib, fb) = split_code(a.code), split_code(b.code)
    if not (_returns_number(fa) and _returns_number(fb)):
        return None
    pa, pb = params_of(fa), params_of(fb)
    params = [*pa, *(p for p in pb if p not in pa)]
    weight = round(float(rng.uniform(0.2, 0.8)), 2)
    source = (
        f"def _({', '.join(params)}):\n"
        + _indent(ast.unparse(rename_def(fa, "_first")))
        + _indent(ast.unparse(rename_def(fb, "_second")))
        + f"    return {weight} * _first({', '.join(pa)}) + {round(1 - weight, 2)} * _second({', '.join(pb)})\n"
    )
    function = _def_of(source)
    if canonical_python(function) in library_python_forms(library):
        return None
    name = library.unique_name(f"{_short(a)}_mix_{_short(b)}")
    return Primitive(
        name, "python", render(rename_def(function, name), (*ia, *ib)), f"{name}({', '.join(params)})", None,
        iteration, "generated",
    )  # fmt: skip


def _short(primitive: Primitive) -> str:
    return primitive.name.removeprefix("p_")[:10]


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


# ------------------------------------------------------------------------------------------ program edits
