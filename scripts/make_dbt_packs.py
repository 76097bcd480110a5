"""Build the dbt packs made from real public dbt projects (issue 39): tasks/sushi_dbt and tasks/airbnb_dbt.

Each pack folder holds:

- upstream/  the project as a user has it: the upstream files, its data (sushi: the seeds grown by a seeded
             generator that follows the upstream seeds, `grow_sushi`; airbnb: the DuckDB file its profile names,
             `airbnb_data`), and the planted defects of `DEFECTS` (the pack's README.md lists them);
- solution/  the upstream models and macros as they were (no defects), for the tests;
- golden/    one CSV per scored model: the solution's rows, built by real dbt (``dbt seed`` + ``dbt run`` with
             dbt-duckdb) over upstream/'s data;
- task.toml, data/, expected/: written by ``coco-sql init dbt upstream --expected golden --out PACK`` (the same
             command a user runs; tests/test_dbt_packs.py runs it again and compares).

The upstream files come from the package index, never from a repository snapshot (SOURCE.md of each pack):

- sushi_dbt: the source distribution of SQLMesh 0.109.2 (`SQLMESH_SDIST`; its `examples/sushi_dbt`, Apache-2.0);
- airbnb_dbt: the source distribution of ade-bench 1.0.0rc1 (`ADE_SDIST`; dbt Labs' analytics benchmark, its
  `shared/projects/dbt/airbnb` and the rows of `tasks/airbnb003/seeds`, `tasks/airbnb001/seeds`, Apache-2.0);

downloaded with ``pip download --no-deps --no-binary :all: sqlmesh==0.109.2 ade-bench==1.0.0rc1 -d DIR``.

Usage: python scripts/make_dbt_packs.py --sqlmesh-sdist DIR/sqlmesh-0.109.2.tar.gz
       --ade-sdist DIR/ade_bench-1.0.0rc1.tar.gz (either or both; each sha256 is checked).
Needs dbt-core and dbt-duckdb (the `dbt` extra). Re-running reproduces the committed files.
"""

from __future__ import annotations

import argparse
import hashlib
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
# (archive name, its sha256, the project's folder inside it, the license file inside it)
SQLMESH_SDIST = (
    "sqlmesh-0.109.2.tar.gz",
    "0651cdbdb15900345e7827dc39ce3e7f647d0b860160c23df8d92ae728317837",
    "sqlmesh-0.109.2/examples/sushi_dbt/",
    "sqlmesh-0.109.2/LICENSE",
)

# the ade-bench sdist: its airbnb project, the files of real rows it ships for the project's tasks
ADE_SDIST = (
    "ade_bench-1.0.0rc1.tar.gz",
    "c3e3c0df6a0eb8734bab56d11c0bcac780c7965a9ead1cabe91f98bd2bdfecc7",
    "ade_bench-1.0.0rc1/shared/projects/dbt/airbnb/",
    "ade_bench-1.0.0rc1/LICENSE",
)
ADE_ROWS = {
    "hosts": "ade_bench-1.0.0rc1/tasks/airbnb003/seeds/solution__src_hosts.csv",
    "listings": "ade_bench-1.0.0rc1/tasks/airbnb003/seeds/solution__src_listings.csv",
    "daily": "ade_bench-1.0.0rc1/tasks/airbnb001/seeds/solution__daily_agg_reviews.csv",
}
# wow_ and mom_agg_reviews are left out: each row counts the reviews of the 7 (30) days up to its date, which the
# splits over the day cut apart (init cannot see that: it reads no rows of other days through a key)
AIRBNB_TARGETS = ("daily_agg_reviews", "dim_listings_hosts:LISTING_ID", "monthly_agg_reviews")
AIRBNB_ENTITY = (
    "airbnb.reviews.DATE"  # found alone when wow_/mom_ are targets; the listings' id ties with it without
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
    "airbnb_dbt": [
        (
            "models/dim/dim_listings.sql",
            "WHEN MINIMUM_NIGHTS = 0 THEN 1",
            "WHEN MINIMUM_NIGHTS <= 2 THEN 1",
        ),  # a WHEN condition
        (
            "models/dim/dim_listings_hosts.sql",
            "ON listings_cte.HOST_ID = hosts_cte.HOST_ID",
            "ON listings_cte.LISTING_ID = hosts_cte.HOST_ID",
        ),  # a join key
        (
            "models/agg/daily_agg_reviews.sql",
            "REVIEW_DATE::DATE AS REVIEW_DATE",
            "DATE_TRUNC('week', REVIEW_DATE)::DATE AS REVIEW_DATE",
        ),  # a date grain
        (
            "models/agg/daily_agg_reviews.sql",
            "\tREVIEW_SENTIMENT,\n\tDATE_SENTIMENT_ID",
            "\tREVIEW_SENTIMENT,\n\tLISTING_ID,\n\tDATE_SENTIMENT_ID",
        ),  # a GROUP BY column too many
    ],
}


