"""The dbt project validator: one line naming the file and the problem, for each way a project can be bad.

Real Jinja, real YAML, real sqlglot; no dbt needed (the validator renders the Jinja itself).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec, validate_project

REPO = Path(__file__).resolve().parents[1]
BASE = {
    "dbt_project.yml": "name: shop\nconfig-version: 2\nmodels:\n  shop:\n    +materialized: table\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: shop\n    tables:\n      - name: orders\n",
    "models/stg_orders.sql": "select id, amount from {{ source('shop', 'orders') }}\n",
}
SPEC = DbtSpec(source_columns={("shop", "orders"): {"id": "INTEGER", "amount": "INTEGER"}})


def rejection(changes: dict[str, str], spec: DbtSpec = SPEC) -> str:
    """The one-line message validating BASE with `changes` gives."""
    with pytest.raises(CandidateRejected) as caught:
        validate_project(DbtProject.of({**BASE, **changes}), spec)
    message = str(caught.value)
    assert "\n" not in message and len(message) <= 400
    return message


def test_a_model_that_does_not_compile() -> None:
    assert rejection({"models/m.sql": "select * from {{ ref('stg_orders') \n"}) == (
        "models/m.sql line 1: Jinja syntax error: unexpected end of template, expected 'end of print statement'."
    )
    message = rejection({"models/m.sql": "select (id from {{ ref('stg_orders') }}\n"})
    assert message.startswith("models/m.sql: could not parse model:")


def test_sql_that_sqlglot_accepts_but_duckdb_does_not_parse_fails_at_validation() -> None:
    """sqlglot reads `IN (SELECT)` and writes it back; DuckDB's parser refuses it, so the model would fail at run
    time: the validator's last step parses each model with DuckDB."""
    sql = "select id from {{ ref('stg_orders') }} where id in (select)\n"
    assert rejection({"models/m.sql": sql}) == (
        "models/m.sql: DuckDB cannot parse the model: Parser Error: SELECT clause without selection list"
    )


def test_a_ref_to_a_missing_model_or_an_undeclared_source() -> None:
    assert rejection({"models/m.sql": "select * from {{ ref('stg_order') }}\n"}) == (
        "models/m.sql: ref('stg_order') names no model of the project (models: m, stg_orders)"
    )
    assert rejection({"models/m.sql": "select * from {{ source('shop', 'refunds') }}\n"}) == (
        "models/m.sql: source('shop', 'refunds') is not declared in a models/*.yml file (declared: shop.orders)"
    )
    # a table read without ref() or source() is neither a declared dependency nor allowed
    assert rejection({"models/m.sql": "select * from stg_orders\n"}).startswith(
        "models/m.sql: table 'stg_orders' is not allowed: the model has no ref or source"
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("select * from read_csv('/etc/passwd')", "table function READ_CSV is not allowed"),
        (
            "select id, (select count(*) from read_text('/etc/passwd')) as n from {{ ref('stg_orders') }}",
            "table function READ_TEXT is not allowed: only the relation ref('stg_orders') and the query's own CTEs",
        ),
        ("select * from '/etc/passwd.csv'", "reading a file ('/etc/passwd.csv') is not allowed"),
        (
            "COPY (select 1) TO '/tmp/leak.csv'",
            "COPY is not allowed: a model must be a single read-only query",
        ),
        ("select 1 as x; ATTACH '/tmp/x.duckdb'", "expected exactly one statement, got 2"),
        ("select getenv('HOME') as home from {{ ref('stg_orders') }}", "function GETENV is not allowed"),
    ],
)
def test_a_model_that_reads_or_writes_a_file(sql: str, message: str) -> None:
    text = rejection({"models/m.sql": sql + "\n"})
    assert text.startswith("models/m.sql: ") and message in text


