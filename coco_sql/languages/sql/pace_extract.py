"""EAP discovery without a model on a SQL program (the SQL half of `primitives.extraction` and `primitives.adopt`).

Extraction (E2): a guard (a CASE WHEN / IFF condition, or a WHERE / QUALIFY conjunct) becomes a scalar macro whose
parameters are the columns it reads (sorted, unqualified). Generation (E3): two boolean macros joined by AND or OR.
Adoption: one scalar `CREATE MACRO` (the rules of `sqlkit.macros`) whose body calls no library primitive,
not equal up to names to one the library has.
"""

from __future__ import annotations

import re

import numpy as np
import sqlglot
from sqlglot import exp

from coco_sql.errors import CandidateRejected
from coco_sql.languages.sql.pace_edits import sql_parts
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.primitives.adopt import library_name
from coco_sql.primitives.extraction import Candidate, choose, short_name
from coco_sql.primitives.library import Primitive, PrimitiveLibrary
from coco_sql.sqlkit.macros import render_macro, split_macros
from coco_sql.sqlkit.parsing import parse_statement

MIN_GUARD_NODES = 3


_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


_BOOLEAN_ROOTS = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)


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
    code: str, *, dialect: str = SANDBOX_DIALECT, macro_names: frozenset[str] = frozenset()
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
        params, body = sql_parts(p, dialect)
        forms.add(canonical_sql(params, body.sql(dialect=dialect), dialect))
    return forms


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
    chosen = choose(candidates, rng, prefer, top)
    if chosen is None:
        return None
    name = library.unique_name(chosen.hint)
    body = sqlglot.parse_one(chosen.body, read=dialect)
    return Primitive(
        name, "sql", render_macro(name, chosen.params, body, dialect), f"{name}({', '.join(chosen.params)})",
        origin_program, iteration, "extracted",
    )  # fmt: skip


def _is_boolean(body: exp.Expression) -> bool:
    inner = body.unnest() if isinstance(body, exp.Paren) else body
    return isinstance(inner, _BOOLEAN_ROOTS)


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
    (pa, ba), (pb, bb) = sql_parts(a, dialect), sql_parts(b, dialect)
    if not (_is_boolean(ba) and _is_boolean(bb)):
        return None
    params = (*pa, *(p for p in pb if p not in pa))
    op = "and" if int(rng.integers(2)) == 0 else "or"
    joined = (exp.and_ if op == "and" else exp.or_)(exp.Paren(this=ba.copy()), exp.Paren(this=bb.copy()))
    if canonical_sql(params, joined.sql(dialect=dialect), dialect) in library_sql_forms(library, dialect):
        return None
    name = library.unique_name(f"{short_name(a)}_{op}_{short_name(b)}")
    return Primitive(
        name, "sql", render_macro(name, params, joined, dialect), f"{name}({', '.join(params)})", None,
        iteration, "generated",
    )  # fmt: skip


def adopt_sql(
    code: str,
    library: PrimitiveLibrary,
    how: str,
    iteration: int,
    origin_program: str | None,
    dialect: str,
) -> Primitive:
    macros, _ = split_macros(f"{code.strip().rstrip(';')};\nSELECT 1", dialect)
    if len(macros) != 1:
        raise CandidateRejected(f"a SQL primitive is one CREATE MACRO statement, not {len(macros)}")
    macro = macros[0]
    known = set(library.names("sql"))
    called = sorted({c.name.lower() for c in macro.body.find_all(exp.Anonymous)} & known)
    if called:
        raise CandidateRejected(
            f"macro {macro.name} calls {', '.join(called)}: a primitive must not call another"
        )
    body = macro.body.sql(dialect=dialect)
    if canonical_sql(macro.params, body, dialect) in library_sql_forms(library, dialect):
        raise CandidateRejected(f"macro {macro.name} is a primitive the library already has")
    name = library_name(macro.name, library)
    return Primitive(
        name, "sql", render_macro(name, macro.params, macro.body, dialect),
        f"{name}({', '.join(macro.params)})", origin_program, iteration, how,
    )  # fmt: skip
