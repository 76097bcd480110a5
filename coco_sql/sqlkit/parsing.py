"""Parsing a SQL statement with bounds, and the read-only check: what every kind holding SQL does to untrusted
text first (the SQL kind's candidates, dbt's models, an agent spec's tool SQL, a PACE primitive's macro).

Each check raises :class:`~coco_sql.errors.CandidateRejected` with one line naming the offending construct.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.bounds import parse_bounded
from coco_sql.sqlkit.rejection import reject

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

ALLOWED_ROOTS = "a single read-only query (SELECT / WITH / UNION / INTERSECT / EXCEPT) or a scalar expression"


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
        statements = parse_bounded(source, dialect)  # `sqlkit.bounds`: size and nesting, one line each
    except (ParseError, TokenError) as error:
        raise reject(_parse_error_message(error)) from error
    if len(statements) != 1:
        raise reject(f"expected exactly one statement, got {len(statements)}")
    return statements[0]


def statement_name(node: exp.Expression) -> str:
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
            raise reject(f"{statement_name(node)} is not allowed: a candidate must be {ALLOWED_ROOTS}")


def check_deterministic_constructs(tree: exp.Expression) -> None:
    """Reject non-function sources of non-determinism or external input: sampling and query parameters.

    ``USING SAMPLE`` / ``TABLESAMPLE`` draw a random subset (scores would not be reproducible); ``$1`` / ``?``
    placeholders would read values bound by whoever runs the statement, which a candidate must not rely on.
    """
    for node in tree.walk():
        if isinstance(node, exp.TableSample):
            raise reject("TABLESAMPLE / USING SAMPLE is not allowed: sampling is non-deterministic")
        if isinstance(node, (exp.Placeholder, exp.Parameter)):
            name = node.sql(dialect=SANDBOX_DIALECT)
            raise reject(f"query parameter {name!r} is not allowed: read values from the input relation")
