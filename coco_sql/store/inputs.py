"""A user's input checked before it reaches the store's SQL: a task's source and a run id.

`checked_source` is why `coco_task('t', 'signals; DROP TABLE programs', ...)` drops nothing (issue 25): the source
is the one piece of a user's own SQL a store runs (`Warehouse.read_source`), and it used to be pasted into
`DESCRIBE {source}` and run as however many statements it held. Now it must parse, with sqlglot in the store's
dialect, as exactly one read-only query:

- a table name (`signals`, `main.signals`), read as `SELECT * FROM <name>`, or
- one query (SELECT, WITH ... SELECT, a UNION of them) that reads tables: every relation in FROM/JOIN is a table
  name, a CTE or a subquery, never a table function (`read_csv(...)`, `coco_evolve(...)`, `range(...)`), and
  nothing in it writes (no DDL or DML node, no `SELECT ... INTO`, no statement sqlglot parses as a Command), and
  it calls no function named `coco_*` (the procedures' own UDFs, which write runs).

The check is one layer: the DuckDB store also asks DuckDB that the text is one SELECT statement
(`extract_statements`). The source still runs with the caller's rights, so it reads what the caller may read.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from coco_sql.errors import StoreError
from coco_sql.plugin_loader import DEPLOY_DIALECT

MAX_RUN_ID = 2**63 - 1  # runs.run_id is a BIGINT

# Nodes that write, or that sqlglot makes of a statement it does not know (CALL, COPY, PRAGMA, ...).
_WRITES: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "Copy", "Command", "Pragma", "Set",
        "Use", "Describe", "Transaction", "Commit", "Rollback", "Cache", "Uncache", "Refresh", "Attach",
        "Detach", "Install", "Load", "TruncateTable", "Grant", "Revoke", "Export",
    )
    if hasattr(exp, name)
)  # fmt: skip


def checked_source(source: object, dialect: str) -> str:
    """The query to run for a task's `source` (module docstring), or a one-line StoreError saying what it may
    be. `dialect` is the store's: duckdb or snowflake."""
    if not isinstance(source, str) or not source.strip():
        raise StoreError(f"a task's source is a table name or one SELECT query (got {source!r})")
    text = source.strip().rstrip(";").strip()
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except (ParseError, TokenError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise StoreError(f"the source {_short(source)} does not parse as {dialect} SQL: {first}") from None
    if len(statements) != 1:
        raise StoreError(
            f"the source {_short(source)} holds {len(statements)} statements; it must be one table name or one "
            "SELECT query"
        )
    (tree,) = statements
    if isinstance(tree, exp.Column | exp.Table) and _is_name(tree):
        return f"SELECT * FROM {text}"
    if not isinstance(tree, exp.Query):
        raise StoreError(f"the source {_short(source)} is neither a table name nor a SELECT query")
    problem = _writes_or_calls(tree)
    if problem is not None:
        raise StoreError(f"the source {_short(source)} must only read tables: {problem}")
    return text


def check_run_id(run_id: object, where: str) -> int:
    """`run_id` when it can be a run's id (a BIGINT); else the StoreError an unknown run gets."""
    if isinstance(run_id, bool) or not isinstance(run_id, int) or not 0 <= run_id <= MAX_RUN_ID:
        raise StoreError(f"no run {run_id!r} in {where} (a run id is a whole number from 1)")
    return run_id


def _writes_or_calls(tree: exp.Expression) -> str | None:
    """Why `tree` does more than read tables, or None."""
    for node in tree.walk():
        if isinstance(node, _WRITES):
            return f"it holds a {node.key.upper()} statement"
        if isinstance(node, exp.Select) and node.args.get("into") is not None:
            return "SELECT ... INTO writes a table"
        if isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier):
            return f"{node.this.sql()[:60]} is not a table (table functions are not read)"
        if type(node).__name__ == "TableFromRows":  # Snowflake's TABLE(f(...))
            return f"{node.sql(dialect=DEPLOY_DIALECT)[:60]} is not a table (table functions are not read)"
        if isinstance(node, exp.Func) and _function_name(node).lower().startswith("coco_"):
            return f"it calls {_function_name(node)}, a coco-sql procedure"
    return None


def _function_name(node: exp.Func) -> str:
    return node.name if isinstance(node, exp.Anonymous) else node.sql_name()


def _is_name(tree: exp.Expression) -> bool:
    """A bare (possibly qualified) name: `signals`, `main.signals`, `db.main.signals`."""
    return all(isinstance(part, exp.Identifier | exp.Column | exp.Table | exp.Dot) for part in tree.walk())


def _short(source: object) -> str:
    text = " ".join(str(source).split())
    return repr(text if len(text) <= 80 else text[:77] + "...")
