"""A SQL champion in the form it will run in: a DuckDB view or table macro, a Snowflake view or table function,
or a dbt model.

A program reads the relation `input`; an exported form reads the user's `source` table instead (the table a
registered task came from, or one the caller names). The rewrite is done on the sqlglot tree, so CTEs named like
a table and quoted names stay what they are, and each form is generated in its own dialect and parsed back by
sqlglot in that dialect before it is returned.

    duckdb_view         CREATE OR REPLACE VIEW <name> AS <program over source>                    (DuckDB)
    duckdb_macro        CREATE OR REPLACE MACRO <name>() AS TABLE <program over source>           (DuckDB)
    snowflake_view      CREATE OR REPLACE VIEW <name> AS <program over source>                    (Snowflake)
    snowflake_function  CREATE OR REPLACE FUNCTION <name>() RETURNS TABLE (<columns>)
                        AS $$ <program over source> $$                                   (Snowflake SQL UDTF)
    dbt                 {{ config(materialized='view') }} <program over {{ ref('source') }} or the source's name>

`source` is a table name (`source_table`: a name, schema.name or db.schema.name); anything else is refused.

The UDTF must declare its columns, and a program alone does not say every type: a column passed through from
the source (`id`) has whatever type the user's table gives it. So each output column (the query's named
selects, in order) is typed from, first, `columns` when the caller knows them (e.g. the task's contract:
`{'label': 'INTEGER'}`), then sqlglot's type inference over the program (`CASE ... THEN 1` is a NUMBER, a
`::string` cast a VARCHAR), and otherwise VARIANT, which Snowflake casts any value to: the function always runs,
and a column whose type was not known says so instead of claiming one. A program whose columns are not all
named (`SELECT *`) cannot be a UDTF and is refused.

AI functions keep their Cortex spelling: the Snowflake and dbt forms run on Cortex; the DuckDB forms need them
installed as functions where they run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.errors import ConfigError
from coco_sql.languages.sql_reference_export import create_table, reads_table
from coco_sql.primitives.sql_macros import expand_program
from coco_sql.sqlcheck.snowflake import snowflake_to_duckdb

FORMS = ("sql", "duckdb_view", "duckdb_macro", "snowflake_view", "snowflake_function", "dbt")
_DBT_PLACEHOLDER = "coco_dbt_source"
_TARGETS = {
    "duckdb_view": "duckdb",
    "duckdb_macro": "duckdb",
    "snowflake_view": "snowflake",
    "snowflake_function": "snowflake",
    "dbt": "snowflake",
}
T = exp.DataType.Type
# sqlglot's inferred (or a contract's) type -> the UDTF column type; anything else is VARIANT.
_UDTF_TYPES: dict[exp.DataType.Type, str] = {
    **dict.fromkeys((T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.INT128, T.UBIGINT, T.UINT), "NUMBER"),
    **dict.fromkeys((T.FLOAT, T.DOUBLE), "FLOAT"),
    **dict.fromkeys((T.VARCHAR, T.TEXT, T.CHAR, T.NVARCHAR, T.NCHAR), "VARCHAR"),
    T.BOOLEAN: "BOOLEAN",
    T.DATE: "DATE",
    **dict.fromkeys((T.TIMESTAMP, T.TIMESTAMPNTZ), "TIMESTAMP_NTZ"),
    **dict.fromkeys((T.ARRAY, T.LIST), "ARRAY"),
}


def export_form(
    code: str,
    dialect: str,
    form: str,
    *,
    name: str,
    source: str = "input",
    columns: Mapping[str, str] | None = None,
    references: Mapping[str, tuple[pd.DataFrame, Mapping[str, str]]] | None = None,
) -> str:
    """The program `code` (written in `dialect`) as `form`, reading `source` instead of `input`. `columns` gives
    known output column types (DuckDB or contract spelling, e.g. the task's contract) for `snowflake_function`.
    `references`: the task's reference tables (name -> rows and column types); each one the program reads is
    created first as `<name>_<table>` (`sql_reference_export`) and read under that name."""
    if form not in FORMS:
        raise ConfigError(f"unknown export form {form!r} (known: {', '.join(FORMS)})")
    if form == "sql" and dialect == "duckdb":
        return code  # ships its primitives: DuckDB runs the CREATE MACRO statements before the query
    code = expand_program(code, dialect) or code  # elsewhere they are inlined: Snowflake has no macros
    if form == "sql":
        return code
    target = _TARGETS[form]
    reads = source_table(source, target)
    program = sqlglot.parse_one(code, read=dialect)
    if (
        dialect == "snowflake" and target == "duckdb"
    ):  # sqlglot alone gets FLATTEN, `:` paths and VECTOR_* wrong
        program = snowflake_to_duckdb(program)
    relation: str | exp.Table = _DBT_PLACEHOLDER if form == "dbt" else reads
    tables = ""
    for table, (rows, types) in (references or {}).items():
        if not reads_table(code, dialect, table):
            continue
        if form == "dbt":
            raise ConfigError(f"form 'dbt' cannot ship the table {table!r} the program reads: export a view")
        program = over_source(program, f"{name}_{table}", table)
        tables += create_table(f"{name}_{table}", rows, types, target) + "\n"
    body = over_source(program, relation).sql(dialect=target, pretty=True)
    if form == "dbt":
        return _dbt(body, reads)
    identifier = exp.to_identifier(name).sql(dialect=target)
    if form == "snowflake_function":
        return tables + _udtf(identifier, program, dialect, body, columns)
    if form == "duckdb_macro":
        return tables + _checked(f"CREATE OR REPLACE MACRO {identifier}() AS TABLE\n{body}", target, body)
    return tables + _checked(f"CREATE OR REPLACE VIEW {identifier} AS\n{body}", target, body)


def _udtf(
    identifier: str, program: exp.Expression, dialect: str, body: str, columns: Mapping[str, str] | None
) -> str:
    """The Snowflake SQL table function over `body` (the program over its source), its columns typed."""
    if "$$" in body:
        raise ConfigError("form 'snowflake_function' quotes the program with $$, which the program contains")
    returns = _udtf_columns(program, dialect, columns)
    return _checked(
        f"CREATE OR REPLACE FUNCTION {identifier}()\nRETURNS TABLE ({returns})\nAS $$\n{body}\n$$",
        "snowflake",
        body,
    )


def _checked(statement: str, dialect: str, body: str) -> str:
    """`statement` (and its query `body`, which a function holds as a string) parsed back in `dialect`."""
    sqlglot.parse_one(statement, read=dialect)
    sqlglot.parse_one(body, read=dialect)
    return statement + ";\n"


def source_table(source: str, dialect: str) -> exp.Table:
    """`source` as a table of `dialect`: a name, `schema.name` or `db.schema.name` (quoted parts allowed), its
    comments dropped; a one-line ConfigError for anything else (a query, a function, several statements), so an
    export never pastes the caller's text into its SQL or its Jinja."""
    try:
        table = sqlglot.parse_one(source, into=exp.Table, read=dialect) if isinstance(source, str) else None
    except (ParseError, TokenError):
        table = None
    if table is None or len(table.parts) > 3 or not all(isinstance(p, exp.Identifier) for p in table.parts):
        raise ConfigError(
            f"the source to export over must be a table name such as signals or raw.signals (got {source!r})"
        )
    for node in table.walk():
        node.comments = None
    return table


def _dbt(body: str, table: exp.Table) -> str:
    """The model: `{{ ref('name') }}` for a plain name, else the table's SQL name, inside `{% raw %}` when it
    holds a Jinja delimiter (a quoted name may), so Jinja never evaluates it."""
    name = table.sql(dialect="snowflake")
    if len(table.parts) == 1 and re.fullmatch(r"\w+", name):
        reference = "{{ ref('" + name + "') }}"
    elif any(mark in name for mark in ("{{", "}}", "{%", "%}", "{#", "#}")):
        if "endraw" in name:
            raise ConfigError(f"the source {name} cannot be quoted for dbt's Jinja: rename the table")
        reference = "{% raw %}" + name + "{% endraw %}"
    else:
        reference = name
    sqlglot.parse_one(body, read="snowflake")  # the model minus its Jinja parses as Snowflake SQL
    return "{{ config(materialized='view') }}\n\n" + body.replace(_DBT_PLACEHOLDER, reference) + "\n"


def _udtf_columns(program: exp.Expression, dialect: str, known: Mapping[str, str] | None) -> str:
    """`name TYPE, ...` for the program's output columns, typed as the module docstring says."""
    if not isinstance(program, exp.Query) or not program.selects:
        raise ConfigError("form 'snowflake_function' needs a query")
    names = program.named_selects
    if "*" in names or len(names) != len(program.selects):
        raise ConfigError(
            "form 'snowflake_function' needs every output column named (no * and no unnamed expressions): "
            "a table function declares its columns"
        )
    typed = annotate_types(program.copy(), dialect=dialect)
    known_types = {
        key.lower(): exp.DataType.build(value, dialect="duckdb") for key, value in (known or {}).items()
    }
    declared = []
    for column_name, select in zip(names, typed.selects, strict=True):
        kind = known_types.get(column_name.lower(), select.type)
        declared.append(f"{exp.to_identifier(column_name).sql(dialect='snowflake')} {_udtf_type(kind)}")
    return ", ".join(declared)


def _udtf_type(kind: exp.DataType | None) -> str:
    return "VARIANT" if kind is None else _UDTF_TYPES.get(kind.this, "VARIANT")


def over_source(query: exp.Expression, source: str | exp.Table, relation: str = "input") -> exp.Expression:
    """`query` with every reference to the table `relation` (not a CTE of that name) replaced by `source`."""
    query = query.copy()
    for scope in traverse_scope(query):
        for table in scope.tables:
            if table.name.lower() == relation and not table.db and table.name not in scope.cte_sources:
                replacement = source.copy() if isinstance(source, exp.Table) else exp.to_table(source)
                replacement.set(
                    "alias", table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(relation))
                )
                table.replace(replacement)
    return query
