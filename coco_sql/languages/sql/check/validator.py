"""Static validation of untrusted candidate SQL before it reaches a warehouse.

A candidate is a query over one relation (``input``) returning ``id`` plus the contract's output column, or a
bare scalar expression that we wrap into such a query. Validation is layered, each check a pure function
raising :class:`~coco_sql.errors.CandidateRejected` with a one-line message naming the offending construct and
what is allowed, because that message is the mutator's only feedback:

1. parse (one statement, non-empty);
2. read-only: the root is a query and no DDL/DML/command node hides anywhere (e.g. DML inside a CTE);
3. functions: only the allow-list (plus the task's extras, e.g. AI functions), with arity checks, since
   sqlglot happily parses ``IFF(a, b)`` or ``random()``;
4. tables: only ``input`` (unqualified), the task's reference tables (``examples``) and the query's own CTEs; no
   table functions, no file paths;
5. output contract: every column resolves against ``input``'s schema, and ``id`` and the output column are
   returned.

This is the first line of defence, not the only one: the executor still runs candidates in a locked-down
DuckDB (no external access, read-only, timeouts). Static checks exist to give fast, specific feedback and to
keep obviously hostile text away from the warehouse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from coco_sql.engines import EnginePlugin
from coco_sql.languages.sql.check.calls import (
    check_functions,
    check_scalar_expression,
    check_snowflake_functions,
)
from coco_sql.languages.sql.check.snowflake import JSON_EACH, snowflake_to_duckdb
from coco_sql.plugins import engine as named_engine
from coco_sql.sqlkit.ai_binding import bind_ai_calls
from coco_sql.sqlkit.bounds import recursion_guard
from coco_sql.sqlkit.named_arguments import rewrite_named_arguments
from coco_sql.sqlkit.nodes import function_name
from coco_sql.sqlkit.output_shape import check_output_shape
from coco_sql.sqlkit.parsing import (
    ALLOWED_ROOTS,
    FORBIDDEN_NODES,
    check_deterministic_constructs,
    check_read_only,
    parse_statement,
    statement_name,
)
from coco_sql.sqlkit.rejection import reject

SUPPORTED_DIALECTS = frozenset({"duckdb", "snowflake"})


@dataclass(frozen=True)
class ValidationSpec:
    """What a task allows: the input relation's columns, the output column, and extra functions."""

    input_columns: Mapping[str, str] = field(hash=False)  # a mapping is unhashable; the other fields suffice
    output_column: str
    allowed_functions: frozenset[str] = frozenset()
    relation: str = "input"
    dialect: str = "duckdb"
    # read-only tables beside the input relation, name -> columns (`tasks.references`: the training rows as
    # `examples` for AI tasks)
    references: Mapping[str, Mapping[str, str]] = field(default_factory=dict, hash=False)
    # the engine `dialect` names, resolved once per spec: the SQL checks read its parts (until they move into
    # the engine's own `checks` part: issue 41, a later step)
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
        if self.dialect not in SUPPORTED_DIALECTS:
            raise ValueError(
                f"unsupported dialect {self.dialect!r}; expected one of {sorted(SUPPORTED_DIALECTS)}"
            )
        object.__setattr__(self, "engine", named_engine(self.dialect))

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


@dataclass(frozen=True)
class ValidatedProgram:
    """A candidate that passed every check, with the DuckDB SQL to execute and its AST."""

    source: str
    sql: str
    wrapped: bool
    expression: exp.Query = field(compare=False, repr=False)


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


def parse_program(source: str, spec: ValidationSpec) -> exp.Query:
    """Parse, wrap a scalar expression, and transpile to a DuckDB AST, without policy checks.

    Used by AST mutators, which need the tree but validate their output separately. Raises
    ``CandidateRejected`` on parse errors (and when the statement cannot be a query at all).
    """
    tree = parse_statement(source, spec.dialect)
    tree = rewrite_named_arguments(tree)
    query, _ = as_query(tree, spec)
    if spec.engine.sql.translated:
        transpiled = snowflake_to_duckdb(query, spec.json_columns)
        if not isinstance(transpiled, exp.Query):
            raise reject(f"expected {ALLOWED_ROOTS} after transpiling, got {type(transpiled).__name__}")
        return transpiled
    return query


# --------------------------------------------------------------------------------------------- functions


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
            raise reject(f"table reference {table.sql('duckdb')!r} in an unsupported position; {only}")


