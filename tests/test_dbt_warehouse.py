"""dbt projects on a warehouse that runs candidates itself (`languages.dbt.warehouse`), in Snowpark's local testing
mode: each model compiled by our renderer and run as a warehouse query, no dbt process, scored as dbt's rows are.

- compilation: placeholders become the staged tables under dbt's relation names, quoted plain names unquoted;
- the warehouse path alone, on a task registered from plain SQL tables: the repaired project scores 1, a test
  fails, warns or errs as dbt's would, a failing model fails its run in one line, an AI model's calls are billed
  by its own query, every table it made is dropped;
- (slow, real dbt) the dbt sandbox and the warehouse give the same outputs on the same projects;
- (slow, real dbt) `CALL coco_task` + `coco_evolve` + `coco_resume` in stored procedures under the strict emulation
  of Snowflake's limits (no process, socket, write outside /tmp or other thread: `snowpark_helpers`): nothing is
  refused, and the programs, evaluations and champion equal those of the same calls on DuckDB.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
from dbt_cases import SHOP_FIXED, SHOP_OPTIONS, SHOP_SEED, SHOP_SETUP, TEXTS, shop_frames
from snowflake.snowpark import Session
from snowpark_helpers import plain, strict_session

import coco_sql
from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.engines.snowflake.candidates import WarehouseCandidates
from coco_sql.engines.snowflake.store import SnowparkStore
from coco_sql.errors import EvaluationError
from coco_sql.languages.base import RunResult
from coco_sql.languages.dbt.compiled import Relation, model_query
from coco_sql.languages.dbt.validate import validate_project
from coco_sql.languages.dbt.warehouse import DbtWarehouseLanguage


class Watched:
    """The real engine, with the tables it makes and drops noted (to check that an evaluation leaves none)."""

    def __init__(self, engine: WarehouseCandidates) -> None:
        self.engine, self.made, self.dropped = engine, [], []
        self.dialect = engine.dialect

    def stage_rows(self, split: str, rows: pd.DataFrame) -> str:
        self.made.append(self.engine.stage_rows(split, rows))
        return self.made[-1]

    def create_table(self, sql: str, deadline_s: float) -> str:
        self.made.append(self.engine.create_table(sql, deadline_s))
        return self.made[-1]

    def drop_staged(self, name: str) -> None:
        self.dropped.append(name)
        self.engine.drop_staged(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def registered(setup: str, options: dict[str, Any], name: str = "shop") -> Any:
    """The task `coco_task` registers over the tables `setup` makes (a DuckDB store in memory)."""
    con = coco_sql.connect(":memory:")
    con.execute(setup)
    con.execute("CALL coco_task(?, NULL, ?::JSON)", [name, json.dumps(options)]).fetchall()
    return api._task(name, DuckDBStore.over(con))


@pytest.fixture(scope="module")
def shop() -> Any:
    return registered(SHOP_SETUP, SHOP_OPTIONS)


@pytest.fixture
def session() -> Iterator[Session]:
    session = Session.builder.config("local_testing", True).create()
    yield session
    session.close()


def outcome(language: Any, task: Any, code: str, split: str = "train") -> RunResult:
    runner = language.runner(task.split(split), None)
    try:
        return runner.run(language.validate(code), 60.0)
    finally:
        runner.close()


def scores(task: Any, split: str, result: RunResult) -> dict[str, float]:
    expected = task.split(split).expected
    got = dict(result.outputs)
    ids = sorted(expected)
    return dict(
        zip(ids, task.scorer.score([got.get(i) for i in ids], [expected[i] for i in ids]), strict=True)
    )


def test_a_model_compiles_to_a_query_over_the_staged_tables_under_dbts_relation_names(shop) -> None:
    code = SHOP_SEED.replace("select c.id as customer_id", 'select "c"."id" as customer_id')
    project = validate_project(code, shop.kind_data.spec)
    staged = {("shop", "customers"): "COCO_INPUT_C", ("shop", "orders"): "COCO_INPUT_O"}
    stg = model_query(project.models["stg_orders"], {}, staged, "snowflake", "snowflake")
    assert stg == (
        "SELECT id AS order_id, customer_id, amount_cents AS amount, status FROM COCO_INPUT_O AS orders "
        "WHERE status <> 'returned'"
    )
    billed = {"stg_orders": Relation("COCO_MODEL_S", ("order_id", "customer_id", "amount", "status"))}
    mart = model_query(project.models["customer_totals"], billed, staged, "snowflake", "snowflake")
    assert mart.startswith("SELECT c.id AS customer_id, c.name, COUNT(o.order_id) AS n_orders")
    assert (
        "FROM COCO_INPUT_C AS c JOIN (SELECT order_id, customer_id, amount, status FROM COCO_MODEL_S) AS o"
        in mart
    )


def test_the_warehouse_scores_a_project_and_its_data_tests_and_drops_what_it_made(shop, session) -> None:
    engine = Watched(WarehouseCandidates(session))
    language = DbtWarehouseLanguage(shop, engine)  # type: ignore[arg-type]
    fixed = outcome(language, shop, SHOP_FIXED)
    assert set(scores(shop, "train", fixed).values()) == {1.0} and len(fixed.outputs) == 25  # + extra rows: 0
    seed = scores(shop, "train", outcome(language, shop, SHOP_SEED))
    assert sum(v for i, v in seed.items() if i.startswith("test:")) == 4  # the 4 data tests pass
    rows = [v for i, v in seed.items() if i.startswith("customer_totals:")]
    assert rows and max(rows) < 1.0  # every row is in cents or lost by the inner join
    unfiltered = outcome(language, shop, SHOP_FIXED.replace("where status <> 'returned'", ""))
    statuses = {i: json.loads(o) for i, o in unfiltered.outputs if i.startswith("test:")}
    assert statuses == {"test:accepted_values:stg_orders.status": "fail",
                        "test:relationships:stg_orders.customer_id": "pass",
                        "test:unique:customer_totals.customer_id": "pass",
                        "test:not_null:customer_totals.customer_id": "pass"}  # fmt: skip
    warned = SHOP_FIXED.replace("where status <> 'returned'", "").replace(
        "values: ['shipped']", "values: ['shipped']\n              config:\n                severity: warn"
    )
    assert dict(outcome(language, shop, warned).outputs)["test:accepted_values:stg_orders.status"] == '"warn"'
    per_order = SHOP_FIXED.replace("group by c.id, c.name", "group by c.id, c.name, o.order_id")
    assert (
        dict(outcome(language, shop, per_order).outputs)["test:unique:customer_totals.customer_id"]
        == '"fail"'
    )
    with pytest.raises(
        EvaluationError, match="no target produced rows; customer_totals: skipped: an upstream "
    ):
        outcome(
            language, shop, SHOP_FIXED.replace("status\nfrom", "status, cast(status as integer) as bad\nfrom")
        )
    language.close()
    assert engine.made and sorted(engine.made) == sorted(engine.dropped)


TOPIC_SETUP = (
    "CREATE TABLE texts AS SELECT * FROM texts_frame; CREATE TABLE topics AS SELECT * FROM topics_frame;"
)
TOPIC_SEED = """-- file: dbt_project.yml
name: topics
config-version: 2
-- file: models/sources.yml
version: 2
sources:
  - name: shop
    tables:
      - name: texts
