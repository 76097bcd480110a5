"""Build the jaffle_shop dbt task pack from dbt Labs' jaffle_shop (the "classic" project with seeds).

Writes, under tasks/jaffle_shop/:

- reference/  the upstream project's files, verbatim (dbt_project.yml, models/, seeds/, LICENSE, README.md);
- data/       the source tables: the upstream seeds (their rows unchanged, first) plus rows drawn by a seeded
              generator that follows the seeds' own distributions (see `scale_up`), so that the marts have
              enough keys for train / val / test splits;
- solution/   the reference as a program of this kind: the one change is that the staging models read
              ``source('jaffle_shop', 'raw_*')`` (declared in models/staging/sources.yml) instead of
              ``ref('raw_*')`` of a seed, since a program's data comes from the task's sources;
- expected/   customers.csv and orders.csv: the solution's outputs, run on dbt with dbt-duckdb; checked
              against the verbatim reference run with the same CSVs as its seeds (``dbt seed`` + ``dbt run``);
- seed/       the solution with the planted defects of `DEFECTS` (README.md lists them).

It prints each target's score for the seed (matched rows over the union of keys, `languages.dbt.compare`).
Needs dbt-core and dbt-duckdb (the optional `dbt` extra in pyproject.toml).

Usage: python scripts/make_jaffle_shop.py [--repo GIT_DIR] [--out DIR]
Re-running with the defaults reproduces the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from coco_sql.languages.dbt.compare import Tolerance, compare_rows
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.runner import DbtSession, run_project
from coco_sql.languages.dbt.validate import validate_project

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = "dbt-labs/jaffle_shop"
COMMIT = "b0b77aac70f490770a1e77c02bb0a2b8771d3203"
REFERENCE_FILES = (
    "LICENSE",
    "README.md",
    "dbt_project.yml",
    "models/customers.sql",
    "models/docs.md",
    "models/orders.sql",
    "models/overview.md",
    "models/schema.yml",
    "models/staging/schema.yml",
    "models/staging/stg_customers.sql",
    "models/staging/stg_orders.sql",
    "models/staging/stg_payments.sql",
    "seeds/raw_customers.csv",
    "seeds/raw_orders.csv",
    "seeds/raw_payments.csv",
)
SOURCES = ("raw_customers", "raw_orders", "raw_payments")
CUSTOMERS = 1500
SEED = 20240601
TARGETS = {
    "customers": (
        "customer_id",
        ("first_name", "last_name", "first_order", "most_recent_order", "number_of_orders", "customer_lifetime_value"),
    ),
    "orders": (
        "order_id",
        ("customer_id", "order_date", "status", "credit_card_amount", "coupon_amount", "bank_transfer_amount",
         "gift_card_amount", "amount"),
    ),
}  # fmt: skip
SOURCES_YML = """version: 2

sources:
  - name: jaffle_shop
    description: The shop's raw tables (the seeds of the upstream project).
    tables:
      - name: raw_customers
      - name: raw_orders
      - name: raw_payments
