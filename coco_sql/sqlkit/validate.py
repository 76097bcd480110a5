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

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.ai_binding import bind_ai_calls
from coco_sql.sqlkit.bounds import recursion_guard
from coco_sql.sqlkit.checks import ValidationSpec, as_query, checked_query
from coco_sql.sqlkit.named_arguments import rewrite_named_arguments
from coco_sql.sqlkit.output_shape import check_output_shape
from coco_sql.sqlkit.parsing import ALLOWED_ROOTS, parse_statement
from coco_sql.sqlkit.rejection import reject


@dataclass(frozen=True)
class ValidatedProgram:
    """A candidate that passed every check, with the DuckDB SQL to execute and its AST."""

    source: str
    sql: str
    wrapped: bool
    expression: exp.Query = field(compare=False, repr=False)


def parse_program(source: str, spec: ValidationSpec) -> exp.Query:
    """Parse, wrap a scalar expression, and transpile to a DuckDB AST, without policy checks.

    Used by AST mutators, which need the tree but validate their output separately. Raises
    ``CandidateRejected`` on parse errors (and when the statement cannot be a query at all).
    """
    tree = parse_statement(source, spec.dialect)
    tree = rewrite_named_arguments(tree)
    query, _ = as_query(tree, spec)
    own = spec.dialect_checks
    if own is not None:
        transpiled = own.to_duckdb(query, spec.json_columns)
        if not isinstance(transpiled, exp.Query):
            raise reject(f"expected {ALLOWED_ROOTS} after transpiling, got {type(transpiled).__name__}")
        return transpiled
    return query


# --------------------------------------------------------------------------------------------- functions


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
            dialect=SANDBOX_DIALECT,
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
        sql = query.sql(dialect=SANDBOX_DIALECT, copy=False)
    return ValidatedProgram(source=source, sql=sql, wrapped=wrapped, expression=query)
