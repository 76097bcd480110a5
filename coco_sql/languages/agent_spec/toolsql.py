"""The SQL of an agent's tools, checked by the candidate validator's own rules and bound to a call's arguments.

A tool's query (a parameterised tool's ``sql``, a verified query, or what the model writes for a free SQL tool)
goes through the checks of `coco_sql.sqlkit.validate`, composed here without its output contract (a tool
returns whatever columns it selects): one statement; read-only anywhere in the tree; no sampling; allow-listed
functions with their arities (Snowflake's names in the Snowflake dialect); only the tables the tool may read and
the query's own CTEs; every column resolved against those tables. A Snowflake query is then transpiled to the
DuckDB query the sandbox runs, and the transpiled tree is checked again, as for candidates.

Parameters are ``:name`` placeholders (sqlglot's named Placeholder, Snowflake Scripting's bind syntax, so the
export can use the text unchanged). They are checked in place (every placeholder is a parameter, every parameter
is used, no positional ``?``) and then replaced by literals: typed stand-ins for the static check, the call's
arguments for a run. Arguments become sqlglot literal nodes, never text pasted into SQL, and the bound tree is
checked again before it runs.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from coco_sql.errors import CandidateRejected
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.calls import check_functions
from coco_sql.sqlkit.checks import ValidationSpec, check_tables
from coco_sql.sqlkit.named_arguments import rewrite_named_arguments
from coco_sql.sqlkit.parsing import check_deterministic_constructs, check_read_only, parse_statement
from coco_sql.sqlkit.rejection import one_line

TableSchemas = Mapping[str, Mapping[str, str]]  # table name -> column name -> type
MAX_ARGUMENT_CHARS = 1_000
_STAND_IN = {
    "string": exp.Literal.string(""),
    "number": exp.Literal.number(0),
    "integer": exp.Literal.number(0),
}


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed every check: as written (`source`, placeholders bound), and the DuckDB text to run."""

    source: str
    runnable: str
    tables: frozenset[str]


def placeholders(tree: exp.Expression) -> list[exp.Placeholder]:
    return list(tree.find_all(exp.Placeholder))


def check_query(
    source: str, tables: TableSchemas, readable: Collection[str], *, dialect: str,
    parameters: Mapping[str, str] | None = None,
) -> CheckedQuery:  # fmt: skip
    """Check `source` with `:name` placeholders standing for `parameters` (name -> JSON type); CandidateRejected
    otherwise. `readable` are the tables it may read, each one of `tables`."""
    tree = parse_statement(source, dialect)
    _check_placeholders(tree, parameters or {})
    bound = _bind(tree, {name: _STAND_IN.get(kind, exp.true()) for name, kind in (parameters or {}).items()})
    return _checked(bound, source, tables, readable, dialect)


def bind_query(
    source: str, tables: TableSchemas, readable: Collection[str], *, dialect: str,
    parameters: Mapping[str, str], arguments: Mapping[str, object],
) -> CheckedQuery:  # fmt: skip
    """`source` with each `:name` replaced by the literal of `arguments[name]`, checked again; CandidateRejected
    (one line, written for the model) for an argument that is missing, unknown or of the wrong type."""
    tree = parse_statement(source, dialect)
    _check_placeholders(tree, parameters)
    unknown = sorted(set(arguments) - set(parameters))
    if unknown:
        raise CandidateRejected(
            f"unknown argument {unknown[0]!r}; the parameters are {', '.join(parameters)}"
        )
    missing = [name for name in parameters if arguments.get(name) is None]
    if missing:
        raise CandidateRejected(f"argument {missing[0]!r} is required")
    literals = {name: _literal(name, kind, arguments[name]) for name, kind in parameters.items()}
    bound = _bind(tree, literals)
    return _checked(bound, bound.sql(dialect=dialect), tables, readable, dialect)


def _check_placeholders(tree: exp.Expression, parameters: Mapping[str, str]) -> None:
    used = []
    for node in placeholders(tree):
        name = node.name
        if not name or name == "?":
            raise CandidateRejected("positional placeholders (?) are not allowed: name each parameter, :name")
        if name not in parameters:
            known = ", ".join(f":{p}" for p in parameters) or "none"
            raise CandidateRejected(
                f"placeholder :{name} is not a parameter of this tool (its parameters: {known})"
            )
        used.append(name)
    unused = [name for name in parameters if name not in used]
    if unused:
        raise CandidateRejected(
            f"parameter {unused[0]!r} is never used in the query (write it as :{unused[0]})"
        )


