"""The schema DDL, written once in `sql/` (DuckDB dialect) and transpiled with sqlglot for other engines."""

from __future__ import annotations

import sqlglot

from coco_sql.resources import resource_dir

SCHEMA_FILES = ("schema.sql", "views.sql")


def schema_statements(dialect: str = "duckdb") -> list[str]:
    """The DDL statements in order, in `dialect`. DuckDB gets the files verbatim."""
    statements: list[str] = []
    for name in SCHEMA_FILES:
        text = (resource_dir("sql") / name).read_text()
        for expression in sqlglot.parse(text, read="duckdb"):
            if expression is not None:
                statements.append(expression.sql(dialect=dialect))
    return statements
