"""Build the dbt pack made from a real public dbt project (issue 39): tasks/sushi_dbt.

The pack folder holds:

- upstream/  the project as a user has it: the upstream files, its seeds grown by a seeded generator that follows
             the upstream seeds (`grow_sushi`), and the planted defects of `DEFECTS` (README.md lists them);
- solution/  the upstream models and macros as they were (no defects), for the tests;
- golden/    one CSV per scored model: the solution's rows, built by real dbt (``dbt seed`` + ``dbt run`` with
             dbt-duckdb) over upstream/seeds;
- task.toml, data/, expected/: written by ``coco-sql init dbt upstream --expected golden --out PACK`` (the same
             command a user runs; tests/test_dbt_packs.py runs it again and compares).

The upstream files come from the package index, never from a repository snapshot: the source distribution of
SQLMesh 0.109.2 (`SQLMESH_SDIST`; its `examples/sushi_dbt`, Apache-2.0), downloaded with

    pip download --no-deps --no-binary :all: sqlmesh==0.109.2 -d DIR

Usage: python scripts/make_dbt_packs.py --sqlmesh-sdist DIR/sqlmesh-0.109.2.tar.gz (its sha256 is checked).
Needs dbt-core and dbt-duckdb (the `dbt` extra). Re-running reproduces the committed files.
"""

from __future__ import annotations

import argparse
import hashlib
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
# (archive name, its sha256, the project's folder inside it, the license file inside it)
SQLMESH_SDIST = (
    "sqlmesh-0.109.2.tar.gz",
    "0651cdbdb15900345e7827dc39ce3e7f647d0b860160c23df8d92ae728317837",
    "sqlmesh-0.109.2/examples/sushi_dbt/",
    "sqlmesh-0.109.2/LICENSE",
)

SUSHI_TARGETS = ("customer_revenue_by_day", "waiter_revenue_by_day", "waiter_as_customer_by_day", "customers",
                 "top_waiters")  # fmt: skip

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
}


def unpack(sdist: Path, into: Path) -> bytes:
    """The sushi_dbt folder of the SQLMesh source distribution, written under `into`; returns its LICENSE."""
    name, sha256, prefix, license_path = SQLMESH_SDIST
    data = sdist.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SystemExit(f"{sdist}: not {name} as SOURCE.md records it (sha256 differs)")
    with tarfile.open(sdist) as tar:
        license_text = tar.extractfile(license_path).read()  # type: ignore[union-attr]
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            target = into / member.name.removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    return license_text


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
    parser.add_argument("--sqlmesh-sdist", type=Path, required=True, help=f"the path of {SQLMESH_SDIST[0]}")
    parser.add_argument("--out", type=Path, default=REPO / "tasks")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sushi = Path(tmp) / "sushi"
        license_text = unpack(args.sqlmesh_sdist, sushi)
        for extra in ("config.py", "__init__.py", ".gitignore"):  # sqlmesh's own files, not the dbt project's
            (sushi / extra).unlink(missing_ok=True)
        grow_sushi(sushi / "seeds", np.random.default_rng(39))
        build("sushi_dbt", sushi, SUSHI_TARGETS, args.out / "sushi_dbt")
        (args.out / "sushi_dbt" / "LICENSE").write_bytes(license_text)


if __name__ == "__main__":
    main()
