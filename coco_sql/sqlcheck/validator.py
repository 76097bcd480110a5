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

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError, SqlglotError, TokenError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from coco_sql.errors import CandidateRejected
from coco_sql.sqlcheck.ai_binding import bind_ai_calls
from coco_sql.sqlcheck.allowlist import (
    AI_SIGNATURES,
    BASE_FUNCTIONS,
    EXTERNAL_ACCESS,
    NON_DETERMINISTIC,
    TRANSPILED_FUNCTIONS,
    TYPED_ARITY_CHECKED,
    Arity,
    rejection_reason,
)
from coco_sql.sqlcheck.snowflake import (
    JSON_EACH,
    function_name,
    positional_arguments,
    rewrite_named_arguments,
    snowflake_to_duckdb,
)
from coco_sql.sqlcheck.snowflake_functions import EMBED_MODELS, SNOWFLAKE_FUNCTIONS, WrittenCalls, rejection

SUPPORTED_DIALECTS = frozenset({"duckdb", "snowflake"})
MAX_MESSAGE_CHARS = 400

_FORBIDDEN_NODE_NAMES = (
    "DDL",
    "DML",
    "Command",
    "Copy",
    "Set",
    "Use",
    "Pragma",
    "Attach",
    "Detach",
    "Transaction",
    "Commit",
    "Rollback",
    "Export",
    "Install",
    "Load",
    "LoadData",
    "Describe",
    "Summarize",
    "Show",
    "Kill",
    "Grant",
    "Revoke",
    "Analyze",
    "Cache",
    "Uncache",
    "Refresh",
    "Put",
    "Get",
    "Declare",
    "Execute",
    "Comment",
    "TruncateTable",
    "Merge",
    "Insert",
    "Update",
    "Delete",
    "Create",
    "Drop",
    "Alter",
)
FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    cls
    for cls in (getattr(exp, name, None) for name in _FORBIDDEN_NODE_NAMES)
    if isinstance(cls, type) and issubclass(cls, exp.Expression)
)
"""Statement node types that must not occur anywhere in a candidate (resolved against this sqlglot's exp)."""

_ALLOWED_ROOTS = (
    "a single read-only query (SELECT / WITH / UNION / INTERSECT / EXCEPT) or a scalar expression"
)
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


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


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Collapse whitespace and terminal escapes so a message is a single, bounded line."""
    flat = " ".join(_ANSI_ESCAPE.sub("", text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def reject(message: str) -> CandidateRejected:
    """Build the rejection raised by every check (always one line)."""
    return CandidateRejected(one_line(message))


# ----------------------------------------------------------------------------------------------- parsing


def _parse_error_message(error: SqlglotError) -> str:
    """sqlglot's first error as ``description (line L, col C)``, without its multi-line excerpt."""
    details = getattr(error, "errors", None)
    if details:
        first = details[0]
        where = f" (line {first.get('line')}, col {first.get('col')})" if first.get("line") else ""
        return f"could not parse candidate: {first.get('description')}{where}"
    return f"could not parse candidate: {error}"


def parse_statement(source: str, dialect: str) -> exp.Expression:
    """Parse ``source`` into exactly one statement (check 1 and 2)."""
    if not source or not source.strip():
        raise reject("empty candidate: expected a SQL query or a scalar expression")
    try:
        statements = [s for s in sqlglot.parse(source, read=dialect) if s is not None]
    except (ParseError, TokenError) as error:
        raise reject(_parse_error_message(error)) from error
    if len(statements) != 1:
        raise reject(f"expected exactly one statement, got {len(statements)}")
    return statements[0]


def _statement_name(node: exp.Expression) -> str:
    """A readable statement name for messages: ``CREATE TABLE``, ``CALL``, ``COPY``..."""
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    name = type(node).__name__.upper()
    kind = node.args.get("kind")
    return f"{name} {kind.upper()}" if isinstance(kind, str) and kind else name


def check_read_only(tree: exp.Expression) -> None:
    """Reject any statement node anywhere in the tree (check 3).

    Walking the whole tree, not just the root, catches DML nested in a CTE (``WITH d AS (DELETE ...)``) and
    any future construct that embeds a statement inside a query.
    """
    for node in tree.walk():
        if isinstance(node, FORBIDDEN_NODES):
            raise reject(f"{_statement_name(node)} is not allowed: a candidate must be {_ALLOWED_ROOTS}")


def check_deterministic_constructs(tree: exp.Expression) -> None:
    """Reject non-function sources of non-determinism or external input: sampling and query parameters.

    ``USING SAMPLE`` / ``TABLESAMPLE`` draw a random subset (scores would not be reproducible); ``$1`` / ``?``
    placeholders would read values bound by whoever runs the statement, which a candidate must not rely on.
    """
    for node in tree.walk():
        if isinstance(node, exp.TableSample):
            raise reject("TABLESAMPLE / USING SAMPLE is not allowed: sampling is non-deterministic")
        if isinstance(node, (exp.Placeholder, exp.Parameter)):
            name = node.sql(dialect="duckdb")
            raise reject(f"query parameter {name!r} is not allowed: read values from the input relation")