def unpack(sdist: Path, spec: tuple[str, str, str, str], into: Path) -> bytes:
    """The project folder of a source distribution (`spec`: name, sha256, folder, license), written under `into`;
    returns its LICENSE."""
    name, sha256, prefix, license_path = spec
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


def member(sdist: Path, path: str) -> bytes:
    with tarfile.open(sdist) as tar:
        return tar.extractfile(path).read()  # type: ignore[union-attr]


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


# dbt-labs/dbt_utils is not on the package index: the pack's project carries this stand-in in dbt_packages/, the one
# macro the project calls, written for the pack to give dbt_utils 1.x's rows (md5 of the fields cast to text, nulls
# as '_dbt_utils_surrogate_key_null_', joined by '-'; it reproduces the keys of the sdist's expected rows).
DBT_UTILS_STANDIN = {
    "dbt_project.yml": (
        "# A stand-in for dbt-labs/dbt_utils written for this pack (see SOURCE.md): only generate_surrogate_key,\n"
        "# the one macro of dbt_utils the project calls.\n"
        "name: 'dbt_utils'\nconfig-version: 2\nmacro-paths: [\"macros\"]\n"
    ),
    "macros/generate_surrogate_key.sql": """{%- macro generate_surrogate_key(field_list) -%}
    {{ return(adapter.dispatch('generate_surrogate_key', 'dbt_utils')(field_list)) }}
{%- endmacro %}

{%- macro default__generate_surrogate_key(field_list) -%}
{%- set null_text = '' if var('surrogate_key_treat_nulls_as_empty_strings', False) else '_dbt_utils_surrogate_key_null_' -%}
{%- set fields = [] -%}
{%- for field in field_list -%}
    {%- do fields.append("coalesce(cast(" ~ field ~ " as " ~ dbt.type_string() ~ "), '" ~ null_text ~ "')") -%}
    {%- if not loop.last %}{%- do fields.append("'-'") -%}{%- endif -%}
{%- endfor -%}
{{ dbt.hash(dbt.concat(fields)) }}
{%- endmacro %}
""",
}


def airbnb_data(sdist: Path, project: Path, rng: np.random.Generator, listings: int = 1500) -> None:
    """The project's DuckDB file (its profile's `airbnb.duckdb`) with the three raw tables its sources read, from the
    sdist's rows: `listings` of its 17,499 real listings (drawn by `rng`) with their hosts, as they were before its
    staging models renamed their columns; reviews of those listings from 2021-08-01 to 2021-10-22, one for every
    second review its daily counts per sentiment hold (a binomial draw), with a drawn listing, reviewer and text,
    and 3 % of the texts empty (the project's fact table drops those)."""
    hosts, rooms, daily = (
        pd.read_csv(io.BytesIO(member(sdist, ADE_ROWS[k]))) for k in ("hosts", "listings", "daily")
    )
    rooms = rooms.iloc[np.sort(rng.choice(len(rooms), listings, replace=False))]
    hosts = hosts[hosts["HOST_ID"].isin(rooms["HOST_ID"])]
    daily = daily[daily["REVIEW_DATE"] >= "2021-08-01"].sort_values(["REVIEW_DATE", "REVIEW_SENTIMENT"])
    reviews = []
    for day, sentiment, total in daily[["REVIEW_DATE", "REVIEW_SENTIMENT", "REVIEW_TOTALS"]].itertuples(
        index=False
    ):
        for _ in range(int(rng.binomial(int(total), 0.5))):
            text = None if rng.random() < 0.03 else f"{sentiment} stay, review {len(reviews) + 1}"
            reviews.append((int(rng.choice(rooms["LISTING_ID"].to_numpy())), day,
                            f"Guest {int(rng.integers(1, 5000))}", text, sentiment))  # fmt: skip
    raw = {
        "raw_hosts": hosts.rename(columns={"HOST_ID": "ID", "HOST_NAME": "NAME"}),
        "raw_listings": rooms.rename(
            columns={"LISTING_ID": "ID", "LISTING_NAME": "NAME", "PRICE_STR": "PRICE"}
        ),
        "raw_reviews": pd.DataFrame(
            reviews, columns=["LISTING_ID", "DATE", "REVIEWER_NAME", "COMMENTS", "SENTIMENT"]
        ),
    }
    (project / "airbnb.duckdb").unlink(missing_ok=True)
    with duckdb.connect(str(project / "airbnb.duckdb")) as con:
        for table, frame in raw.items():
            stamps = [c for c in ("CREATED_AT", "UPDATED_AT") if c in frame.columns]
            casts = ", ".join([f"CAST({c} AS TIMESTAMP) AS {c}" for c in stamps] + (["CAST(DATE AS DATE) AS DATE"] if table == "raw_reviews" else []))  # fmt: skip
            cols = ", ".join(c for c in frame.columns if c not in stamps and c != "DATE")
            con.register("frame", frame)
            con.execute(
                f"CREATE TABLE main.{table} AS SELECT {cols}{', ' + casts if casts else ''} FROM frame"
            )
            con.unregister("frame")
    for path, text in DBT_UTILS_STANDIN.items():
        (project / "dbt_packages" / "dbt_utils" / path).parent.mkdir(parents=True, exist_ok=True)
        (project / "dbt_packages" / "dbt_utils" / path).write_text(text)


