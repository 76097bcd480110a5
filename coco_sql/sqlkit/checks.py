"""The shared checks of a SQL program that a kind holds (the SQL kind's candidates, dbt's models, an agent spec's
tool SQL): parse (bounded), read-only, deterministic, the allow-list with arities, the tables read; a program in
an engine's dialect is checked by that engine's own checks too and translated to the DuckDB tree the sandbox runs
(`DialectChecks`, the engine's `checks` part). Every check raises a one-line `CandidateRejected`.

What is about a SQL program as a *candidate* (the id/output contract, the executed SQL) stays in the SQL kind
(`sqlkit.validate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, traverse_scope

from coco_sql.errors import ConfigError
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.plugins import engine, engine_names
from coco_sql.sqlkit.calls import check_functions, check_scalar_expression
from coco_sql.sqlkit.named_arguments import rewrite_named_arguments
from coco_sql.sqlkit.nodes import function_name
from coco_sql.sqlkit.parsing import (
    ALLOWED_ROOTS,
    FORBIDDEN_NODES,
    check_deterministic_constructs,
    check_read_only,
    parse_statement,
    statement_name,
)
from coco_sql.sqlkit.rejection import reject

if TYPE_CHECKING:
    from coco_sql.engines import EnginePlugin


class DialectChecks(Protocol):
    """An engine's own checks of a program written in its dialect, and its translation to DuckDB (its `checks`
    part: `engines.snowflake.checks`)."""

    table_functions: tuple[str, ...]  # the table functions its translation generates (allowed in FROM)

    def check_written(self, tree: exp.Expression, spec: ValidationSpec, source: str) -> None:
        """CandidateRejected unless every call in the tree as written is one the engine serves."""
        ...

    def to_duckdb(self, tree: exp.Expression, json_columns: frozenset[str]) -> exp.Expression:
        """The DuckDB tree of the program (what the sandbox runs)."""
        ...


@dataclass(frozen=True)
class ValidationSpec:
    """What a task allows: the input relation's columns, the output column, and extra functions."""

    input_columns: Mapping[str, str] = field(hash=False)  # a mapping is unhashable; the other fields suffice
    output_column: str
    allowed_functions: frozenset[str] = frozenset()
    relation: str = "input"
    dialect: str = SANDBOX_DIALECT
    # read-only tables beside the input relation, name -> columns (`tasks.references`: the training rows as
    # `examples` for AI tasks)
    references: Mapping[str, Mapping[str, str]] = field(default_factory=dict, hash=False)
    # the engine `dialect` names, resolved once per spec (`plugins.engine`): the checks read its parts (its SQL
    # rules, its AI binding, its own checks)
    engine: EnginePlugin = field(init=False, repr=False, compare=False, hash=False)
    # the task's label type (a contract type): an output column that is an AI call's whole object is refused
    # (`check.output_shape`); None: not checked
    output_type: str | None = None

    def __post_init__(self) -> None:
        # Freeze the mapping so a spec shared between threads cannot change under a running validation.
        object.__setattr__(self, "input_columns", MappingProxyType(dict(self.input_columns)))
        frozen = {name.lower(): MappingProxyType(dict(columns)) for name, columns in self.references.items()}
        object.__setattr__(self, "references", MappingProxyType(frozen))
        object.__setattr__(self, "allowed_functions", frozenset(f.upper() for f in self.allowed_functions))
        try:
            resolved = engine(self.dialect)
        except ConfigError:
            raise ValueError(
                f"unsupported dialect {self.dialect!r}; expected one of {sorted(engine_names())}"
            ) from None
        object.__setattr__(self, "engine", resolved)

    @property
    def json_columns(self) -> frozenset[str]:
        """Input columns holding JSON (a Snowflake VARIANT, OBJECT or ARRAY), lower case."""
        kinds = ("JSON", "VARIANT", "OBJECT", "ARRAY")
        return frozenset(name.lower() for name, kind in self.input_columns.items() if kind.upper() in kinds)

    @property
    def schema(self) -> dict[str, dict[str, str]]:
        """The sqlglot schema of the readable relations: the input relation (``id`` (VARCHAR) plus the input
        columns) and the reference tables."""
        tables = {name: dict(columns) for name, columns in self.references.items()}
        return {self.relation: {"id": "VARCHAR", **self.input_columns}, **tables}

    @property
    def dialect_checks(self) -> DialectChecks | None:
        """The engine's own checks of a program written in its dialect (None: its programs run as written)."""
        return self.engine.checks.load() if self.engine.checks is not None else None


def as_query(tree: exp.Expression, spec: ValidationSpec) -> tuple[exp.Query, bool]:
    """Return the tree as a query, wrapping a bare scalar expression as ``SELECT id, <expr> AS <output>``."""
    while isinstance(tree, exp.Subquery) and not tree.alias and isinstance(tree.this, exp.Query):
        tree = tree.this  # "(SELECT ...)" as a whole program: run the inner query
    if isinstance(tree, exp.Query):
        return tree, False
    if isinstance(tree, FORBIDDEN_NODES):
        raise reject(f"{statement_name(tree)} is not allowed: a candidate must be {ALLOWED_ROOTS}")
    if not isinstance(tree, exp.Condition):
        raise reject(f"expected {ALLOWED_ROOTS}, got {type(tree).__name__.upper()}")
    wrapped = exp.select(exp.column("id"), exp.alias_(tree, spec.output_column)).from_(
        exp.to_table(spec.relation)
    )
    return wrapped, True


# ------------------------------------------------------------------------------------------------ tables