def test_yaml_that_does_not_parse() -> None:
    bad = "version: 2\nmodels:\n  - name: stg_orders\n   columns: [\n"
    # libyaml's words (PyYAML's own parser says "expected <block end>, but found '<block mapping start>'")
    assert rejection({"models/schema.yml": bad}) == (
        "models/schema.yml line 4: YAML does not parse: did not find expected '-' indicator"
    )
    assert rejection({"dbt_project.yml": "name: [shop\n"}).startswith(
        "dbt_project.yml line 2: YAML does not parse"
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"dbt_project.yml": "name: shop\non-run-start: [\"COPY (select 1) TO 'x.csv'\"]\n"},
            "dbt_project.yml: key 'on-run-start' is not allowed here",
        ),
        (
            {"dbt_project.yml": "name: shop\nmodel-paths: ['/etc']\n"},
            "dbt_project.yml: model-paths: must stay",
        ),
        (
            {"dbt_project.yml": "name: shop\nmodels:\n  shop:\n    +post-hook: \"copy t to 'x'\"\n"},
            "dbt_project.yml: models.shop.+post-hook: config key 'post-hook' is not allowed",
        ),
        (
            {"dbt_project.yml": "name: shop\nmodels:\n  shop:\n    +materialized: external\n"},
            "materialized='external' is not allowed",
        ),
        (
            {"models/m.sql": "{{ config(pre_hook=\"copy t to 'x'\") }}select 1 as x\n"},
            "models/m.sql: config key 'pre_hook' is not allowed",
        ),
        (
            {"models/sources.yml": "version: 2\nsources:\n  - name: shop\n    meta: [1]\n    tables: 7\n"},
            "models/sources.yml: sources[0].tables: expected a list",
        ),
        (
            {
                "models/schema.yml": "version: 2\nmodels:\n  - name: stg_orders\n    description: \"{{ env_var('X') }}\"\n"
            },
            "Jinja is not allowed here",
        ),
    ],
)
def test_yaml_that_acts_outside_a_select_is_refused(changes: dict[str, str], message: str) -> None:
    assert message in rejection(changes)


def test_jinja_that_reaches_outside_is_refused_on_every_branch() -> None:
    # issue 39: dbt never renders a candidate's Jinja (`run_form`), so a name the renderer does not give is
    # undefined and fails when rendered; run_query runs constant queries only, on an empty locked-down DuckDB
    reaching = "{{ run_query('COPY (select 1) TO \\'x\\'') }}select 1 as x\n"
    assert "a query run while rendering may only compute constants" in rejection({"models/m.sql": reaching})
    assert "'env_var' is undefined" in rejection({"models/m.sql": "select '{{ env_var(\"HOME\") }}' as x\n"})
    assert "'execute'" in rejection(
        {
            "macros/go.sql": "{% macro go() %}{{ adapter.execute('x') }}{% endmacro %}",
            "models/m.sql": "select {{ go() }} as x",
        }
    )
    assert "SecurityError" in rejection({"models/m.sql": "select '{{ ref('stg_orders').__class__ }}' as x\n"})
    assert "range() of 100000 items" in rejection(
        {"models/m.sql": "{% for i in range(100000) %}{% endfor %}select 1 as x\n"}
    )
    assert "include is not allowed" in rejection({"models/m.sql": "{% include 'x.sql' %}"})
    spin = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}select 1 as x\n"
    quick = DbtSpec(render_deadline_s=0.5)
    assert rejection({"models/m.sql": spin}, quick) in (  # whichever bound a machine reaches first: one line
        "models/m.sql: rendering took longer than its deadline",
        "models/m.sql: the Jinja takes more than 1,000,000 steps (loops, calls, filters); simplify it",
    )
    assert "a repeated sequence of more than 10000 items" in rejection({"models/m.sql": "{{ 'x' * 10**9 }}"})
    assert "unknown tag 'snapshot'" not in rejection(  # dbt's own blocks in a macro file are left out
        {
            "macros/m.sql": "{% materialization table, default %}{% endmaterialization %}",
            "models/m.sql": "select 1 as x from nowhere",
        }
    )


def test_graph_columns_and_targets() -> None:
    cycle = {
        "models/a.sql": "select * from {{ ref('b') }}\n",
        "models/b.sql": "select * from {{ ref('a') }}\n",
    }
    assert rejection(cycle) == "models/b.sql: the refs form a cycle: a -> b -> a"
    assert rejection({"models/m.sql": "select idx from {{ ref('stg_orders') }}\n"}).startswith(
        "models/m.sql: column check failed: Column 'idx' could not be resolved"
    )
    scored = DbtSpec(source_columns=SPEC.source_columns, targets={"m": ("id", "dollars")})
    assert rejection({"models/m.sql": "select id from {{ ref('stg_orders') }}\n"}, scored) == (
        "models/m.sql: model 'm' must return dollars; it returns id"
    )
    ephemeral = (
        "{{ config(materialized='ephemeral') }}select id, amount as dollars from {{ ref('stg_orders') }}\n"
    )
    assert rejection({"models/m.sql": ephemeral}, scored) == (
        "models/m.sql: model 'm' is scored, so it cannot be ephemeral"
    )


