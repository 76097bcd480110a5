"""Repairs the dbt mutator must find on projects written as people write them (issue 39): an aggregate whose
position sqlglot does not record (MAX, MIN, COUNT inside a cast) and a join key the model never reads elsewhere
(another model reads it through the same relation). Hypotheses only: no dbt run."""

from __future__ import annotations

import json

from sqlglot import exp

from coco_sql.languages.dbt.edits import hypotheses
from coco_sql.languages.dbt.evidence import Evidence
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec, validate_project
from coco_sql.sqlkit.spans import SpannedSql

PROJECT = DbtProject.of({
    "dbt_project.yml": "name: shop\n",
    "models/lines.sql": "select l.order_id, l.item_id, l.qty from {{ ref('order_lines') }} as l\n",
    "models/mart.sql": (
        "select\n  o.customer_id,\n  MAX(l.qty)::DOUBLE as revenue /* per customer */\n"
        "from {{ ref('orders') }} as o\nleft join {{ ref('order_lines') }} as l\n  on o.id = l.item_id\n"
        "group by o.customer_id\n"
    ),
})  # fmt: skip


def _evidence() -> Evidence:
    ids = [f"mart:{c}" for c in range(4)]
    got = [json.dumps({"customer_id": c, "revenue": 2.0}) for c in range(4)]
    want = [json.dumps({"customer_id": c, "revenue": 5.0 + c}) for c in range(4)]
    return Evidence.of(ids, got, want)


def _approaches() -> dict[str, str]:
    found = hypotheses(PROJECT, None, _evidence(), "duckdb", targets=["mart"], keys=["customer_id"],
                       target_keys={"mart": ["customer_id"]})  # fmt: skip
    return {e.approach: DbtProject.from_text(e.code).files["models/mart.sql"] for e in found}


def test_an_aggregate_inside_a_cast_is_edited_by_its_name() -> None:
    sql = SpannedSql.parse("select MAX(x)::DOUBLE as r, count(distinct y) as n from t", "duckdb")
    assert sql is not None
    spans = [sql.source(f) for f in sql.tree.find_all(exp.Max, exp.Count)]
    assert sorted(spans) == ["MAX(x)", "count(distinct y)"]
    made = _approaches()
    assert made["mart.revenue: sum instead of MAX"] == PROJECT.files["models/mart.sql"].replace(
        "MAX(", "SUM("
    )


def test_a_join_key_may_be_a_column_only_another_model_reads_through_the_same_relation() -> None:
    made = _approaches()
    fixed = made["join #1 in mart on l.order_id instead of l.item_id"]
    assert "on o.id = l.order_id\n" in fixed and "/* per customer */" in fixed


# A mart whose amount columns a Jinja loop makes, over a staging model that maps a category wrongly and passes an
# amount in cents: only the rendered query says which staging columns the loop's columns read.
LOOP_PROJECT = DbtProject.of({
    "dbt_project.yml": "name: shop\n",
    "models/staging.sql": (
        "select id, order_id,\n"
        "  case when method = 'gift' then 'coupon' else method end as method,\n"
        "  cents as amount\nfrom {{ source('raw', 'payments') }}\n"
    ),
    "models/mart.sql": (
        "{% set methods = ['card', 'coupon', 'gift'] %}\n"
        "select order_id,\n"
        "  {% for m in methods %}sum(case when method = '{{ m }}' then amount else 0 end) as {{ m }}_amount,\n"
        "  {% endfor %}sum(amount) as total\nfrom {{ ref('staging') }}\ngroup by order_id\n"
    ),
    "models/sources.yml": "version: 2\nsources:\n  - name: raw\n    tables:\n      - name: payments\n",
})  # fmt: skip


def _loop_evidence() -> Evidence:
    ids = [f"mart:{o}" for o in range(4)]
    got = [
        json.dumps({"order_id": o, "gift_amount": 0, "coupon_amount": 900, "total": 900}) for o in range(4)
    ]
    want = [json.dumps({"order_id": o, "gift_amount": 9, "coupon_amount": 0, "total": 9}) for o in range(4)]
    return Evidence.of(ids, got, want)


def test_a_column_a_jinja_loop_makes_points_at_what_feeds_it_upstream() -> None:
    spec = DbtSpec(
        source_columns={("raw", "payments"): {c: "INTEGER" for c in ("id", "order_id", "method", "cents")}}
    )
    checked = validate_project(LOOP_PROJECT, spec)
    with_render = [e.approach for e in hypotheses(LOOP_PROJECT, checked, _loop_evidence(), "duckdb",
                                                  targets=["mart"], keys=["order_id"])]  # fmt: skip
    as_written = [e.approach for e in hypotheses(LOOP_PROJECT, None, _loop_evidence(), "duckdb",
                                                 targets=["mart"], keys=["order_id"])]  # fmt: skip
    pass_through = "pass staging.method through instead of its CASE mapping"
    assert pass_through in with_render and pass_through not in as_written
    # a unit is fixed where it enters: the staging amount outranks the mart's total, which reads it
    scales = [a for a in with_render if a.startswith("scale ")]
    assert (
        scales[0] == "scale staging.amount by 1/100 (unit)" and "scale mart.total by 1/100 (unit)" in scales
    )
