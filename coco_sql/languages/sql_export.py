"""A SQL champion in the form it will run in: a DuckDB view, a Snowflake view, or a dbt model.

A program reads the relation `input`; an exported form reads the user's `source` table instead (the table a
registered task came from, or one the caller names). The rewrite is done on the sqlglot tree, so CTEs named like
a table and quoted names stay what they are, and each form is generated in its own dialect and parsed back by
sqlglot in that dialect before it is returned.

    duckdb_view      CREATE OR REPLACE VIEW <name> AS <program over source>        (DuckDB)
    snowflake_view   CREATE OR REPLACE VIEW <name> AS <program over source>        (Snowflake)
    dbt              {{ config(materialized='view') }} <program over {{ source(...) }} or {{ ref(...) }}>

AI functions keep their Cortex spelling: the Snowflake and dbt forms run on Cortex; the DuckDB view needs them
installed as functions where it runs.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.errors import ConfigError

FORMS = ("sql", "duckdb_view", "snowflake_view", "dbt")
_DBT_PLACEHOLDER = "coco_dbt_source"


def export_form(code: str, dialect: str, form: str, *, name: str, source: str = "input") -> str:
    """The program `code` (written in `dialect`) as `form`, reading `source` instead of `input`."""
    if form not in FORMS:
        raise ConfigError(f"unknown export form {form!r} (known: {', '.join(FORMS)})")
    if form == "sql":
        return code
    target = "snowflake" if form in ("snowflake_view", "dbt") else "duckdb"
    relation = _DBT_PLACEHOLDER if form == "dbt" else source
    query = _over(sqlglot.parse_one(code, read=dialect), relation)
    body = query.sql(dialect=target, pretty=True)
    if form == "dbt":
        reference = "{{ ref('" + source + "') }}" if re.fullmatch(r"\w+", source) else source
        text = "{{ config(materialized='view') }}\n\n" + body.replace(_DBT_PLACEHOLDER, reference) + "\n"
        sqlglot.parse_one(body, read=target)  # the model minus its Jinja parses as Snowflake SQL
        return text
    view = f"CREATE OR REPLACE VIEW {exp.to_identifier(name).sql(dialect=target)} AS\n{body}"
    sqlglot.parse_one(view, read=target)
    return view + ";\n"


def _over(query: exp.Expression, source: str) -> exp.Expression:
    """`query` with every reference to the relation `input` (not a CTE of that name) replaced by `source`."""
    query = query.copy()
    for scope in traverse_scope(query):
        for table in scope.tables:
            if table.name.lower() == "input" and not table.db and table.name not in scope.cte_sources:
                replacement = exp.to_table(source)
                replacement.set(
                    "alias", table.args.get("alias") or exp.TableAlias(this=exp.to_identifier("input"))
                )
                table.replace(replacement)
    return query