"""

# (path, text in the solution, text in the seed, what the defect is); each `old` occurs exactly once.
DEFECTS = (
    (
        "models/staging/stg_payments.sql",
        "        -- `amount` is currently stored in cents, so we convert it to dollars\n        amount / 100 as amount",
        "        amount",
        "amounts in cents: the staging model forgets that raw amounts are cents",
    ),
    (
        "models/staging/stg_orders.sql",
        "        order_date,\n        status\n",
        "        order_date,\n        case when status = 'shipped' then 'completed' else status end as status\n",
        "order status mishandled: shipped orders are reported as completed",
    ),
    (
        "models/staging/stg_payments.sql",
        "        payment_method,\n",
        "        case when payment_method = 'gift_card' then 'coupon' else payment_method end as payment_method,\n",
        "a payment method mapped wrongly: gift card payments are booked as coupons",
    ),
    (
        "models/customers.sql",
        "    left join customer_orders\n        on customers.customer_id = customer_orders.customer_id",
        "    join customer_orders\n        on customers.customer_id = customer_orders.customer_id",
        "wrong join type: customers without orders disappear",
    ),
    (
        "models/customers.sql",
        "        count(order_id) as number_of_orders\n    from orders\n",
        "        count(orders.order_id) as number_of_orders\n    from orders\n"
        "    left join payments on payments.order_id = orders.order_id\n",
        "a lost dedup: orders are counted after a join to payments, so an order paid in two parts counts twice",
    ),
)


def git_show(git_dir: Path, path: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{path}"], check=True, capture_output=True
    ).stdout


def write_reference(git_dir: Path, out: Path) -> None:
    for path in REFERENCE_FILES:
        target = out / "reference" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git_show(git_dir, path))


def scale_up(seeds: dict[str, pd.DataFrame], customers: int, seed: int) -> dict[str, pd.DataFrame]:
    """The seeds' rows, then generated customers up to `customers`, with their orders and payments.

    Drawn from the seeds' own distributions: orders per customer (0-5, as in the seeds), order dates in the
    seeds' window, status by date (the seeds' last quarter is placed / shipped, earlier orders are completed
    with a few returns), 1-3 payments per order, the seeds' payment-method mix, amounts in whole dollars (as
    cents) up to 30. Every order has a payment and every status and method is one the reference's data tests
    accept, so the reference's tests pass on the scaled data as on the seeds.
    """
    rng = np.random.default_rng(seed)
    raw_customers, raw_orders, raw_payments = (seeds[name].copy() for name in SOURCES)
    first_names = sorted(set(raw_customers["first_name"]))
    initials = sorted(set(raw_customers["last_name"]))
    start = pd.Timestamp("2018-01-01")
    days = (pd.Timestamp(raw_orders["order_date"].max()) - start).days + 1
    new_customers = pd.DataFrame(
        {
            "id": np.arange(len(raw_customers) + 1, customers + 1),
            "first_name": rng.choice(first_names, customers - len(raw_customers)),
            "last_name": rng.choice(initials, customers - len(raw_customers)),
        }
    )
    counts = rng.choice([0, 1, 2, 3, 5], size=len(new_customers), p=[0.38, 0.33, 0.23, 0.05, 0.01])
    owners = np.repeat(new_customers["id"].to_numpy(), counts)
    offsets = np.sort(rng.integers(0, days, size=len(owners)))
    owners = rng.permutation(owners)  # orders sorted by date, owners shuffled across them
    late = offsets >= int(days * 0.74)
    status = np.where(
        late,
        rng.choice(["placed", "shipped"], size=len(owners)),
        rng.choice(["completed", "returned", "return_pending"], size=len(owners), p=[0.91, 0.06, 0.03]),
    )
    new_orders = pd.DataFrame(
        {
            "id": np.arange(len(raw_orders) + 1, len(raw_orders) + 1 + len(owners)),
            "user_id": owners,
            "order_date": [(start + pd.Timedelta(days=int(d))).date().isoformat() for d in offsets],
            "status": status,
        }
    )
    parts = rng.choice([1, 2, 3], size=len(new_orders), p=[0.87, 0.12, 0.01])
    paid = np.repeat(new_orders["id"].to_numpy(), parts)
    new_payments = pd.DataFrame(
        {
            "id": np.arange(len(raw_payments) + 1, len(raw_payments) + 1 + len(paid)),
            "order_id": paid,
            "payment_method": rng.choice(
                ["credit_card", "bank_transfer", "coupon", "gift_card"],
                size=len(paid),
                p=[0.49, 0.29, 0.115, 0.105],
            ),
            "amount": rng.integers(0, 31, size=len(paid)) * 100,
        }
    )
    return {
        "raw_customers": pd.concat([raw_customers, new_customers], ignore_index=True),
        "raw_orders": pd.concat([raw_orders, new_orders], ignore_index=True),
        "raw_payments": pd.concat([raw_payments, new_payments], ignore_index=True),
    }


def solution_files(reference: Path) -> dict[str, str]:
    """The reference as a program: staging models read declared sources instead of seeds."""
    files = DbtProject.from_dir(reference).files
    program = dict(files)
    for name in SOURCES:
        path = f"models/staging/stg_{name.removeprefix('raw_')}.sql"
        old = "{{ ref('" + name + "') }}"
        assert program[path].count(old) == 1, (path, old)
        program[path] = program[path].replace(old, "{{ source('jaffle_shop', '" + name + "') }}")
    program["models/staging/sources.yml"] = SOURCES_YML
    return program


def seed_files(solution: dict[str, str], skip: int | None = None, only: int | None = None) -> dict[str, str]:
    """The solution with the defects of `DEFECTS` planted: all, all but index `skip`, or only index `only`."""
    seed = dict(solution)
    for index, (path, old, new, _) in enumerate(DEFECTS):
        if index == skip or (only is not None and index != only):
            continue
        assert seed[path].count(old) == 1, (path, old)
        seed[path] = seed[path].replace(old, new)
    return seed


def write_tree(files: dict[str, str], root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    DbtProject.of(files).write(root)


def verbatim_outputs(reference: Path, data: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Run the upstream project itself (seeds replaced by `data`) with ``dbt seed`` and ``dbt run``."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager
    from dbt.cli.main import dbtRunner

    with tempfile.TemporaryDirectory(prefix="jaffle-verbatim-") as tmp:
        root = Path(tmp) / "project"
        shutil.copytree(reference, root)
        for name, frame in data.items():
            frame.to_csv(root / "seeds" / f"{name}.csv", index=False)
        database = Path(tmp) / "jaffle.duckdb"
        (Path(tmp) / "profiles.yml").write_text(
            f"jaffle_shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: '{database}'\n"
            "      threads: 1\n"
        )
        flags = ["--project-dir", str(root), "--profiles-dir", tmp, "--log-level", "none",
                 "--no-send-anonymous-usage-stats", "--no-version-check"]  # fmt: skip
        for command in ("seed", "run"):
            result = dbtRunner().invoke([command, *flags])
            assert result.success, (command, result.exception)
        with duckdb.connect(str(database)) as con:  # dbt-duckdb still holds it: same configuration
            outputs = {name: con.execute(f"SELECT * FROM main.{name}").df() for name in TARGETS}
        DuckDBConnectionManager.close_all_connections()
        return outputs


def frame_to_csv(frame: pd.DataFrame, path: Path, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.sort_values(key).to_csv(path, index=False, lineterminator="\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of dbt-labs/jaffle_shop")
    parser.add_argument("--out", type=Path, default=REPO / "tasks" / "jaffle_shop")
    args = parser.parse_args()
    out: Path = args.out
    shutil.rmtree(out / "reference", ignore_errors=True)
    write_reference(args.repo, out)
    seeds = {name: pd.read_csv(out / "reference" / "seeds" / f"{name}.csv") for name in SOURCES}
    data = scale_up(seeds, CUSTOMERS, SEED)
    for name, frame in data.items():
        frame_to_csv(frame, out / "data" / f"{name}.csv", "id")
    sources = {f"jaffle_shop.{name}": pd.read_csv(out / "data" / f"{name}.csv") for name in SOURCES}

    solution = solution_files(out / "reference")
    write_tree(solution, out / "solution")
    reference_run = run_project(DbtProject.of(solution), sources, list(TARGETS))
    assert not reference_run.errors and all(t.passed for t in reference_run.tests), reference_run
    verbatim = verbatim_outputs(out / "reference", data)
    for name, (key, columns) in TARGETS.items():
        check = compare_rows(verbatim[name], reference_run.models[name], key, columns)
        assert check.score == 1.0, (name, check)
        frame_to_csv(reference_run.models[name], out / "expected" / f"{name}.csv", key)

    seed = seed_files(solution)
    write_tree(seed, out / "seed")
    expected = {name: pd.read_csv(out / "expected" / f"{name}.csv") for name in TARGETS}
    with DbtSession() as session:
        seed_run = session.run(validate_project(DbtProject.of(seed)), sources, list(TARGETS))
        print("the seed:", describe(seed_run.models, expected))
        failing = [t.name for t in seed_run.tests if not t.passed]
        print(
            f"data tests: reference {reference_run.tests_passed}/{len(reference_run.tests)} pass; seed fails {failing}"
        )
        for index, (_, _, _, what) in enumerate(DEFECTS):
            fixed = seed_files(solution, skip=index)
            run = session.run(validate_project(DbtProject.of(fixed)), sources, list(TARGETS))
            print(f"defect {index + 1} fixed ({what.split(':')[0]}):", describe(run.models, expected))
            alone = seed_files(solution, only=index)
            run = session.run(validate_project(DbtProject.of(alone)), sources, list(TARGETS))
            print(f"defect {index + 1} alone:", describe(run.models, expected))
    print({name: len(frame) for name, frame in data.items()})


def describe(models: dict[str, pd.DataFrame], expected: dict[str, pd.DataFrame]) -> str:
    """Per target: matched rows of the expected ones, and the score."""
    tolerance = Tolerance(abs_tol=0.005)
    parts = []
    for name, (key, columns) in TARGETS.items():
        score = compare_rows(models[name], expected[name], key, columns, dict.fromkeys(columns, tolerance))
        parts.append(f"{name} {score.matched}/{len(expected[name])} ({score.score:.3f})")
    return ", ".join(parts)


if __name__ == "__main__":
    main()
