"""One dbt evaluation of a 10-model project on 15,000 source rows, warm (issue 39: under 3 s).

Builds a project of ten models (four staging views, three intermediate tables, three marts with joins, window
functions, a CASE, GROUP BY) over three sources of 30,000 rows (4,000 customers, 12,000 orders, 14,000
payments, seeded; the train split evaluated holds about half: 15,000), makes it a task with `coco-sql init dbt` (expected rows: the project's own output, built by
real dbt), and times `Evaluator.evaluate` on the train split: the first (cold: the dbt worker starts) and then
`--runs` warm ones, each of a project changed by one expression that gives the same rows (so nothing is memoised: validation, the
render, dbt's partial parse and run, the data tests and the scoring all happen). Prints the median and the
load average beside it (a shared machine's wall times swing with the others' load).

Usage: python bench/bench_dbt_eval.py [--runs 5]   (needs coco-sql[dbt])
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

MODELS = {
    "models/staging/stg_customers.sql": "select id as customer_id, name, segment from {{ source('shop', 'customers') }}",
    "models/staging/stg_orders.sql": (
        "{{\n  config(\n    materialized='view',\n  )\n}}\n"
        "select id as order_id, customer_id, order_date, status from {{ source('shop', 'orders') }}"
    ),
    "models/staging/stg_payments.sql": (
        "select id as payment_id, order_id, method, amount / 100.0 as amount from {{ source('shop', 'payments') }}"
    ),
    "models/staging/stg_segments.sql": "select distinct segment from {{ ref('stg_customers') }}",
    "models/intermediate/int_order_amounts.sql": (
        "select order_id, sum(amount) as amount, count(*) as payments from {{ ref('stg_payments') }} group by 1"
    ),
    "models/intermediate/int_orders.sql": (
        "select o.order_id, o.customer_id, o.order_date, date_trunc('month', o.order_date) as order_month,\n"
        "  case when o.status in ('returned', 'return_pending') then 'returned' else o.status end as status,\n"
        "  coalesce(a.amount, 0) as amount, row_number() over (partition by o.customer_id order by o.order_date,"
        " o.order_id) as order_number\n"
        "from {{ ref('stg_orders') }} o left join {{ ref('int_order_amounts') }} a on o.order_id = a.order_id"
    ),
    "models/intermediate/int_customer_orders.sql": (
        "select customer_id, min(order_date) as first_order, max(order_date) as last_order,"
        " count(*) as orders, sum(amount) as lifetime_value from {{ ref('int_orders') }} group by 1"
    ),
    "models/marts/customers.sql": (
        "select c.customer_id, c.name, c.segment, co.first_order, co.last_order, coalesce(co.orders, 0) as orders,\n"
        "  coalesce(co.lifetime_value, 0) as lifetime_value\n"
        "from {{ ref('stg_customers') }} c left join {{ ref('int_customer_orders') }} co"
        " on c.customer_id = co.customer_id"
    ),
    "models/marts/orders.sql": (
        "select order_id, customer_id, order_date, status, amount, order_number,"
        " lag(amount) over (partition by customer_id order by order_date, order_id) as previous_amount"
        " from {{ ref('int_orders') }}"
    ),
    "models/marts/customer_months.sql": (
        "select customer_id, order_month, count(*) as orders, sum(amount) as amount"
        " from {{ ref('int_orders') }} group by customer_id, order_month"
    ),
}
SOURCES = """version: 2
sources:
  - name: shop
    tables:
      - name: customers
      - name: orders
      - name: payments
models:
  - name: customers
    columns:
      - name: customer_id
        tests: [unique, not_null]
  - name: orders
    columns:
      - name: order_id
        tests: [unique, not_null]
"""


def build(root: Path) -> Path:
    """The project folder, its DuckDB file of sources (15,000 rows) and the expected rows; the task folder."""
    rng = np.random.default_rng(39)
    project = root / "shop"
    for path, sql in {**MODELS, "models/sources.yml": SOURCES,
                      "dbt_project.yml": "name: shop\nprofile: shop\nconfig-version: 2\n"}.items():  # fmt: skip
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(sql + "\n")
    customers = pd.DataFrame({"id": range(4000), "name": [f"c{i}" for i in range(4000)],
                              "segment": rng.choice(["retail", "pro", "gov"], 4000)})  # fmt: skip
    orders = pd.DataFrame({"id": range(12000), "customer_id": rng.integers(0, 4000, 12000),
                           "order_date": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 365, 12000), "D"),
                           "status": rng.choice(["placed", "shipped", "returned", "return_pending"], 12000)})  # fmt: skip
    payments = pd.DataFrame({"id": range(14000), "order_id": rng.integers(0, 12000, 14000),
                             "method": rng.choice(["card", "bank", "gift"], 14000),
                             "amount": rng.integers(100, 10000, 14000)})  # fmt: skip
    import duckdb

    with duckdb.connect(str(project / "warehouse.duckdb")) as con:
        con.execute("CREATE SCHEMA shop")
        for name, frame in (("customers", customers), ("orders", orders), ("payments", payments)):
            con.register("f", frame)
            con.execute(f"CREATE TABLE shop.{name} AS SELECT * FROM f")
            con.unregister("f")
    (project / "profiles.yml").write_text(
        "shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: warehouse.duckdb\n      threads: 1\n"
    )
    dbt = Path(sys.executable).parent / "dbt"
    subprocess.run([str(dbt), "run", "--profiles-dir", "."], cwd=project, check=True, capture_output=True)
    from coco_sql.cli import run

    targets = ["customers", "orders", "customer_months:customer_id,order_month"]
    code = run(["init", "dbt", str(project), "--expected", str(project / "warehouse.duckdb"), "--no-score",
                *[a for t in targets for a in ("--target", t)]])  # fmt: skip
    if code:
        raise SystemExit("init failed")
    return project


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    from coco_sql.evaluate.evaluator import Evaluator
    from coco_sql.tasks import load_task

    with tempfile.TemporaryDirectory() as tmp:
        task = load_task(build(Path(tmp)))
        rows = sum(len(f) for f in task.kind_data.sources["train"].values())
        evaluator = Evaluator(task, ("train",))
        try:
            start = time.perf_counter()
            first = evaluator.evaluate(task.seed_program, "train")
            cold = time.perf_counter() - start
            warm = []
            for k in range(runs):
                code = task.seed_program.replace(
                    "select id as customer_id", f"select id + 0 * {k + 1} as customer_id"
                )  # the same rows from a different program: a comment alone is memoised (`Evaluator`)
                assert code != task.seed_program
                start = time.perf_counter()
                outcome = evaluator.evaluate(code, "train")
                warm.append(time.perf_counter() - start)
                assert outcome.error is None and outcome.score == first.score
        finally:
            evaluator.close()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"10 models, {rows:,} source rows in the train split, score {first.score:.3f}")
    print(f"cold (worker start + first evaluation): {cold:.1f} s")
    print(
        f"warm: median {statistics.median(warm):.2f} s over {runs} (min {min(warm):.2f}, max {max(warm):.2f})"
    )
    print(f"load average: {load}")


if __name__ == "__main__":
    main()