def _check_table(table: exp.Table, scope: Scope, relations: set[str], functions: set[str], only: str) -> None:
    """One FROM/JOIN source: a CTE reference, the input relation, or a generated json_each."""
    if isinstance(table.this, exp.Func):
        name = function_name(table.this)
        if name in functions:
            return
        raise reject(f"table function {name} is not allowed: {only}")
    if not isinstance(table.this, exp.Identifier):
        raise reject(f"table source {table.sql('duckdb')!r} is not allowed: {only}")
    name = table.name
    if table.db or table.catalog:
        raise reject(f"qualified table name {table.sql('duckdb')!r} is not allowed: {only}")
    if isinstance(scope.sources.get(table.alias_or_name), Scope):
        return  # a reference to one of the query's CTEs
    if table.this.quoted and any(ch in name for ch in "./\\:*?"):
        raise reject(f"reading a file ({name!r}) is not allowed: {only}")
    if name.lower() not in relations:
        raise reject(f"table {name!r} is not allowed: {only}")


# ------------------------------------------------------------------------------------------------ output


def check_output(tree: exp.Query, spec: ValidationSpec) -> list[str]:
    """Resolve every column against the input schema, then require ``id`` and the output column (check 6).

    Qualification runs on a copy: it expands stars and adds aliases, which we need for ``named_selects`` but
    do not want in the SQL we store and show.
    """
    try:
        qualified = qualify(
            tree.copy(),
            schema=spec.schema,
            dialect="duckdb",
            validate_qualify_columns=True,
            quote_identifiers=False,
        )
    except OptimizeError as error:
        raise reject(f"column check failed: {error}; input columns are {_columns(spec)}") from error
    if not isinstance(qualified, exp.Query):
        raise reject(f"expected {ALLOWED_ROOTS}")
    returned = list(qualified.named_selects)
    lowered = {name.lower() for name in returned}
    missing = [c for c in ("id", spec.output_column) if c.lower() not in lowered]
    if missing:
        raise reject(
            f"query must return columns id and {spec.output_column}; missing {', '.join(missing)}; "
            f"it returns: {', '.join(returned) or 'nothing'}"
        )
    return returned


def _columns(spec: ValidationSpec) -> str:
    return ", ".join(["id", *spec.input_columns])


# ------------------------------------------------------------------------------------------------- entry


def validate_candidate(source: str, spec: ValidationSpec) -> ValidatedProgram:
    """Run every check on an untrusted candidate; return the DuckDB SQL to execute or raise CandidateRejected.

    The checks (`checked_query`), then the output contract (`check_output`), then the AI calls bound.
    """
    with recursion_guard():  # the parse is bounded (`sqlkit.bounds`); this catches what a deep stack adds
        query, wrapped = checked_query(source, spec)
        check_output(query, spec)
        if spec.output_type is not None:
            check_output_shape(query, spec.output_column, spec.output_type, spec.engine.sql.translated)
        # copy=False: the generator would otherwise deep-copy the whole tree first (~10 ms on 200 lines). The
        # DuckDB generator does not rewrite a DuckDB tree, so the checked tree is the one that produced `sql`.
        bind_ai_calls(query)  # last: it adds to_json/list calls that the checks above would not know
        sql = query.sql(dialect="duckdb", copy=False)
    return ValidatedProgram(source=source, sql=sql, wrapped=wrapped, expression=query)


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
    snowflake = spec.engine.sql.translated
    # In Snowflake FLATTEN is a table function (parsed as Explode under Lateral/TableFromRows); it is allowed
    # only there, and it disappears in the rewrite to json_each.
    check_functions(tree, spec, check_arity=True, snowflake_flatten=snowflake, snowflake_names=snowflake)
    if snowflake:
        check_snowflake_functions(tree, spec, source)
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
    if snowflake:
        # Tables are checked on the Snowflake tree too, so stages (@stage/file) and qualified names get a
        # precise message instead of a transpilation failure.
        check_tables(query, spec)
        written = query.copy() if keep_written else None
        transpiled = snowflake_to_duckdb(query, spec.json_columns)
        if not isinstance(transpiled, exp.Query):
            raise reject(f"expected {ALLOWED_ROOTS} after transpiling, got {type(transpiled).__name__}")
        query = transpiled
        table_functions = (JSON_EACH,)
        check_read_only(query)
        check_functions(query, spec, check_arity=False, transpiled=True)
    check_tables(query, spec, table_functions)
    return query, wrapped, written