def test_a_valid_project_becomes_the_run_form() -> None:
    files = {
        **BASE,
        "macros/cents.sql": "{% macro dollars(column) %}{{ column }} / {{ var('cents', 100) }}{% endmacro %}\n",
        "models/orders.sql": "{{ config(materialized='view', tags=['mart']) }}\n"
        "select o.id, {{ dollars('o.amount') }} as dollars from {{ ref('stg_orders') }} as o\n",
    }
    validated = validate_project(DbtProject.of(files), SPEC)
    orders = validated.models["orders"]
    assert orders.refs == ("stg_orders",) and orders.materialized == "view"
    assert orders.columns == ("id", "dollars")
    assert validated.models["stg_orders"].materialized == "table"  # from dbt_project.yml
    run = validated.run_files("coco")
    assert run["models/orders.sql"] == (
        "SELECT\n  o.id,\n  o.amount / 100 AS dollars\nFROM {{ ref('stg_orders') }} AS o"
    )
    assert "macros/cents.sql" not in run  # expanded by the validator: dbt never renders the author's Jinja
    assert "profile: coco" in run["dbt_project.yml"] and "models:" not in run["dbt_project.yml"]
    # the effective configs (config() in the model, dbt_project.yml's folders) are written once, as plain data
    properties = yaml.safe_load(run["models/_coco_properties.yml"])
    configs = {entry["name"]: entry["config"] for entry in properties["models"]}
    assert configs == {
        "orders": {"materialized": "view", "enabled": True},
        "stg_orders": {"materialized": "table", "enabled": True},
    }
    assert sorted(run) == [
        "dbt_project.yml",
        "models/_coco_properties.yml",
        "models/orders.sql",
        "models/stg_orders.sql",
    ]


def test_snowflake_dialect_ai_calls_are_bound_for_the_sandbox() -> None:
    spec = DbtSpec(dialect="snowflake", allowed_functions=frozenset({"AI_CLASSIFY"}))
    files = {
        **BASE,
        "models/m.sql": "select id, AI_CLASSIFY(amount::string, ['big', 'small']):labels[0]::string as size\n"
        "from {{ ref('stg_orders') }}\n",
    }
    run_sql = validate_project(DbtProject.of(files), spec).models["m"].run_sql
    assert "AI_CLASSIFY(TO_JSON(" in run_sql and "->> '$.labels[0]'" in run_sql
    assert "FROM {{ ref('stg_orders') }}" in run_sql
    assert "this task does not enable" in rejection(files, DbtSpec(dialect="snowflake"))


def test_the_committed_packs_validate() -> None:
    jaffle = DbtSpec(
        source_columns={
            ("jaffle_shop", "raw_customers"): {"id": "INTEGER", "first_name": "VARCHAR", "last_name": "VARCHAR"},
            ("jaffle_shop", "raw_orders"): {"id": "INTEGER", "user_id": "INTEGER", "order_date": "DATE", "status": "VARCHAR"},
            ("jaffle_shop", "raw_payments"): {"id": "INTEGER", "order_id": "INTEGER", "payment_method": "VARCHAR", "amount": "INTEGER"},
        },
        targets={"customers": ("customer_id", "customer_lifetime_value"), "orders": ("order_id", "amount")},
    )  # fmt: skip
    for folder in ("seed", "solution"):
        validated = validate_project(DbtProject.from_dir(REPO / "tasks" / "jaffle_shop" / folder), jaffle)
        assert sorted(validated.models) == [
            "customers",
            "orders",
            "stg_customers",
            "stg_orders",
            "stg_payments",
        ]
    ai = DbtSpec(dialect="snowflake", allowed_functions=frozenset({"AI_CLASSIFY"}))
    validate_project(DbtProject.from_dir(REPO / "tasks" / "goemotions_dbt" / "seed"), ai)