-- file: models/topics.sql
select id, AI_CLASSIFY(text, ['sport', 'cooking']):labels[0]::string as label
from {{ source('shop', 'texts') }}
"""
TOPIC_OPTIONS = {
    "kind": "dbt", "sources": {"shop.texts": "texts"}, "entity": "shop.texts.id", "seed_program": TOPIC_SEED,
    "targets": {"topics": {"expected": "topics", "key": "id"}}, "allowed_functions": ["AI_CLASSIFY"],
    "train_fraction": 0.5, "test_fraction": 0.25,
}  # fmt: skip


def topic_task() -> Any:
    con = coco_sql.connect(":memory:")
    con.register("texts_frame", TEXTS)
    con.register("topics_frame", pd.DataFrame({"id": list("abcd"), "label": ["sport", "cooking"] * 2}))
    con.execute(TOPIC_SETUP)
    con.execute("CALL coco_task('topics', NULL, ?::JSON)", [json.dumps(TOPIC_OPTIONS)]).fetchall()
    return api._task("topics", DuckDBStore.over(con))


def test_a_models_ai_calls_are_the_warehouses_and_billed_by_its_own_query(session) -> None:
    task = topic_task()
    result = outcome(DbtWarehouseLanguage(task, WarehouseCandidates(session)), task, TOPIC_SEED)
    assert set(scores(task, "train", result).values()) == {1.0}  # the stand-in's AI_CLASSIFY, right on both
    assert result.usage is not None
    (call,) = result.usage.provider_calls
    assert (call.function, call.provider, call.items) == ("AI_CLASSIFY", "warehouse", 2)  # one per row
    assert call.input_tokens > 0 and call.output_tokens > 0


# -- against real dbt ------------------------------------------------------------------------------------------------
PROJECTS = {
    "seed": SHOP_SEED,
    "repaired": SHOP_FIXED,
    "a failing data test": SHOP_FIXED.replace("where status <> 'returned'", ""),
    "a test that warns": SHOP_FIXED.replace("where status <> 'returned'", "").replace(
        "values: ['shipped']", "values: ['shipped']\n              config:\n                severity: warn"
    ),
    "duplicate keys": SHOP_FIXED.replace("group by c.id, c.name", "group by c.id, c.name, o.order_id"),
    "a view and a missing test": SHOP_FIXED.replace("+materialized: table", "+materialized: view").replace(
        "        data_tests: [unique, not_null]\n", ""
    ),
    "a failing model": SHOP_FIXED.replace("status\nfrom", "status, cast(status as integer) as bad\nfrom"),
}


def same(warehouse: RunResult | str, local: RunResult | str) -> bool:
    """The same outputs (numbers to 12 digits: a sum's order differs between a view and a table) and failures."""
    if isinstance(warehouse, str) or isinstance(local, str):
        return isinstance(warehouse, str) and isinstance(local, str)
    mine, theirs = dict(warehouse.outputs), dict(local.outputs)
    return (
        mine.keys() == theirs.keys()
        and sorted(warehouse.errors) == sorted(local.errors)
        and all(_close(json.loads(str(mine[i])), json.loads(str(theirs[i]))) for i in mine)
    )


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-12 * max(1.0, abs(b))
    return bool(a == b)


def attempt(runner: Any, language: Any, code: str) -> RunResult | str:
    try:
        return runner.run(language.validate(code), 120.0)  # type: ignore[no-any-return]
    except EvaluationError as error:
        return f"EvaluationError: {error}"


@pytest.mark.slow
def test_dbt_and_the_warehouse_give_the_same_outputs_on_the_same_projects(shop, session) -> None:
    """Real dbt in its sandbox, one warm worker per task (~1-2 min in all on a loaded 2-core machine)."""
    pytest.importorskip("dbt.adapters.duckdb", reason="dbt is not installed: pip install 'coco-sql[dbt]'")
    from coco_sql.languages.dbt.language import DbtLanguage
    from coco_sql.llm.runtime import AiRuntime
    from coco_sql.plugin_loader import local_functions

    warehouse = DbtWarehouseLanguage(shop, WarehouseCandidates(session))
    local = DbtLanguage(shop)
    runners = (warehouse.runner(shop.split("train"), None), local.runner(shop.split("train"), None))
    try:
        for name, code in PROJECTS.items():
            found = [
                attempt(runner, language, code)
                for runner, language in zip(runners, (warehouse, local), strict=True)
            ]
            assert same(*found), (name, found)
            if not isinstance(found[0], str):
                assert scores(shop, "train", found[0]) == scores(shop, "train", found[1]), name  # type: ignore[arg-type]
        assert isinstance(found[0], str) and "customer_totals: skipped: an upstream model failed" in found[0]
    finally:
        for runner in runners:
            runner.close()
    task = topic_task()
    on_warehouse = outcome(DbtWarehouseLanguage(task, WarehouseCandidates(session)), task, TOPIC_SEED)
    language = DbtLanguage(task)
    try:
        runner = language.runner(task.split("train"), local_functions(AiRuntime()))
        assert same(on_warehouse, attempt(runner, language, TOPIC_SEED))
    finally:
        language.close()


@pytest.mark.slow
def test_dbt_and_the_warehouse_give_the_same_outputs_on_jaffle_shop(session) -> None:
    """A pack in DuckDB's dialect with dates, CTEs, CASE and 20 data tests: the seed and dbt Labs' reference
    solution score the same on both paths (row mean 0.620 and 1.000 on the train split; 0.034 before per-column scores)."""
    pytest.importorskip("dbt.adapters.duckdb", reason="dbt is not installed: pip install 'coco-sql[dbt]'")
    from coco_sql.languages.dbt.language import DbtLanguage
    from coco_sql.languages.dbt.project import DbtProject
    from coco_sql.tasks import load_task

    pack = load_task("jaffle_shop")
    solution = DbtProject.from_dir(pack.root / "solution").to_text()
    warehouse, local = DbtWarehouseLanguage(pack, WarehouseCandidates(session)), DbtLanguage(pack)
    runners = (warehouse.runner(pack.split("train"), None), local.runner(pack.split("train"), None))
    try:
        for code, score in ((pack.seed_program, 0.645), (solution, 1.0)):
            found = [
                attempt(runner, language, code)
                for runner, language in zip(runners, (warehouse, local), strict=True)
            ]
            assert same(*found)
            mean = sum(scores(pack, "train", found[0]).values()) / len(pack.split("train"))  # type: ignore[arg-type]
            assert mean == pytest.approx(score, abs=0.0005)
    finally:
        for runner in runners:
            runner.close()


COMPARED = {
    "programs": ["program_id", "parent_id", "code", "cell", "approach", "valid", "error"],
    "evaluations": ["program_id", "split", "instance_id", "score", "output"],
}


def _rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(plain(v) for v in row) for row in frame[columns].itertuples(index=False, name=None))


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two whole runs; the one with dbt took 250-390 s at a load average of 10-17
def test_coco_task_and_coco_evolve_in_a_stored_procedure_equal_the_run_on_duckdb(tmp_path: Path) -> None:
    """The same calls from SQL on DuckDB (dbt in its sandbox) and as stored procedures in local testing, under
    Snowflake's limits: the warehouse path starts no process. Each resume reads the task back from its rows (on
    DuckDB in a new connection, after the source table is gone)."""
    pytest.importorskip("dbt.adapters.duckdb", reason="dbt is not installed: pip install 'coco-sql[dbt]'")
    db = tmp_path / "local.duckdb"
    con = coco_sql.connect(db)
    con.execute(SHOP_SETUP)
    con.execute("CALL coco_task('shop', NULL, ?::JSON)", [json.dumps(SHOP_OPTIONS)]).fetchall()
    clock = time.perf_counter()
    con.execute("FROM coco_evolve('shop', 1, {'seed': 1})").fetchall()
    con.execute("DROP TABLE orders")  # the run reads the rows registered, not the table
    con.close()
    con = coco_sql.connect(db)
    local = con.execute("FROM coco_resume(1, 2)").df().iloc[0]
    local_s = time.perf_counter() - clock
    champion = con.execute("SELECT code FROM programs WHERE program_id = ?", [local.champion_id]).fetchone()
    con.close()
    flat = " ".join(champion[0].lower().split())
    # the two planted defects, repaired: the unit where the amount is read (the scale repair weighs a model by
    # what reads it downstream, so the staging model wins over the total it feeds), and the join
    assert ("(amount_cents) / 100 as amount" in flat or "/ 100.0 as amount" in flat) and "left join" in flat
    with strict_session(shop_frames()) as (session, limits):
        (row,) = session.call("coco_task", "shop", None, SHOP_OPTIONS).collect()
        assert (row["TASK"], row["ROWS"], row["TRAIN"], row["VAL"], row["TEST"]) == ("shop", 44, 25, 17, 13)
        clock = time.perf_counter()
        session.call("coco_evolve", "shop", 1, {"seed": 1}).collect()
        (remote,) = session.call("coco_resume", 1, 2).collect()
        remote_s = time.perf_counter() - clock
        assert limits.calls == 3 and not limits.refused
        store = SnowparkStore(session, read_only=True)
        with DuckDBStore(db, read_only=True) as duck:
            for table, columns in COMPARED.items():
                mine = _rows(store.table_frame(table), columns)
                assert mine == _rows(duck.query(f"SELECT {', '.join(columns)} FROM {table}"), columns), table
    assert remote["ITERATIONS"] == local.iterations == 2 and remote["CHAMPION_ID"] == local.champion_id
    assert remote["CHAMPION_VAL_SCORE"] == local.champion_val_score == 1.0
    assert remote["CHAMPION_TEST_SCORE"] == local.champion_test_score == 1.0
    assert remote["SEED_VAL_SCORE"] == local.seed_val_score < 0.7  # 0.600: per-column credit (issue 39)
    print(
        f"\nshop, 2 iterations: DuckDB + dbt sandbox {local_s:.1f} s, procedure + warehouse {remote_s:.1f} s"
    )