def golden(project: Path, targets: tuple[str, ...], out: Path, path: str = "golden.duckdb") -> None:
    """Run the project with real dbt (seed, run) into a DuckDB file (`path`: the project's own when it holds the
    sources) and write each target's rows as CSV."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "p"
        shutil.copytree(project, work)
        name = (work / "dbt_project.yml").read_text().split("profile:")[1].split("\n")[0].strip().strip("'\"")
        (work / "profiles.yml").write_text(
            f"{name}:\n  target: golden\n  outputs:\n    golden:\n      type: duckdb\n      path: {path}\n"
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
        with duckdb.connect(str(work / path), read_only=True) as con:
            for target in (t.split(":")[0] for t in targets):
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


def build(name: str, source: Path, targets: tuple[str, ...], pack: Path, *init: str,
          path: str = "golden.duckdb") -> None:  # fmt: skip
    """solution/, golden/, upstream/ (with the defects), then the task through `coco-sql init dbt` (`init`: more of
    its options)."""
    for folder in ("upstream", "solution", "golden", "data", "expected"):
        shutil.rmtree(pack / folder, ignore_errors=True)
    shutil.copytree(source, pack / "upstream")
    golden(pack / "upstream", targets, pack / "golden", path)
    (pack / "solution").mkdir()
    for part in ("dbt_project.yml", "models", "macros", "dbt_packages"):
        src = pack / "upstream" / part
        if src.exists():
            (shutil.copytree if src.is_dir() else shutil.copy)(src, pack / "solution" / part)
    replace_all(pack / "upstream", DEFECTS[name])
    from coco_sql.cli import run

    chosen = [a for t in targets for a in ("--target", t)]
    code = run(["init", "dbt", str(pack / "upstream"), "--expected", str(pack / "golden"), "--out", str(pack),
                "--force", "--no-score", "--name", name, *chosen, *init])  # fmt: skip
    if code:
        raise SystemExit(f"coco-sql init dbt failed for {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sqlmesh-sdist", type=Path, help=f"the path of {SQLMESH_SDIST[0]} (builds sushi_dbt)"
    )
    parser.add_argument("--ade-sdist", type=Path, help=f"the path of {ADE_SDIST[0]} (builds airbnb_dbt)")
    parser.add_argument("--out", type=Path, default=REPO / "tasks")
    args = parser.parse_args()
    if not (args.sqlmesh_sdist or args.ade_sdist):
        parser.error("give --sqlmesh-sdist, --ade-sdist or both")
    with tempfile.TemporaryDirectory() as tmp:
        if args.sqlmesh_sdist:
            sushi = Path(tmp) / "sushi"
            license_text = unpack(args.sqlmesh_sdist, SQLMESH_SDIST, sushi)
            for extra in (
                "config.py",
                "__init__.py",
                ".gitignore",
            ):  # sqlmesh's own files, not the dbt project's
                (sushi / extra).unlink(missing_ok=True)
            grow_sushi(sushi / "seeds", np.random.default_rng(39))
            build("sushi_dbt", sushi, SUSHI_TARGETS, args.out / "sushi_dbt")
            (args.out / "sushi_dbt" / "LICENSE").write_bytes(license_text)
        if args.ade_sdist:
            airbnb = Path(tmp) / "airbnb"
            license_text = unpack(args.ade_sdist, ADE_SDIST, airbnb)
            airbnb_data(args.ade_sdist, airbnb, np.random.default_rng(39))
            build("airbnb_dbt", airbnb, AIRBNB_TARGETS, args.out / "airbnb_dbt", "--entity", AIRBNB_ENTITY,
                  path="airbnb.duckdb")  # fmt: skip
            (args.out / "airbnb_dbt" / "LICENSE").write_bytes(license_text)


if __name__ == "__main__":
    main()
