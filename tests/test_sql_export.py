"""Export forms of a SQL champion, generated and parsed back with sqlglot in each form's dialect; the DuckDB view
is run on a real DuckDB."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

from coco_sql.errors import ConfigError
from coco_sql.languages.sql_export import export_form

PROGRAM = "WITH g AS (SELECT id, code FROM input) SELECT g.id, CASE WHEN code LIKE '4%' THEN 1 ELSE 0 END AS label FROM g"


def test_the_duckdb_view_reads_the_source_and_runs() -> None:
    view = export_form(PROGRAM, "duckdb", "duckdb_view", name="champion", source="codes")
    con = duckdb.connect()
    con.execute("CREATE TABLE codes AS SELECT * FROM (VALUES ('a', '4711'), ('b', '1234')) t(id, code)")
    con.execute(view)
    assert con.execute("SELECT * FROM champion ORDER BY id").fetchall() == [("a", 1), ("b", 0)]


def test_a_cte_named_input_is_not_the_relation_input() -> None:
    shadowed = "WITH input AS (SELECT 'x' AS id, 7 AS label) SELECT id, label FROM input"
    view = export_form(shadowed, "duckdb", "duckdb_view", name="v", source="codes")
    assert "codes" not in view
    assert duckdb.connect().execute(view.replace("CREATE OR REPLACE VIEW v AS", "")).fetchall() == [("x", 7)]


def test_snowflake_and_dbt_forms_parse_as_snowflake() -> None:
    program = "SELECT id, AI_CLASSIFY(text, ['good', 'bad']):labels[0]::string AS label FROM input"
    view = export_form(
        program, "snowflake", "snowflake_view", name="reviews_champion", source="db.sch.reviews"
    )
    assert isinstance(sqlglot.parse_one(view.rstrip(";\n"), read="snowflake"), sqlglot.exp.Create)
    assert "FROM db.sch.reviews AS input" in view and "AI_CLASSIFY" in view
    model = export_form(program, "snowflake", "dbt", name="x", source="reviews")
    assert (
        model.startswith("{{ config(materialized='view') }}")
        and "FROM {{ ref('reviews') }} AS input" in model
    )
    with pytest.raises(ConfigError, match="unknown export form 'pdf'"):
        export_form(program, "snowflake", "pdf", name="x")
