"""Build the two dbt packs made from real public dbt projects (issue 39): tasks/sushi_dbt and tasks/mrr_playbook.

Each pack folder holds:

- upstream/  the project as a user has it: the upstream files (adapted where SOURCE.md says), its seeds grown by a
             seeded generator that follows the upstream seeds (`grow_*`), and the planted defects of `DEFECTS`
             (README.md lists them);
- solution/  the upstream models and macros as they were (no defects), for the tests;
- golden/    one CSV per scored model: the solution's rows, built by real dbt (``dbt seed`` + ``dbt run`` with
             dbt-duckdb) over upstream/seeds;
- task.toml, data/, expected/: written by ``coco-sql init dbt upstream --expected golden --out PACK`` (the same
             command a user runs; tests/test_dbt_packs.py runs it again and compares).

Usage: python scripts/make_dbt_packs.py --sqlmesh GIT_DIR --mrr GIT_DIR --utils GIT_DIR
(the git directories of TobikoData/sqlmesh, dbt-labs/mrr-playbook and dbt-labs/dbt-utils). Needs dbt-core and
dbt-duckdb (the `dbt` extra). Re-running reproduces the committed files.
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SQLMESH = ("66acb67a5d3579705d38fa3f5be872214bccc722", "examples/sushi_dbt")
MRR = ("7dee0cd84929df9e986b3621f6afcb355ffc4985", "")  # "Add MIT License"
UTILS = ("49b932cb1f6fd0f7dfbf9048512db6415f570b20", "")  # dbt-utils 1.4.1

SUSHI_TARGETS = ("customer_revenue_by_day", "waiter_revenue_by_day", "waiter_as_customer_by_day", "customers",
                 "top_waiters")  # fmt: skip
MRR_TARGETS = ("mrr", "customer_revenue_by_month", "customer_churn_month")

# (file, text as upstream wrote it, the defect): each is a kind the repair mutator had no edit for before issue 39
DEFECTS = {
    "sushi_dbt": [
        ("models/waiter_revenue_by_day.sql", "ON oi.item_id = i.id", "ON oi.order_id = i.id"),  # a join key
        (
            "models/customer_revenue_by_day.sql",
            "SUM(ot.total)::DOUBLE",
            "MAX(ot.total)::DOUBLE",
        ),  # an aggregate
        (
            "models/customer_revenue_by_day.sql",
            "o.ds::TEXT AS ds",
            "date_trunc('week', o.ds)::DATE::TEXT AS ds",
        ),  # a date grain
        (
            "models/waiter_revenue_by_day.sql",
            "GROUP BY\n  o.waiter_id,\n  o.ds",
            "GROUP BY\n  o.waiter_id,\n  o.ds,\n  o.customer_id",
        ),  # a GROUP BY column too many
    ],
    "mrr_playbook": [
        ("models/mrr.sql", "when mrr_change > 0 then 'upgrade'", "when mrr_change >= 0 then 'upgrade'"),
        (
            "models/mrr.sql",
            "lag(mrr) over (partition by customer_id order by date_month)",
            "lead(mrr) over (partition by customer_id order by date_month)",
        ),  # a window function
        (
            "models/customer_revenue_by_month.sql",
            "date_trunc('month', min(start_date))",
            "date_trunc('year', min(start_date))",
        ),  # a date grain
        (
            "models/customer_revenue_by_month.sql",
            "and months.date_month < customers.date_month_end",
            "and months.date_month <= customers.date_month_end",
        ),  # a join condition
        (
            "models/mrr.sql",
            "lag(is_active) over (partition by customer_id order by date_month)",
            "lag(is_active) over (partition by customer_id order by date_month desc)",
        ),  # a window order
        (
            "models/customer_revenue_by_month.sql",
            "on customer_months.customer_id = subscription_periods.customer_id",
            "on customer_months.customer_id = subscription_periods.subscription_id",
        ),  # a join key
    ],
}

# mrr-playbook is written for Snowflake and dbt 0.19-1.x; what it takes to run on DuckDB with dbt 1.11 (SOURCE.md)
MRR_PORT = [
    ("dbt_project.yml", 'source-paths: ["models"]', 'model-paths: ["models"]'),
    ("dbt_project.yml", 'data-paths: ["data"]', 'seed-paths: ["seeds"]'),
    ("dbt_project.yml", '    - "dbt_modules"', '    - "dbt_packages"'),
    ("packages.yml", "version: 0.8.0", "version: 1.4.1"),
    ("models/mrr.sql", "dbt_utils.surrogate_key('date_month', 'customer_id')",
     "dbt_utils.generate_surrogate_key(['date_month', 'customer_id'])"),
    ("models/customer_churn_month.sql", "dateadd(month, 1, date_month)::date", "(date_month + interval 1 month)::date"),
    ("models/utils/util_months.sql", "start_date=\"'2018-01-01'\"", "start_date=\"cast('2018-01-01' as date)\""),
    ("models/utils/util_months.sql", "end_date=\"date_trunc('month', current_date)\"",
     "end_date=\"cast('2021-01-01' as date)\""),
]  # fmt: skip


def archive(git_dir: Path, commit: str, prefix: str, into: Path) -> None:
    """The files of `prefix` at `commit`, written under `into` (prefix stripped)."""
    data = subprocess.run(["git", "--git-dir", str(git_dir), "archive", commit, *([prefix] if prefix else [])],
                          check=True, capture_output=True).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            name = member.name.removeprefix(prefix).lstrip("/")
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]


def grow_sushi(seeds: Path, rng: np.random.Generator, days: int = 42) -> None:
    """Orders, order items and item prices for `days` days: the upstream week first, then days drawn from it (orders
    per day, customers 0-99 with the ten regulars 0-9 ordering daily, 1-5 items an order, the week's prices moved
    by up to 10 %)."""
    orders, items, lines = (pd.read_csv(seeds / f"{n}.csv") for n in ("orders", "items", "order_items"))
    start = pd.Timestamp("2022-01-08")
    for d in range(days - 7):
        ds = (start + pd.Timedelta(days=d)).date().isoformat()
        base = items[items["ds"] == items["ds"].unique()[d % 7]]
        day_items = base.assign(ds=ds, price=(base["price"] * rng.uniform(0.9, 1.1, len(base))).round(2))
        items = pd.concat([items, day_items])
        customers = list(range(10)) + list(rng.integers(10, 100, int(rng.integers(12, 25))))
        for customer in customers:
            oid = int(orders["id"].max()) + 1
            minute = int(rng.integers(0, 600))
            begin = pd.Timestamp(ds) + pd.Timedelta(minutes=minute)
            orders.loc[len(orders)] = [oid, int(customer), int(rng.integers(0, 10)), str(begin),
                                       str(begin + pd.Timedelta(minutes=int(rng.integers(10, 60)))), ds]  # fmt: skip
            for item in rng.choice(day_items["id"].to_numpy(), int(rng.integers(1, 6)), replace=False):
                lines.loc[len(lines)] = [
                    int(lines["id"].max()) + 1,
                    oid,
                    int(item),
                    int(rng.integers(1, 11)),
                    ds,
                ]
    for name, frame in (("orders", orders), ("items", items), ("order_items", lines)):
        frame.to_csv(seeds / f"{name}.csv", index=False)


def grow_mrr(seeds: Path, rng: np.random.Generator, customers: int = 400) -> None:
    """Subscription periods of `customers` customers: the upstream rows first, then customers drawn like them (1-3
    periods each, starting on a month's first day in 2018-2020, 1-12 months long, gaps of 0-3 months, amounts
    of 25-150 moving up or down; every period closed, as the project's mutually_exclusive_ranges test requires)."""
    periods = pd.read_csv(seeds / "subscription_periods.csv")
    next_id, first = int(periods["subscription_id"].max()) + 1, int(periods["customer_id"].max()) + 1
    rows = []
    for customer in range(first, first + customers - periods["customer_id"].nunique()):
        month = pd.Timestamp(2018, 1, 1) + pd.DateOffset(months=int(rng.integers(0, 30)))
        amount = int(rng.choice([25, 50, 75, 100]))
        count = int(rng.integers(1, 4))
        for _k in range(count):
            end = month + pd.DateOffset(months=int(rng.integers(1, 13)))
            rows.append([next_id, customer, month.date().isoformat(), end.date().isoformat(), amount])
            next_id += 1
            month = end + pd.DateOffset(months=int(rng.integers(0, 4)))
            amount = int(max(25, min(150, amount + int(rng.choice([-25, 0, 25, 50])))))
    grown = pd.concat([periods, pd.DataFrame(rows, columns=periods.columns)])
    grown = grown[pd.to_datetime(grown["start_date"]) < pd.Timestamp(2021, 1, 1)]
    grown.to_csv(seeds / "subscription_periods.csv", index=False)


def golden(project: Path, targets: tuple[str, ...], out: Path) -> None:
    """Run the project with real dbt (seed, run) into a DuckDB file and write each target's rows as CSV."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "p"
        shutil.copytree(project, work)
        name = (work / "dbt_project.yml").read_text().split("profile:")[1].split("\n")[0].strip().strip("'\"")
        (work / "profiles.yml").write_text(
            f"{name}:\n  target: golden\n  outputs:\n    golden:\n      type: duckdb\n      path: golden.duckdb\n"
            "      schema: main\n      threads: 1\n"
        )
        dbt = Path(sys.executable).parent / "dbt"
        for command in ("seed", "run"):
            done = subprocess.run(
                [str(dbt), command, "--profiles-dir", "."], cwd=work, capture_output=True, text=True
            )
            if done.returncode:
                raise SystemExit(f"dbt {command} failed in {project}:\n{done.stdout[-3000:]}")
        out.mkdir(parents=True, exist_ok=True)
        with duckdb.connect(str(work / "golden.duckdb"), read_only=True) as con:
            for target in targets:
                schema = con.execute(
                    "SELECT table_schema FROM information_schema.tables WHERE table_name = ?", [target]
                ).fetchone()[0]
                frame = con.execute(f'SELECT * FROM "{schema}"."{target}"').df()
                frame.sort_values(list(frame.columns)).to_csv(out / f"{target}.csv", index=False)


def replace_all(root: Path, changes: list[tuple[str, str, str]]) -> None:
    for path, old, new in changes:
        text = (root / path).read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{path}: expected {old!r} once, found it {text.count(old)} times")
        (root / path).write_text(text.replace(old, new))


def build(name: str, source: Path, targets: tuple[str, ...], pack: Path) -> None:
    """solution/, golden/, upstream/ (with the defects), then the task through `coco-sql init dbt`."""
    for folder in ("upstream", "solution", "golden", "data", "expected"):
        shutil.rmtree(pack / folder, ignore_errors=True)
    shutil.copytree(source, pack / "upstream")
    golden(pack / "upstream", targets, pack / "golden")
    (pack / "solution").mkdir()
    for part in ("dbt_project.yml", "models", "macros"):
        src = pack / "upstream" / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, pack / "solution" / part)
    replace_all(pack / "upstream", DEFECTS[name])
    from coco_sql.cli import run

    chosen = [a for t in targets for a in ("--target", t)]
    code = run(["init", "dbt", str(pack / "upstream"), "--expected", str(pack / "golden"), "--out", str(pack),
                "--force", "--no-score", "--name", name, *chosen])  # fmt: skip
    if code:
        raise SystemExit(f"coco-sql init dbt failed for {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sqlmesh", type=Path, required=True)
    parser.add_argument("--mrr", type=Path, required=True)
    parser.add_argument("--utils", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=REPO / "tasks")
    parser.add_argument("--only", choices=("sushi_dbt", "mrr_playbook"), help="build one pack")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sushi = Path(tmp) / "sushi"
        archive(args.sqlmesh, *SQLMESH, sushi)
        for extra in ("config.py", "__init__.py", ".gitignore"):  # sqlmesh's own files, not the dbt project's
            (sushi / extra).unlink(missing_ok=True)
        grow_sushi(sushi / "seeds", np.random.default_rng(39))
        if args.only in (None, "sushi_dbt"):
            build("sushi_dbt", sushi, SUSHI_TARGETS, args.out / "sushi_dbt")
        mrr = Path(tmp) / "mrr"
        archive(args.mrr, *MRR, mrr)
        (mrr / "seeds").mkdir()
        shutil.move(mrr / "data" / "subscription_periods.csv", mrr / "seeds" / "subscription_periods.csv")
        for extra in ("docs", "data", "Makefile", ".gitignore"):
            target = mrr / extra
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        replace_all(mrr, MRR_PORT)
        (mrr / "profiles.yml").write_text(
            "playbook:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: acme.duckdb\n"
            "      threads: 1\n"
        )
        archive(args.utils, UTILS[0], "", Path(tmp) / "utils")
        utils = mrr / "dbt_packages" / "dbt_utils"
        utils.mkdir(parents=True)
        for part in ("dbt_project.yml", "LICENSE", "macros"):
            src = Path(tmp) / "utils" / part
            (shutil.copytree if src.is_dir() else shutil.copy)(src, utils / part)
        grow_mrr(mrr / "seeds", np.random.default_rng(39))
        if args.only in (None, "mrr_playbook"):
            build("mrr_playbook", mrr, MRR_TARGETS, args.out / "mrr_playbook")


if __name__ == "__main__":
    main()
