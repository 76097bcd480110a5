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
