"""A program's reference tables, shipped with its export: the `examples` a proxy or few-shot call reads.

A program that reads the training rows as `examples` (`tasks.references`) runs only where a table of those rows
sits next to its source. So the export ships one, `<name>_examples`, holding the same training rows the search
gave it, and the program reads that table instead of `examples`. The rows are data, never part of the query a
person reviews, and each form ships them the way its engine loads data:

    DuckDB      CREATE OR REPLACE TABLE t AS SELECT * FROM (VALUES ('id', 'text', ['a', 'b']), ...) AS v(id, ...)
    Snowflake   the rows as a file, `t.jsonl` (one JSON object per row), staged in coco-sql's stage (the one
                `coco-sql deploy` creates, created here if missing) under exports/, then CREATE OR REPLACE TABLE t
                (typed columns) and COPY INTO t FROM (SELECT $1:id::VARCHAR, ... FROM @stage/exports/t.jsonl): no
                row is a literal of a statement, so a training split of any size stays within Snowflake's 1 MB
                statement guideline. `coco-sql export --out DIR` writes the file; CALL coco_export stages it
    dbt         a seed, seeds/t_seed.csv (every column text; its .yml says so, so dbt infers no type), and a
                model, models/t.sql, that types the seed's columns (PARSE_JSON for lists); the champion's model
                reads {{ ref('t') }}

`Shipped` says what comes with the program: statements to run before it, files to write beside it, and how the
program reads the table.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT
from coco_sql.stage import EXPORTS, STAGE

_SNOWFLAKE_CASTS = {"VARCHAR": "VARCHAR", "BIGINT": "NUMBER", "INTEGER": "NUMBER", "DOUBLE": "FLOAT"}
_SNOWFLAKE_CASTS |= {"BOOLEAN": "BOOLEAN", "VARCHAR[]": "ARRAY", "JSON": "VARIANT", "FLOAT[]": "ARRAY"}


@dataclass(frozen=True)
class Shipped:
    """A reference table as a form ships it: `sql` runs before the program, `files` (path -> text) travel with
    it, and the program reads the table as `reads` (a table name; for dbt, the placeholder of a ref)."""

    sql: str
    reads: str
    files: dict[str, str] = field(default_factory=dict)


def reads_table(code: str, dialect: str, table: str) -> bool:
    """Whether the program `code` reads the table `table` (a real table, not a CTE of that name)."""
    tree = sqlglot.parse_one(code, read=dialect)
    return any(
        source.name.lower() == table and source.name not in scope.cte_sources
        for scope in traverse_scope(tree)
        for source in scope.tables
    )


def ship_table(name: str, rows: pd.DataFrame, columns: Mapping[str, str], form: str) -> Shipped:
    """The table `name` of `rows` as `form` ships it: 'duckdb', 'snowflake' or 'dbt' (module docstring).
    `columns`: name -> DuckDB type."""
    records = [
        {column: _plain(value) for column, value in zip(columns, values, strict=True)}
        for values in rows[list(columns)].itertuples(index=False, name=None)
    ]
    if form == SANDBOX_DIALECT:
        return Shipped(create_table(name, records, columns), name)
    if form == DEPLOY_DIALECT:
        return _staged(name, records, columns)
    if form == "dbt":
        return _seed(name, records, columns)
    raise ValueError(f"no way to ship a table for {form!r}")


def create_table(name: str, records: list[dict[str, object]], columns: Mapping[str, str]) -> str:
    """`CREATE OR REPLACE TABLE name AS SELECT * FROM (VALUES ...)` in DuckDB, parsed back."""
    identifier = exp.to_identifier(name).sql(SANDBOX_DIALECT)
    tuples = ",\n  ".join(
        "(" + ", ".join(exp.convert(r[c]).sql(SANDBOX_DIALECT) for c in columns) + ")" for r in records
    )
    names = ", ".join(exp.to_identifier(c).sql(SANDBOX_DIALECT) for c in columns)
    statement = f"CREATE OR REPLACE TABLE {identifier} AS\nSELECT * FROM (VALUES\n  {tuples}) AS v({names})"
    sqlglot.parse_one(statement, read=SANDBOX_DIALECT)
    return statement + ";\n"


def _staged(name: str, records: list[dict[str, object]], columns: Mapping[str, str]) -> Shipped:
    """The rows as `<name>.jsonl` in the user stage, loaded by COPY INTO a typed table."""
    identifier = exp.to_identifier(name).sql(DEPLOY_DIALECT)
    file = f"{name}.jsonl"
    names = [exp.to_identifier(c).sql(DEPLOY_DIALECT) for c in columns]
    kinds = [_SNOWFLAKE_CASTS.get(t.upper(), "VARIANT") for t in columns.values()]
    fields = ", ".join(f"$1:{n}::{k}" for n, k in zip(names, kinds, strict=True))
    located = f"@{STAGE}/{EXPORTS}/{file}"
    statements = [
        f"CREATE STAGE IF NOT EXISTS {STAGE}",
        f"CREATE OR REPLACE TABLE {identifier} ({', '.join(f'{n} {k}' for n, k in zip(names, kinds, strict=True))})",
        f"COPY INTO {identifier} ({', '.join(names)})\nFROM (SELECT {fields} FROM {located})\n"
        "FILE_FORMAT = (TYPE = JSON)",
    ]
    for statement in statements:
        sqlglot.parse_one(statement, read=DEPLOY_DIALECT)
    note = (
        f"-- The table's rows ship as the file {file} ({len(records)} rows, one JSON object each): once the stage\n"
        f"-- exists, PUT file://{file} @{STAGE}/{EXPORTS}/ AUTO_COMPRESS = FALSE OVERWRITE = TRUE; (SnowSQL, or\n"
        "-- upload it in Snowsight). `coco-sql export --out DIR` writes the file; CALL coco_export stages it.\n"
    )
    sql = statements[0] + ";\n" + note + ";\n".join(statements[1:]) + ";\n"
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    return Shipped(sql, name, {file: text})


def _seed(name: str, records: list[dict[str, object]], columns: Mapping[str, str]) -> Shipped:
    """A dbt seed of text columns, its properties, and a model that types them."""
    seed = f"{name}_seed"
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(list(columns))
    for record in records:
        writer.writerow(["" if record[c] is None else _text(record[c]) for c in columns])
    properties = f"version: 2\nseeds:\n  - name: {seed}\n    config:\n      column_types:\n" + "".join(
        f"        {c}: varchar\n" for c in columns
    )
    selects = ",\n  ".join(_typed(c, t) for c, t in columns.items())
    model = f"{{{{ config(materialized='table') }}}}\n\nSELECT\n  {selects}\nFROM {{{{ ref('{seed}') }}}}\n"
    files = {
        f"seeds/{seed}.csv": buffer.getvalue(),
        f"seeds/{seed}.yml": properties,
        f"models/{name}.sql": model,
    }
    return Shipped("", name, files)


def _typed(column: str, kind: str) -> str:
    name = exp.to_identifier(column).sql(DEPLOY_DIALECT)
    cast = _SNOWFLAKE_CASTS.get(kind.upper(), "VARIANT")
    if cast in ("ARRAY", "VARIANT"):
        return f"PARSE_JSON({name})::{cast} AS {name}"
    return f"CAST({name} AS {cast}) AS {name}"


def _text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else str(value)


def _plain(value: object) -> object:
    """A cell as JSON-able Python: numpy scalars and arrays as numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


__all__ = ["EXPORTS", "STAGE", "Shipped", "reads_table", "ship_table"]
