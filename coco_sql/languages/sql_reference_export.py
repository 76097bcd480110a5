"""A program's reference tables, shipped with its export: the `examples` a proxy or few-shot call reads.

A program that reads the training rows as `examples` (`tasks.references`) runs only where a table of those rows
sits next to its source. So the export writes one: `CREATE OR REPLACE TABLE <name>_examples AS ...` holding the
same training rows the search gave it, followed by the program reading that table instead of `examples`. The
rows are data written once, not part of the query a person reviews, and the query stays the size it was.

    DuckDB      CREATE OR REPLACE TABLE t AS SELECT * FROM (VALUES ('id', 'text', ['a', 'b']), ...) AS v(id, ...)
    Snowflake   CREATE OR REPLACE TABLE t AS SELECT v:id::VARCHAR AS id, ..., v:labels::ARRAY AS labels
                FROM (SELECT PARSE_JSON(column1) AS v FROM VALUES ('{"id": ...}'), ...)

Snowflake's VALUES takes constants only, so each row travels as one JSON text and is taken apart by PARSE_JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

_SNOWFLAKE_CASTS = {"VARCHAR": "VARCHAR", "BIGINT": "NUMBER", "INTEGER": "NUMBER", "DOUBLE": "FLOAT"}
_SNOWFLAKE_CASTS |= {"BOOLEAN": "BOOLEAN", "VARCHAR[]": "ARRAY", "JSON": "VARIANT"}


def reads_table(code: str, dialect: str, table: str) -> bool:
    """Whether the program `code` reads the table `table` (a real table, not a CTE of that name)."""
    tree = sqlglot.parse_one(code, read=dialect)
    return any(
        source.name.lower() == table and source.name not in scope.cte_sources
        for scope in traverse_scope(tree)
        for source in scope.tables
    )


def create_table(name: str, rows: pd.DataFrame, columns: Mapping[str, str], target: str) -> str:
    """`CREATE OR REPLACE TABLE name AS <rows>` in `target` (duckdb | snowflake); `columns`: name -> DuckDB type."""
    identifier = exp.to_identifier(name).sql(dialect=target)
    records = [
        {column: _plain(value) for column, value in zip(columns, values, strict=True)}
        for values in rows[list(columns)].itertuples(index=False, name=None)
    ]
    if target == "snowflake":
        texts = ",\n  ".join(f"({exp.Literal.string(json.dumps(r)).sql('snowflake')})" for r in records)
        fields = ", ".join(
            f"v:{exp.to_identifier(c).sql('snowflake')}::{_SNOWFLAKE_CASTS.get(t.upper(), 'VARIANT')} AS "
            f"{exp.to_identifier(c).sql('snowflake')}"
            for c, t in columns.items()
        )
        statement = (
            f"CREATE OR REPLACE TABLE {identifier} AS\nSELECT {fields}\n"
            f"FROM (SELECT PARSE_JSON(column1) AS v FROM VALUES\n  {texts})"
        )
    else:
        tuples = ",\n  ".join(
            "(" + ", ".join(exp.convert(r[c]).sql("duckdb") for c in columns) + ")" for r in records
        )
        names = ", ".join(exp.to_identifier(c).sql("duckdb") for c in columns)
        statement = (
            f"CREATE OR REPLACE TABLE {identifier} AS\nSELECT * FROM (VALUES\n  {tuples}) AS v({names})"
        )
    sqlglot.parse_one(statement, read=target)  # it parses back in its own dialect
    return statement + ";\n"


def _plain(value: object) -> object:
    """A cell as JSON-able Python: numpy scalars and arrays as numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


__all__ = ["create_table", "reads_table"]