def _literal(name: str, kind: str, value: object) -> exp.Expression:
    if kind == "boolean":
        if not isinstance(value, bool):
            raise CandidateRejected(f"argument {name!r} must be true or false, got {value!r}"[:300])
        return exp.true() if value else exp.false()
    if kind in ("number", "integer"):
        integral = isinstance(value, int) or (
            isinstance(value, float) and value.is_integer() and kind == "integer"
        )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind == "integer" and not integral)
        ):
            raise CandidateRejected(f"argument {name!r} must be {'a whole' if kind == 'integer' else 'a'} number, "
                                    f"got {value!r}"[:300])  # fmt: skip
        if not math.isfinite(value):
            raise CandidateRejected(f"argument {name!r} must be a finite number")
        return exp.Literal.number(int(value) if kind == "integer" else value)
    if not isinstance(value, str):
        raise CandidateRejected(f"argument {name!r} must be text, got {value!r}"[:300])
    if len(value) > MAX_ARGUMENT_CHARS:
        raise CandidateRejected(f"argument {name!r} is longer than {MAX_ARGUMENT_CHARS} characters")
    return exp.Literal.string(value)


def _bind(tree: exp.Expression, literals: Mapping[str, exp.Expression]) -> exp.Expression:
    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Placeholder) and node.name in literals:
            return literals[node.name].copy()
        return node

    return tree.transform(replace)


def _checked(
    tree: exp.Expression, source: str, tables: TableSchemas, readable: Collection[str], dialect: str
) -> CheckedQuery:
    """The candidate validator's checks without its output contract, on a tree without placeholders."""
    unknown = sorted(name for name in readable if name not in tables)
    if unknown:
        raise CandidateRejected(
            f"table {unknown[0]!r} is not a table of this task ({', '.join(sorted(tables))})"
        )
    if not readable:
        raise CandidateRejected("the tool may read no table")
    check_read_only(tree)
    check_deterministic_constructs(tree)
    while isinstance(tree, exp.Subquery) and not tree.alias and isinstance(tree.this, exp.Query):
        tree = tree.this
    if not isinstance(tree, exp.Query):
        raise CandidateRejected(
            f"expected one read-only query (SELECT / WITH ...), got {type(tree).__name__.upper()}"
        )
    names = sorted(readable)
    spec = ValidationSpec(
        input_columns=tables[names[0]], output_column="", relation=names[0], dialect=dialect,
        references={name: tables[name] for name in names[1:]},
    )  # fmt: skip
    own = spec.dialect_checks  # the engine's own checks and translation (Snowflake's); None for DuckDB
    translated = own is not None
    check_functions(tree, spec, check_arity=True, flatten_in_from=translated, dialect_names=translated)
    query: exp.Expression = rewrite_named_arguments(tree, spec.engine.ai)
    table_functions: tuple[str, ...] = ()
    if own is not None:
        own.check_written(query, spec, source)
        check_tables(query, spec)  # type: ignore[arg-type]
        query = own.to_duckdb(query, frozenset())
        check_read_only(query)
        check_functions(query, spec, check_arity=False, transpiled=True)
        table_functions = own.table_functions
    if not isinstance(query, exp.Query):
        raise CandidateRejected(f"expected a query after transpiling, got {type(query).__name__}")
    check_tables(query, spec, table_functions)
    schema = {name: dict(tables[name]) for name in names}
    try:
        qualify(
            query.copy(),
            schema=schema,
            dialect=SANDBOX_DIALECT,
            validate_qualify_columns=True,
            quote_identifiers=False,
        )
    except OptimizeError as error:
        raise CandidateRejected(one_line(f"column check failed: {error}; {_columns(schema)}")) from None
    read = {t.name.lower() for t in query.find_all(exp.Table)} & {n.lower() for n in names}
    return CheckedQuery(source=source, runnable=query.sql(dialect=SANDBOX_DIALECT), tables=frozenset(read))


def _columns(schema: Mapping[str, Mapping[str, str]]) -> str:
    return "; ".join(f"{name}: {', '.join(columns)}" for name, columns in schema.items())