def as_query(tree: exp.Expression, spec: ValidationSpec) -> tuple[exp.Query, bool]:
    """Return the tree as a query, wrapping a bare scalar expression as ``SELECT id, <expr> AS <output>``."""
    while isinstance(tree, exp.Subquery) and not tree.alias and isinstance(tree.this, exp.Query):
        tree = tree.this  # "(SELECT ...)" as a whole program: run the inner query
    if isinstance(tree, exp.Query):
        return tree, False
    if isinstance(tree, FORBIDDEN_NODES):
        raise reject(f"{_statement_name(tree)} is not allowed: a candidate must be {_ALLOWED_ROOTS}")
    if not isinstance(tree, exp.Condition):
        raise reject(f"expected {_ALLOWED_ROOTS}, got {type(tree).__name__.upper()}")
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
    if spec.dialect == "snowflake":
        transpiled = snowflake_to_duckdb(query, spec.json_columns)
        if not isinstance(transpiled, exp.Query):
            raise reject(f"expected {_ALLOWED_ROOTS} after transpiling, got {type(transpiled).__name__}")
        return transpiled
    return query


# --------------------------------------------------------------------------------------------- functions


def _dotted_name(node: exp.Dot) -> str | None:
    """``SNOWFLAKE.CORTEX.COMPLETE`` for a schema-qualified call, or None when the Dot is not a call."""
    if not isinstance(node.expression, exp.Func):
        return None
    parts = [p.name for p in node.this.flatten()] if isinstance(node.this, exp.Dot) else [node.this.name]
    return ".".join([*parts, function_name(node.expression)]).upper()


def _candidate_names(node: exp.Func) -> list[str]:
    """Names under which a call may be allowed: the written name, else class name and ``sql_names()``."""
    if isinstance(node, exp.Anonymous):
        return [node.name.upper()]
    return [type(node).__name__.upper(), *(n.upper() for n in node.sql_names())]


def _arity_for(name: str, extras: frozenset[str]) -> Arity | None:
    """The arity table entry for an allowed name; None when allowed without a known arity (task extras)."""
    if name in extras and name in AI_SIGNATURES:
        return AI_SIGNATURES[name].arity
    return BASE_FUNCTIONS.get(name)


def _is_case_branch(node: exp.Expression) -> bool:
    """``If`` nodes inside CASE are WHEN/THEN branches, not IF() calls: they carry two arguments by design."""
    return isinstance(node, exp.If) and isinstance(node.parent, exp.Case)


def _check_arity(display: str, call: exp.Expression, count: int, arity: Arity, dialect: str) -> None:
    """Reject a call with the wrong argument count, quoting the call (typed nodes may carry another name)."""
    low, high = arity
    if count < low or (high is not None and count > high):
        expected = f"{low}" if low == high else (f"at least {low}" if high is None else f"{low} to {high}")
        snippet = one_line(call.sql(dialect=dialect), limit=80)
        raise reject(f"function {display} takes {expected} argument(s), got {count}: {snippet}")


_OPERATOR_NODES = (exp.Binary, exp.Unary, exp.Predicate, exp.Connector)
"""Func nodes that are operators (AND, OR, EXISTS, ``->``, ``@>``...): pure, and shaped by the grammar."""


def iter_calls(tree: exp.Expression) -> Iterator[tuple[exp.Expression, str | None]]:
    """Every function call in the tree with its dotted name (for ``schema.fn(...)``) or None."""
    for node in tree.walk():
        if isinstance(node, exp.Dot):
            dotted = _dotted_name(node)
            if dotted is not None:
                yield node, dotted
        elif isinstance(node, exp.Func) and not isinstance(node, _OPERATOR_NODES):
            if isinstance(node.parent, exp.Dot) and node.arg_key == "expression":
                continue  # the call part of schema.fn(...), reported with its dotted name above
            yield node, None


def ai_functions_called(source: str, dialect: str) -> list[str]:
    """The AI functions `source` calls (catalogue names, PROMPT included), in the order first met; [] when it
    does not parse (validation then says why). A task registered from rows enables its seed's own AI functions
    with this (issue 26): a seed that calls AI_CLASSIFY means the task is an AI_CLASSIFY task."""
    try:
        statements = [s for s in sqlglot.parse(source, read=dialect) if s is not None]
    except SqlglotError:
        return []
    found: list[str] = []
    for statement in statements:
        for node, dotted in iter_calls(statement):
            names = [dotted] if dotted is not None else _candidate_names(node)  # type: ignore[arg-type]
            name = next((n for n in names if n in AI_SIGNATURES or n == "PROMPT"), None)
            if name is not None and name not in found:
                found.append(name)
    return found


