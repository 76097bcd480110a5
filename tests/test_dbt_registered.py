"""`CALL coco_task(name, NULL, {'kind': 'dbt', ...})`: a dbt task over tables made with plain SQL (issue 29), on a
real DuckDB store through the SQL procedures:

- the task is registered from its tables (two sources, an expected table), stored as rows, and read back as the
  same task (fingerprint, splits, expected rows, data tests) every time;
- each bad input is one line and writes nothing: an expected table without its key, a source that writes or
  reads a file or is not named 'source.table', a seed whose model refs a missing model, reads a file or does not
  compile, YAML that does not parse, bad options;
- `coco_help('coco_task dbt')` and the docs' options page print the dbt kind's `task_options` (`languages/dbt/options.py`).

`coco_evolve` and `coco_resume` on such a task, on DuckDB with dbt and in stored procedures: tests/test_dbt_warehouse.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dbt_cases import SHOP_OPTIONS, SHOP_SEED, SHOP_SETUP

import coco_sql
from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.languages.dbt.options import TASK_OPTIONS as DBT_TASK_OPTIONS
from coco_sql.languages.dbt.registered import key_text
from coco_sql.languages.dbt.task import row_json

OPTIONS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "options.md"


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = coco_sql.connect(":memory:")
    con.execute(SHOP_SETUP)
    return con


def register(con: duckdb.DuckDBPyConnection, options: Any, name: str = "shop", source: Any = None) -> list:
    return con.execute("CALL coco_task(?, ?, ?::JSON)", [name, source, json.dumps(options)]).fetchall()


def test_a_dbt_task_is_registered_from_plain_sql_tables_and_reads_back_the_same(con) -> None:
    assert register(con, SHOP_OPTIONS) == [
        ("shop", 44, 25, 17, 13)
    ]  # 40 customers, 4 data tests (+1 extra-rows instance a split)
    assert con.execute("SELECT name, n_rows FROM tasks").fetchall() == [("shop", 200)]  # 40 + 120 + 40 rows
    store = DuckDBStore.over(con)
    first, second = api._task("shop", store), api._task("shop", store)
    assert first.language == "dbt" and first.fingerprint() == second.fingerprint()
    assert all(first.split(s).expected == second.split(s).expected for s in ("train", "val", "test"))
    tests = {"test:unique:customer_totals.customer_id", "test:not_null:customer_totals.customer_id",
             "test:accepted_values:stg_orders.status", "test:relationships:stg_orders.customer_id"}  # fmt: skip
    assert set(first.kind_data.tests) == tests
    expected = con.execute("SELECT * FROM expected_totals").df()
    train = first.split("train").expected
    for record in expected.to_dict(orient="records"):
        instance = f"customer_totals:{key_text(record['customer_id'])}"
        if instance in train:
            assert train[instance] == row_json(
                record, ("customer_id", "name", "n_orders", "total")
            )  # the key counts
    # each split's sources hold its own customers and their orders only
    sources = first.kind_data.sources
    ids = {s: set(sources[s]["shop.customers"]["id"]) for s in ("train", "val", "test")}
    assert not (ids["train"] & ids["val"]) and sum(len(v) for v in ids.values()) == 40
    assert set(sources["train"]["shop.orders"]["customer_id"]) <= ids["train"]
    assert str(sources["train"]["shop.orders"]["order_date"].dtype).startswith("datetime64")  # DATE, typed


def _options(**changes: Any) -> dict[str, Any]:
    return {**SHOP_OPTIONS, **changes}


def _target(**changes: Any) -> dict[str, Any]:
    return {"customer_totals": {**SHOP_OPTIONS["targets"]["customer_totals"], **changes}}


def _seed(old: str, new: str) -> str:
    assert old in SHOP_SEED
    return SHOP_SEED.replace(old, new)


BAD = {
    "expected table without its key": (
        _options(targets=_target(expected="SELECT name, total FROM expected_totals")),
        "option 'targets.customer_totals.expected': SELECT name, total FROM expected_totals has no column "
        "'customer_id' (columns: name, total)",
    ),
    "key not unique": (
        _options(
            targets={
                "customer_totals": {
                    "key": "name",
                    "expected": "SELECT name, 1 AS n FROM customers "
                    "UNION ALL SELECT 'x', 2 UNION ALL "
                    "SELECT 'x', 3",
                }
            }
        ),
        "option 'targets.customer_totals.key': SELECT name, 1 AS n FROM customers UNION ALL SELECT 'x', ...: key "
        "'name' must be unique and never empty",
    ),
    "a source that writes": (
        _options(
            sources={**SHOP_OPTIONS["sources"], "shop.orders": "SELECT * FROM orders; DROP TABLE customers"}
        ),
        "option 'sources.shop.orders': the source 'SELECT * FROM orders; DROP TABLE customers' holds 2 statements",
    ),
    "a source that reads a file": (
        _options(sources={**SHOP_OPTIONS["sources"], "shop.orders": "SELECT * FROM read_csv('/etc/passwd')"}),
        "option 'sources.shop.orders': the source \"SELECT * FROM read_csv('/etc/passwd')\" must only read tables",
    ),
    "a source not named source.table": (
        _options(sources={"customers": "customers", "shop.orders": "orders"}),
        "option 'sources.customers': must be 'source.table' (got 'customers')",
    ),
    "an entity that is no source column": (
        _options(entity="shop.customers.nope"),
        "option 'entity': 'shop.customers.nope' is not a column",
    ),
    "a model that refs a missing model": (
        _options(seed_program=_seed("ref('stg_orders')", "ref('stg_order')")),
        "option 'seed_program' is rejected: models/customer_totals.sql: ref('stg_order') names no model of the "
        "project (models: customer_totals, stg_orders)",
    ),
    "a model that reads a file": (
        _options(seed_program=_seed("from {{ source('shop', 'orders') }}", "from read_csv('/etc/passwd')")),
        "option 'seed_program' is rejected: models/staging/stg_orders.sql:",
    ),
    "a model that writes a file": (
        _options(
            seed_program=_seed(
                "select id as order_id, customer_id, amount_cents as amount, status\nfrom {{ source('shop', 'orders') }}"
                "\nwhere status <> 'returned'",
                "copy (select 1 as order_id) to '/tmp/coco-x.csv'",
            )
        ),
        "option 'seed_program' is rejected: models/staging/stg_orders.sql:",
    ),
    "a model that does not compile": (
        _options(seed_program=_seed("{{ ref('stg_orders') }}", "{{ ref('stg_orders') }")),
        "option 'seed_program' is rejected: models/customer_totals.sql line 3: Jinja syntax error",
    ),
    "YAML that does not parse": (
        _options(seed_program=_seed("      - name: orders\n", "      - name: orders\n     bad: [\n")),
        "option 'seed_program': models/sources.yml line 7: YAML does not parse",
    ),
    "an unknown option": (_options(label="x"), "unknown option 'label'"),
    "a kind that is not one": (
        _options(kind="python"),
        "coco_task does not register python tasks (kinds: sql, dbt)",
    ),
    "a missing option": (
        {k: v for k, v in SHOP_OPTIONS.items() if k != "entity"},
        "option 'entity' is required",
    ),
    "a tolerance that is no number": (
        _options(targets=_target(tolerance={"total": "small"})),
        "option 'targets.customer_totals.tolerance.total'",
    ),
}


@pytest.mark.parametrize("case", BAD, ids=BAD)
def test_bad_input_is_one_line_and_writes_nothing(con, case: str) -> None:
    options, message = BAD[case]
    with pytest.raises(duckdb.Error) as raised:
        register(con, options)
    text = str(raised.value)
    assert "\n" not in text.strip() and "task 'shop': " in text, text
    assert message in text, text
    assert con.execute("SELECT count(*) FROM tasks").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM task_rows").fetchone() == (0,)


def test_a_source_argument_is_refused_and_an_option_error_creates_no_database(con, tmp_path: Path) -> None:
    with pytest.raises(duckdb.Error, match="pass NULL as coco_task's source"):
        register(con, SHOP_OPTIONS, source="orders")
    db = tmp_path / "new.duckdb"
    with pytest.raises(coco_sql.errors.TaskError, match=re.escape("option 'entity' is required")):
        api.register_task("shop", None, {k: v for k, v in SHOP_OPTIONS.items() if k != "entity"}, db=db)
    with pytest.raises(coco_sql.errors.StoreError, match="holds 2 statements"):
        api.register_task("shop", None, _options(sources={"shop.a": "SELECT 1; SELECT 2"}), db=db)
    assert not db.exists()


def test_the_dbt_options_are_printed_by_coco_help_and_the_docs(con) -> None:
    rows = con.execute("FROM coco_help('coco_task dbt')").df().to_dict(orient="records")
    assert rows == DBT_TASK_OPTIONS.rows()
    text = OPTIONS_PAGE.read_text()
    section = text[text.index("## coco_task dbt") :]
    table = section[section.index("| option | type | range | default | example | doc |") :].split("\n\n")[0]
    cells = [
        [c.strip().strip("`").replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in table.splitlines()[2:]
    ]
    assert cells == [[r[k] for k in ("name", "type", "range", "default", "example", "doc")] for r in rows]


def test_a_dbt_task_is_registered_from_a_project_folder_as_it_stands(con, tmp_path: Path) -> None:
    """Issue 39: option 'project' reads a folder (no '-- file:' pasting); dbt's own .user.yml is not refused,
    in the folder nor in a pasted text."""
    from coco_sql.languages.dbt.project import DbtProject

    folder = tmp_path / "shop"
    DbtProject.from_text(SHOP_SEED).write(folder)
    (folder / ".user.yml").write_text("id: 5d9f1b2c\n")
    (folder / "profiles.yml").write_text("shop:\n  target: dev\n")
    options = {k: v for k, v in SHOP_OPTIONS.items() if k != "seed_program"} | {"project": str(folder)}
    assert register(con, options, name="shop_folder") == [("shop_folder", 44, 25, 17, 13)]
    pasted = SHOP_SEED + "-- file: .user.yml\nid: 5d9f1b2c\n"
    assert register(con, SHOP_OPTIONS | {"seed_program": pasted}, name="shop_pasted")[0][1] == 44
    with pytest.raises(duckdb.Error, match="option 'project'") as raised:
        register(con, options | {"project": str(tmp_path / "nowhere")}, name="shop_missing")
    assert "\n" not in str(raised.value).strip()
