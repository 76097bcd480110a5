"""What real dbt projects write, accepted by the validator (issue 39), and what stays refused in one line.

One small project holds them all: a multi-line config() with keys that never reach dbt (schema, alias, docs,
unique_key, incremental), an ``{% if is_incremental() %}`` branch using ``this``, a name only tested with ``is
defined``, a var named with ``:``, a seed read with ref(), a package's macro with ``adapter.dispatch`` and
``{{ return() }}``, dbt's own ``dbt.hash``, and YAML keys a run never reads. The rendered SQL is what dbt would
have compiled; refusals (a hook, an external materialization, a query over a table while rendering) are one line
naming the file.
"""

from __future__ import annotations

import pytest

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec, validate_project

PROJECT = {
    "dbt_project.yml": "name: shop\nconfig-version: 2\nmodels:\n  +start: Jan 1 2022\n  shop:\n    +schema: marts\n"
    "seeds:\n  +schema: raw\nvars:\n  'orders:limit': 10\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: shop\n    schema: raw_data\n    loader: fivetran\n"
    "    tables:\n      - name: payments\n        identifier: PAYMENTS_V2\n        meta: {owner: finance}\n",
    "models/schema.yml": "version: 2\nmodels:\n  - name: orders\n    meta: {team: x}\n    columns:\n"
    "      - name: order_id\n        tests: [unique, not_null, {dbt_utils.not_constant: {}}]\n"
    "      - name: amount\n        tests:\n          - less_than_amount: {amount: 1000}\n"
    "  - name: raw_orders\n    description: a seed's properties\n",
    "models/orders.sql": """{{
    config(
        materialized='incremental',
        unique_key='order_id',
        schema='marts',
        alias='fct_orders',
        docs={'node_color': 'red'},
    )
}}
select
    {{ shop_utils.key(['o.id', 'o.user_id']) }} as order_key,
    o.id as order_id,
    {{ dbt.hash('o.status') }} as status_hash,
    p.amount / 100.0 as amount
from {{ ref('raw_orders') }} as o
left join {{ source('shop', 'payments') }} as p on p.order_id = o.id
{% if is_incremental() %}
where o.id > (select max(order_id) from {{ this }})
{% endif %}
{% if sqlmesh_incremental is defined %}
where o.id between {{ start }} and {{ end }}
{% endif %}
limit {{ var('orders:limit') }}
""",
    "dbt_packages/shop_utils/macros/key.sql": """{% macro key(columns) %}
  {{ return(adapter.dispatch('key', 'shop_utils')(columns)) }}
{% endmacro %}
{% macro default__key(columns) %}md5({{ columns | join(" || '-' || ") }}){% endmacro %}
{% test not_negative(model, column_name) %}select * from {{ model }} where {{ column_name }} < 0{% endtest %}
""",
}
SPEC = DbtSpec(
    source_columns={
        ("shop", "payments"): {"order_id": "INTEGER", "amount": "INTEGER"},
        ("dbt_seeds", "raw_orders"): {"id": "INTEGER", "user_id": "INTEGER", "status": "VARCHAR"},
    },
    targets={"orders": ("order_id", "amount")},
)


def test_a_real_projects_features_validate_and_render_as_dbt_would() -> None:
    checked = validate_project(DbtProject.of(PROJECT), SPEC)
    model = checked.models["orders"]
    assert model.materialized == "table"  # incremental: every run builds from scratch
    assert model.sources == (("dbt_seeds", "raw_orders"), ("shop", "payments"))  # the seed is a source
    sql = model.rendered.sql if model.rendered is not None else ""
    assert "md5(o.id || '-' || o.user_id)" in sql  # the package's macro, dispatched, returned
    assert "md5(cast(o.status as VARCHAR))" in sql  # dbt's own cross-database macro
    assert "limit 10" in sql and "max(order_id)" not in sql and "between" not in sql
    files = checked.run_files("coco")
    assert "dbt_seeds" in files["models/_coco_properties.yml"]  # declared for dbt beside the YAML's sources
    assert "not_constant" not in files["models/_coco_properties.yml"]  # a package's test: not run


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"models/orders.sql": "{{ config(post_hook='delete from x') }} select 1 as order_id, 2 as amount"},
         "models/orders.sql: config key 'post_hook' is not allowed"),
        ({"models/orders.sql": "{{ config(materialized='external') }} select 1 as order_id, 2 as amount"},
         "models/orders.sql: materialized='external' is not allowed"),
        ({"models/orders.sql": "select {{ run_query('select * from shop.payments') }} as order_id, 1 as amount"},
         "models/orders.sql: a query run while rendering may only compute constants"),
        ({"models/orders.sql": "select {{ this }} as order_id, 1 as amount"},
         "{{ this }} names the model's own table"),
        ({"models/orders.sql": "select {{ shop_utils.nothing() }} as order_id, 1 as amount"},
         "shop_utils.nothing is not a macro of shop_utils"),
    ],
)  # fmt: skip
def test_what_stays_refused_is_one_line_naming_the_file(change: dict[str, str], message: str) -> None:
    with pytest.raises(CandidateRejected) as raised:
        validate_project(DbtProject.of(PROJECT | change), SPEC)
    assert message in str(raised.value) and "\n" not in str(raised.value)