def check_functions(
    tree: exp.Expression,
    spec: ValidationSpec,
    *,
    check_arity: bool,
    snowflake_flatten: bool = False,
    snowflake_names: bool = False,
    transpiled: bool = False,
) -> None:
    """Every call must be on the allow-list (base + ``spec.allowed_functions``), with a valid arity (check 4).

    Calls in table position (``FROM f(...)``) are left to :func:`check_tables`. ``snowflake_flatten`` allows
    Snowflake's FLATTEN (an ``Explode`` node) directly under LATERAL / TABLE(), the only place it is valid;
    its arguments are still checked as they are walked like any other expression. With ``snowflake_names`` plain
    calls are left to :func:`check_snowflake_functions` (a Snowflake tree is checked against Snowflake's names);
    ``transpiled`` (the DuckDB tree of a Snowflake program) also allows ``TRANSPILED_FUNCTIONS``.
    """
    extras = spec.allowed_functions
    for node, dotted in iter_calls(tree):
        if dotted is not None:
            if dotted not in extras:
                raise reject(
                    f"function {dotted} is not allowed: schema-qualified calls are allowed only when the "
                    f"task enables them (enabled: {', '.join(sorted(extras)) or 'none'})"
                )
            call = node.expression
            arity = _arity_for(dotted, extras)
            if check_arity and arity is not None:
                _check_arity(dotted, node, len(positional_arguments(call)), arity, spec.dialect)
            continue
        if not isinstance(node, exp.Func) or _is_case_branch(node):
            continue
        if isinstance(node, exp.Explode) and snowflake_flatten:
            if isinstance(node.parent, (exp.Lateral, exp.TableFromRows)):
                continue
            raise reject("FLATTEN is allowed only as a FROM source: LATERAL FLATTEN(INPUT => expr) AS f")
        if isinstance(node.parent, exp.Table) and node.arg_key == "this":
            continue  # a table function in FROM: check_tables rejects it (or accepts our json_each)
        if snowflake_names:
            continue
        names = _candidate_names(node)
        known = BASE_FUNCTIONS.keys() | TRANSPILED_FUNCTIONS if transpiled else BASE_FUNCTIONS.keys()
        allowed = next((n for n in names if n in extras or n in known), None)
        display = function_name(node)
        if allowed is None:
            hint = f" (task extras: {', '.join(sorted(extras))})" if extras else ""
            raise reject(f"function {display} is not allowed: {rejection_reason(names)}{hint}")
        if not check_arity:
            continue
        if isinstance(node, exp.Anonymous) or allowed in TYPED_ARITY_CHECKED or allowed in AI_SIGNATURES:
            arity = _arity_for(allowed, extras)
            if arity is not None:
                _check_arity(display, node, len(positional_arguments(node)), arity, spec.dialect)


def check_snowflake_functions(tree: exp.Expression, spec: ValidationSpec, source: str) -> None:
    """Snowflake dialect: every call is a Snowflake function (:mod:`~coco_sql.sqlcheck.snowflake_functions`) or an
    AI function the task enables, under the name written, with an argument count Snowflake accepts. A local name
    is refused with its Snowflake alternative, so the program runs unchanged when deployed."""
    extras = spec.allowed_functions
    written = WrittenCalls(source)
    for name in written.local_names():
        raise reject(rejection(name))
    for node, dotted in iter_calls(tree):
        if dotted is not None:
            continue  # schema-qualified Cortex calls: check_functions rules on them
        if not isinstance(node, exp.Func) or _is_case_branch(node):
            continue
        if isinstance(node, exp.Explode) or (isinstance(node.parent, exp.Table) and node.arg_key == "this"):
            continue  # FLATTEN and table functions: check_functions and check_tables rule on them
        name = written.name(node)
        count = written.arity(node)
        if name in NON_DETERMINISTIC or name in EXTERNAL_ACCESS:
            raise reject(f"function {name} is not allowed: {rejection_reason([name])}")
        if name in AI_SIGNATURES:
            if name not in extras:
                raise reject(f"function {name} is not allowed: {rejection_reason([name])}")
            _check_arity(name, node, count, AI_SIGNATURES[name].arity, spec.dialect)
            _check_embed_model(name, node)
            continue
        function = SNOWFLAKE_FUNCTIONS.get(name)
        if function is None:
            raise reject(rejection(name))
        _check_arity(name, node, count, function.arity, spec.dialect)


