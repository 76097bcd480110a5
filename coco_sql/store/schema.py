"""The schema DDL, written once in `sql/` (DuckDB dialect): its parsed statements and their DuckDB text.

Another engine gets its own text from its plug-in (`engines.EnginePlugin.schema_statements`): sqlglot's
translation, or the engine's checked fixups where it has them (Snowflake: `engines.snowflake.ddl`).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.resources import read_resource

SCHEMA_FILES = ("schema.sql", "views.sql")


def schema_statements() -> list[str]:
    """The DDL statements in order, as DuckDB runs them."""
    return [expression.sql(dialect=SANDBOX_DIALECT) for expression in schema_expressions()]


def schema_expressions() -> list[exp.Expression]:
    """The parsed statements of `SCHEMA_FILES`, in order (DuckDB dialect)."""
    expressions: list[exp.Expression] = []
    for name in SCHEMA_FILES:
        parsed = sqlglot.parse(read_resource("sql", name), read=SANDBOX_DIALECT)
        expressions.extend(expression for expression in parsed if expression is not None)
    return expressions