PURE_TABLE_FUNCTIONS = frozenset({"GENERATE_SERIES", "RANGE"})
"""Table functions that compute their rows from their arguments alone (a date spine's numbers): allowed in FROM."""


def check_tables(tree: exp.Query, spec: ValidationSpec, table_functions: Iterable[str] = ()) -> None:
    """Only ``spec.relation`` (unqualified) and the query's CTEs may be read (check 5).

    Scope traversal tells CTE references apart from real tables (``find_all(exp.Table)`` cannot). We also
    require that every Table node was seen by the traversal, so a table in a position scopes do not model is
    rejected rather than silently skipped.
    """
    allowed_functions = {name.upper() for name in table_functions} | PURE_TABLE_FUNCTIONS
    relations = {spec.relation.lower(), *spec.references}
    readable = " and ".join(repr(name) for name in (spec.relation, *spec.references))
    only = (
        f"only the relation{'s' if spec.references else ''} {readable} and the query's own CTEs may be read"
    )
    try:
        scopes = traverse_scope(tree)
    except OptimizeError as error:
        raise reject(f"could not analyse the query's tables: {error}") from error
    seen: set[int] = set()
    for scope in scopes:
        for table in scope.tables:
            seen.add(id(table))
            _check_table(table, scope, relations, allowed_functions, only)
    for table in tree.find_all(exp.Table):
        if id(table) not in seen:
            raise reject(f"table reference {table.sql(SANDBOX_DIALECT)!r} in an unsupported position; {only}")


def _check_table(table: exp.Table, scope: Scope, relations: set[str], functions: set[str], only: str) -> None:
    """One FROM/JOIN source: a CTE reference, the input relation, or a generated json_each."""
    if isinstance(table.this, exp.Func):
        name = function_name(table.this)
        if name in functions:
            return
        raise reject(f"table function {name} is not allowed: {only}")
    if not isinstance(table.this, exp.Identifier):
        raise reject(f"table source {table.sql(SANDBOX_DIALECT)!r} is not allowed: {only}")
    name = table.name
    if table.db or table.catalog:
        raise reject(f"qualified table name {table.sql(SANDBOX_DIALECT)!r} is not allowed: {only}")
    if isinstance(scope.sources.get(table.alias_or_name), Scope):
        return  # a reference to one of the query's CTEs
    if table.this.quoted and any(ch in name for ch in "./\\:*?"):
        raise reject(f"reading a file ({name!r}) is not allowed: {only}")
    if name.lower() not in relations:
        raise reject(f"table {name!r} is not allowed: {only}")


def checked_query(source: str, spec: ValidationSpec, *, wrap: bool = True) -> tuple[exp.Query, bool]:
    """Every check but the output contract: the DuckDB tree to execute (AI calls not bound yet) and whether a
    bare scalar expression was wrapped into a query. With `wrap=False` a bare expression is refused (a dbt
    model has no id/output contract to wrap it in: `languages.dbt.validate`)."""
    query, wrapped, _ = _checked(source, spec, wrap, keep_written=False)
    return query, wrapped


def checked_trees(
    source: str, spec: ValidationSpec, *, wrap: bool = True
) -> tuple[exp.Query, bool, exp.Query]:
    """`checked_query`, and the query as written in the task's dialect after the same checks (named arguments
    rewritten): what a warehouse of that dialect runs (`languages.dbt.compiled`). For a DuckDB task it is the
    DuckDB tree itself (the same object).

    Policy checks on functions and statements run on the tree as written (so arity refers to what the
    author wrote: Snowflake's ``IFF(a, b)`` would otherwise vanish into a CASE). Table checks, and a second
    function pass, run on the DuckDB tree that is actually executed.
    """
    query, wrapped, written = _checked(source, spec, wrap, keep_written=True)
    assert written is not None
    return query, wrapped, written


def _checked(
    source: str, spec: ValidationSpec, wrap: bool, *, keep_written: bool
) -> tuple[exp.Query, bool, exp.Query | None]:
    tree = parse_statement(source, spec.dialect)
    check_read_only(tree)
    check_deterministic_constructs(tree)
    own = spec.dialect_checks
    # In Snowflake FLATTEN is a table function (parsed as Explode under Lateral/TableFromRows); it is allowed
    # only there, and it disappears in the rewrite to json_each.
    translated = own is not None
    check_functions(tree, spec, check_arity=True, flatten_in_from=translated, dialect_names=translated)
    if own is not None:
        own.check_written(tree, spec, source)
    tree = rewrite_named_arguments(tree, spec.engine.ai)  # Snowflake refuses names only we accepted
    if wrap:
        query, wrapped = as_query(tree, spec)
    elif isinstance(tree, exp.Query):
        query, wrapped = tree, False
    else:
        raise reject(f"expected one read-only query (SELECT / WITH / UNION ...), got {statement_name(tree)}")
    if wrapped:
        check_scalar_expression(query)
    table_functions: tuple[str, ...] = ()
    written: exp.Query | None = query
    if own is not None:
        # Tables are checked on the Snowflake tree too, so stages (@stage/file) and qualified names get a
        # precise message instead of a transpilation failure.
        check_tables(query, spec)
        written = query.copy() if keep_written else None
        transpiled = own.to_duckdb(query, spec.json_columns)
        if not isinstance(transpiled, exp.Query):
            raise reject(f"expected {ALLOWED_ROOTS} after transpiling, got {type(transpiled).__name__}")
        query = transpiled
        table_functions = own.table_functions
        check_read_only(query)
        check_functions(query, spec, check_arity=False, transpiled=True)
    check_tables(query, spec, table_functions)
    return query, wrapped, written