def _check_embed_model(name: str, call: exp.Func) -> None:
    """AI_EMBED names one of Snowflake's embedding models."""
    model = unserved_embed_model(call) if name == "AI_EMBED" else None
    if model is not None:
        raise reject(
            f"AI_EMBED model {model!r} is not a Snowflake embedding model; use one of "
            f"{', '.join(sorted(EMBED_MODELS))} (a run maps it to a local model)"
        )


def unserved_embed_model(call: exp.Func) -> str | None:
    """The model an AI_EMBED call names as a literal when Snowflake does not serve it; None otherwise (a computed
    name is left to the run)."""
    args = positional_arguments(call)
    named = [a.expression for a in args if isinstance(a, exp.Kwarg) and a.this.name.lower() == "model"]
    model = named[0] if named else (args[0] if args and not isinstance(args[0], exp.Kwarg) else None)
    if isinstance(model, exp.Literal) and model.is_string and model.this not in EMBED_MODELS:
        return model.this
    return None


def check_scalar_expression(query: exp.Query) -> None:
    """A wrapped bare expression is evaluated once per row, so a top-level aggregate cannot work there."""
    expression = query.selects[1]
    for agg in expression.find_all(exp.AggFunc):
        enclosing = agg.find_ancestor(exp.Window, exp.Select)
        if enclosing is None or enclosing is query:
            raise reject(
                f"aggregate {function_name(agg)} is not allowed in a bare expression (evaluated per row); "
                "write a full query with GROUP BY"
            )


# ------------------------------------------------------------------------------------------------ tables


def check_tables(tree: exp.Query, spec: ValidationSpec, table_functions: Iterable[str] = ()) -> None:
    """Only ``spec.relation`` (unqualified) and the query's CTEs may be read (check 5).

    Scope traversal tells CTE references apart from real tables (``find_all(exp.Table)`` cannot). We also
    require that every Table node was seen by the traversal, so a table in a position scopes do not model is
    rejected rather than silently skipped.
    """
    allowed_functions = {name.upper() for name in table_functions}
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
        raise reject(f"expected {_ALLOWED_ROOTS}")
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
    query, wrapped = checked_query(source, spec)
    check_output(query, spec)
    # copy=False: the generator would otherwise deep-copy the whole tree first (~10 ms on 200 lines). The
    # DuckDB generator does not rewrite a DuckDB tree, so the checked tree is the one that produced `sql`.
    bind_ai_calls(query)  # last: it adds to_json/list calls that the checks above would not know
    sql = query.sql(dialect="duckdb", copy=False)
    return ValidatedProgram(source=source, sql=sql, wrapped=wrapped, expression=query)


def checked_query(source: str, spec: ValidationSpec, *, wrap: bool = True) -> tuple[exp.Query, bool]:
    """Every check but the output contract: the DuckDB tree to execute (AI calls not bound yet) and whether a
    bare scalar expression was wrapped into a query. With `wrap=False` a bare expression is refused (a dbt
    model has no id/output contract to wrap it in: `languages.dbt.validate`).

    Policy checks on functions and statements run on the tree as written (so arity refers to what the
    author wrote: Snowflake's ``IFF(a, b)`` would otherwise vanish into a CASE). Table checks, and a second
    function pass, run on the DuckDB tree that is actually executed.
    """
    tree = parse_statement(source, spec.dialect)
    check_read_only(tree)
    check_deterministic_constructs(tree)
    snowflake = spec.dialect == "snowflake"
    # In Snowflake FLATTEN is a table function (parsed as Explode under Lateral/TableFromRows); it is allowed
    # only there, and it disappears in the rewrite to json_each.
    check_functions(tree, spec, check_arity=True, snowflake_flatten=snowflake, snowflake_names=snowflake)
    if snowflake:
        check_snowflake_functions(tree, spec, source)
    tree = rewrite_named_arguments(tree, spec.dialect)  # Snowflake refuses names only we accepted
    if wrap:
        query, wrapped = as_query(tree, spec)
    elif isinstance(tree, exp.Query):
        query, wrapped = tree, False
    else:
        raise reject(f"expected one read-only query (SELECT / WITH / UNION ...), got {_statement_name(tree)}")
    if wrapped:
        check_scalar_expression(query)
    table_functions: tuple[str, ...] = ()
    if snowflake:
        # Tables are checked on the Snowflake tree too, so stages (@stage/file) and qualified names get a
        # precise message instead of a transpilation failure.
        check_tables(query, spec)
        transpiled = snowflake_to_duckdb(query, spec.json_columns)
        if not isinstance(transpiled, exp.Query):
            raise reject(f"expected {_ALLOWED_ROOTS} after transpiling, got {type(transpiled).__name__}")
        query = transpiled
        table_functions = (JSON_EACH,)
        check_read_only(query)
        check_functions(query, spec, check_arity=False, transpiled=True)
    check_tables(query, spec, table_functions)
    return query, wrapped
