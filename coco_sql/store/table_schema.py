"""The tables of `sql/schema.sql` as column lists, for stores that create and write tables through a DataFrame
API instead of DDL (SnowparkStore). Parsed from the DDL, so the schema is still written once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sqlglot
from sqlglot import exp

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.store.schema import schema_statements


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB spelling: BIGINT, VARCHAR, DOUBLE, BOOLEAN, TIMESTAMP, JSON, FLOAT[]
    nullable: bool


@cache
def table_columns() -> dict[str, tuple[Column, ...]]:
    """table -> its columns in DDL order, for every CREATE TABLE of the schema."""
    tables: dict[str, tuple[Column, ...]] = {}
    for statement in schema_statements():
        create = sqlglot.parse_one(statement, read=SANDBOX_DIALECT)
        if not (isinstance(create, exp.Create) and create.kind == "TABLE"):
            continue
        schema = create.this
        columns = tuple(
            Column(
                name=definition.name,
                type=definition.args["kind"].sql(dialect=SANDBOX_DIALECT),
                nullable=not any(
                    isinstance(c.kind, exp.NotNullColumnConstraint | exp.PrimaryKeyColumnConstraint)
                    for c in definition.constraints
                ),
            )
            for definition in schema.expressions
            if isinstance(definition, exp.ColumnDef)
        )
        tables[schema.this.name] = columns
    return tables
