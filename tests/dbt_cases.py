"""What the dbt tests share: the jaffle_shop pack's sources and targets, a small `shop` project with four texts,
and an AI_CLASSIFY project over them with the rows it must give (tests/test_dbt_runner.py runs it in-process,
tests/test_dbt_sandbox.py in the sandbox)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
JAFFLE = REPO / "tasks" / "jaffle_shop"
TARGETS = {
    "customers": ("customer_id", ("first_name", "last_name", "first_order", "most_recent_order",
                                  "number_of_orders", "customer_lifetime_value")),
    "orders": ("order_id", ("customer_id", "order_date", "status", "credit_card_amount", "coupon_amount",
                            "bank_transfer_amount", "gift_card_amount", "amount")),
}  # fmt: skip
SHOP = {
    "dbt_project.yml": "name: shop\nconfig-version: 2\nmodels:\n  shop:\n    +materialized: table\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: shop\n    tables:\n      - name: texts\n",
}
TEXTS = pd.DataFrame(
    {
        "id": ["a", "b", "c", "d"],
        "text": [
            "The striker scored twice and the team won the league match.",
            "Whisk the eggs with sugar, then bake the cake for forty minutes.",
            "The goalkeeper saved a penalty in the final minute of the game.",
            "Simmer the tomato sauce with garlic and basil for an hour.",
        ],
    }
)
TOPICS = {
    **SHOP,
    "models/topics.sql": "select id, AI_CLASSIFY(text, ['sport', 'cooking']) as topic\n"
    "from {{ source('shop', 'texts') }}\n",
    "models/topic_counts.sql": "select topic:labels[0]::string as label, count(*) as n\n"
    "from {{ ref('topics') }} group by 1\n",
}  # a Snowflake-dialect project with AI_CLASSIFY: targets topics and topic_counts


def jaffle_sources() -> dict[str, pd.DataFrame]:
    return {
        f"jaffle_shop.{name}": pd.read_csv(JAFFLE / "data" / f"{name}.csv")
        for name in ("raw_customers", "raw_orders", "raw_payments")
    }


def assert_topics(models: dict[str, Any]) -> None:
    """The rows `TOPICS` must give: each text classified right, two of each label."""
    topics = {row.id: json.loads(row.topic) for row in models["topics"].itertuples()}
    assert topics == {
        "a": {"labels": ["sport"]}, "b": {"labels": ["cooking"]}, "c": {"labels": ["sport"]}, "d": {"labels": ["cooking"]}
    }  # fmt: skip
    counts = models["topic_counts"].sort_values("label")
    assert list(counts.itertuples(index=False, name=None)) == [("cooking", 2), ("sport", 2)]


# -- a dbt task over plain SQL tables (coco_task with option kind 'dbt'): two sources, one staging model, one mart
SHOP_SETUP = """
CREATE OR REPLACE TABLE customers AS SELECT i AS id, 'customer ' || i AS name FROM range(1, 41) t(i);
CREATE OR REPLACE TABLE orders AS
  SELECT i AS id, 1 + (i * 7) % 33 AS customer_id, 100 + (i * 37) % 900 AS amount_cents,
         CASE WHEN i % 5 = 0 THEN 'returned' ELSE 'shipped' END AS status, DATE '2024-01-01' + i::INTEGER AS order_date
  FROM range(1, 121) t(i);
CREATE OR REPLACE TABLE expected_totals AS
  SELECT c.id AS customer_id, c.name, count(o.id) AS n_orders, coalesce(sum(o.amount_cents), 0) / 100.0 AS total
  FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.status <> 'returned'
  GROUP BY c.id, c.name;
"""  # 40 customers, 7 of them without orders; a fifth of the orders returned
SHOP_TABLES = ("customers", "orders", "expected_totals")
SHOP_SEED = """-- file: dbt_project.yml
name: shop
config-version: 2
models:
  shop:
    +materialized: table
-- file: models/sources.yml
version: 2
sources:
  - name: shop
    tables:
      - name: customers
      - name: orders
-- file: models/schema.yml
version: 2
models:
  - name: stg_orders
    columns:
      - name: status
        data_tests:
          - accepted_values:
              arguments:
                values: ['shipped']
      - name: customer_id
        data_tests:
          - relationships:
              arguments:
                to: source('shop', 'customers')
                field: id
  - name: customer_totals
    columns:
      - name: customer_id
        data_tests: [unique, not_null]
-- file: models/staging/stg_orders.sql
select id as order_id, customer_id, amount_cents as amount, status
from {{ source('shop', 'orders') }}
where status <> 'returned'
-- file: models/customer_totals.sql
select c.id as customer_id, c.name, count(o.order_id) as n_orders, coalesce(sum(o.amount), 0) as total
from {{ source('shop', 'customers') }} c
join {{ ref('stg_orders') }} o on o.customer_id = c.id
group by c.id, c.name
"""  # two planted defects: amounts in cents, and an inner join that loses the customers without orders
SHOP_FIXED = SHOP_SEED.replace("amount_cents as amount", "amount_cents / 100.0 as amount").replace(
    "\njoin {{ ref", "\nleft join {{ ref"
)
SHOP_OPTIONS = {
    "kind": "dbt",
    "sources": {"shop.customers": "customers", "shop.orders": "SELECT * FROM orders"},
    "targets": {
        "customer_totals": {
            "expected": "expected_totals",
            "key": "customer_id",
            "tolerance": {"total": 0.005},
        }
    },
    "entity": "shop.customers.id",
    "follow": ["shop.orders.customer_id -> shop.customers.id"],
    "seed_program": SHOP_SEED,
}


def shop_frames() -> dict[str, pd.DataFrame]:
    """The shop tables as DataFrames (from DuckDB, as SHOP_SETUP makes them), named as Snowflake folds them."""
    import duckdb

    with duckdb.connect() as con:
        con.execute(SHOP_SETUP)
        frames = {name.upper(): con.execute(f"SELECT * FROM {name}").df() for name in SHOP_TABLES}
    frames["ORDERS"]["order_date"] = frames["ORDERS"]["order_date"].dt.date  # a DATE, not a timestamp
    return frames
