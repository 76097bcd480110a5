"""coco-sql in Snowflake, through Snowpark's local testing mode: the real Snowpark API, no account.

The procedures are the real handlers (`coco_sql.engines.snowflake.procs.handlers`), registered with `session.sproc.register`
by `engines.snowflake.procs.local_deploy` (with the tables, as `coco-sql deploy` creates them on an account) and run with
`session.call`. The store reads with the DataFrame API (filters, joins) and writes an iteration as a staged batch
and one INSERT ALL (`engines.snowflake.batch`). Local testing has no `session.sql`, so the store's raw SQL (its
`SqlExecutor`: the history and report queries, a task's source query and the candidate programs over a split's
staged rows) is `local.LocalSql` there: sqlglot transpiles each Snowflake statement to DuckDB and DuckDB
runs it over copies of the session's tables; its INSERT ALL goes to `local_writes.LocalWrites`. On an
account both are `session.sql`.

The tests check that a run started with `session.call('coco_evolve', ...)` holds, table by table, what the same
run holds in DuckDB.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

snowpark = pytest.importorskip(
    "snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')"
)
from snowflake.snowpark import Session  # noqa: E402
from snowflake.snowpark.mock import ColumnEmulator, ColumnType, patch  # noqa: E402
from snowflake.snowpark.mock._functions import MockedFunctionRegistry  # noqa: E402  (no public unregister)
from snowflake.snowpark.mock.exceptions import SnowparkLocalTestingException  # noqa: E402
from snowflake.snowpark.types import StringType  # noqa: E402
from snowpark_helpers import strict_session  # noqa: E402

import coco_sql  # noqa: E402
from coco_sql import api  # noqa: E402
from coco_sql.engine.champion import champion_of  # noqa: E402
from coco_sql.engines.duckdb.store import DuckDBStore  # noqa: E402
from coco_sql.engines.snowflake.candidates import LocalQueries  # noqa: E402
from coco_sql.engines.snowflake.local import LocalSql  # noqa: E402
from coco_sql.engines.snowflake.procs.mirror import mirror_run  # noqa: E402
from coco_sql.engines.snowflake.store import SnowparkStore, snowpark_schema  # noqa: E402
from coco_sql.errors import StoreError  # noqa: E402
from coco_sql.llm.providers.cortex import COMPLETE_FUNCTION  # noqa: E402
from coco_sql.store.history_sql import QUERIES as HISTORY_QUERIES  # noqa: E402
from coco_sql.store.report_sql import QUERIES as REPORT_QUERIES  # noqa: E402
from coco_sql.store.table_schema import table_columns  # noqa: E402

SIGNALS_SQL = """
SELECT 's' || lpad(i::VARCHAR, 3, '0') AS id, ['red', 'green', 'amber', 'blue'][1 + i % 4] AS color, i % 7 AS speed,
       CASE ['red', 'green', 'amber', 'blue'][1 + i % 4] WHEN 'red' THEN 'stop' WHEN 'green' THEN 'go' ELSE 'wait' END
           AS action
FROM range(80) t(i)
"""
SEED = "SELECT id, CASE WHEN color = 'blue' THEN 'go' ELSE 'wait' END AS action FROM input"
OPTIONS = {"label": "action", "dialect": "duckdb", "seed_program": SEED}


def signals() -> pd.DataFrame:
    return duckdb.sql(SIGNALS_SQL).df()


@pytest.fixture
def session() -> Iterator[Session]:
    """A fresh local-testing session with the user's table `signals` and coco-sql's procedures, run under the
    strict emulation of a stored procedure's limits: no refusal may happen (`snowpark_helpers.strict_session`)."""
    with strict_session({"signals": signals()}) as (session, _):
        yield session


def duckdb_run(tmp_path: Path, budget: int) -> duckdb.DuckDBPyConnection:
    con = coco_sql.connect(tmp_path / "local.duckdb")
    con.execute(f"CREATE TABLE signals AS {SIGNALS_SQL}")
    con.execute("CALL coco_task('signals', 'signals', ?::JSON)", [json.dumps(OPTIONS)]).fetchall()
    con.execute(f"CALL coco_evolve('signals', {budget}, {{'seed': 1}})").fetchall()
    return con


# what must be equal between engines: every column but timestamps and timings
COMPARED = {
    "programs": "program_id, iteration, parent_id, donor_id, code, cell, approach, strategy, valid, error",
    "program_scores": "program_id, split, score, n_rows, n_errors, model_calls",
    "evaluations": "program_id, split, instance_id, score, output, expected, error",
    "archive_entries": "iteration, seq, island, cell, program_id, reason",
    "ledger": "iteration, program_id, strategy, kind, status, parent_score, child_score, score_delta, note",
    "events": "iteration, kind, program_id",
    "runs": "run_id, task, task_fingerprint, seed, budget, status",
    "coco_progress": "run_id, task, phase, iteration, budget, best_val, message",
}


def snowflake_rows(session: Session, table: str) -> list[tuple[Any, ...]]:
    columns = [c.strip() for c in COMPARED[table].split(",")]
    frame = SnowparkStore(session, read_only=True).table_frame(table)
    return sorted(tuple(_plain(v) for v in row) for row in frame[columns].itertuples(index=False, name=None))


def duckdb_rows(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[Any, ...]]:
    return sorted(
        tuple(_plain(v) for v in row)
        for row in con.execute(f"SELECT {COMPARED[table]} FROM {table}").fetchall()
    )


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:  # NaN: pandas' missing number
        return None
    return value


@pytest.mark.slow
def test_a_run_called_in_snowpark_holds_what_the_same_run_holds_in_duckdb(
    session: Session, tmp_path: Path
) -> None:
    (task,) = session.call("coco_task", "signals", "signals", OPTIONS).collect()
    assert (task["TASK"], task["ROWS"], task["TRAIN"], task["VAL"], task["TEST"]) == (
        "signals",
        80,
        40,
        24,
        16,
    )
    (summary,) = session.call("coco_evolve", "signals", 4, {"seed": 1}).collect()
    assert summary["ITERATIONS"] == 4 and summary["CHAMPION_VAL_SCORE"] > summary["SEED_VAL_SCORE"]

    con = duckdb_run(tmp_path, 4)
    (local,) = con.execute("CALL coco_status()").fetchall()
    for table in COMPARED:
        assert snowflake_rows(session, table) == duckdb_rows(con, table), table
    (status,) = session.call("coco_status", None).collect()
    assert tuple(status) == local
    # the read models and the history tools run their SQL through the executor (transpiled there and back)
    store = SnowparkStore(session)
    local_store = DuckDBStore.over(con)
    params = {"run_id": 1, "program_id": summary["CHAMPION_ID"], "n": 5, "k": 5, "split": "val", "iteration": 2,
              "instance_id": "s001", "cell": "0:0", "depth": 3}  # fmt: skip
    for name in HISTORY_QUERIES:
        assert _rounded(store.history(name, params)) == _rounded(local_store.history(name, params)), name
    for name in REPORT_QUERIES:
        assert _rounded(store.report(name, params)) == _rounded(local_store.report(name, params)), name
    (exported,) = session.call("coco_export", 1, "snowflake_view").collect()
    assert (
        exported["CODE"].startswith("CREATE OR REPLACE VIEW coco_signals_champion AS")
        and "FROM signals" in exported["CODE"]
    )
    (scored,) = session.call("coco_eval", "signals", SEED, "test").collect()
    assert scored["SCORE"] == summary["SEED_TEST_SCORE"]
    assert snowflake_rows(session, "coco_progress")[0][2:4] == ("finished", 4)  # another session reads it
    assert summary["WARNINGS"] is None
    con.close()


def test_a_test_table_is_stored_after_the_rows_and_read_back_as_the_test_split(session: Session) -> None:
    held_out = "SELECT 't' || id AS id, color, speed, action FROM signals WHERE speed < 3"
    (task,) = session.call("coco_task", "signals", "signals", {**OPTIONS, "test_source": held_out}).collect()
    assert (task["ROWS"], task["TRAIN"], task["VAL"], task["TEST"]) == (80, 40, 40, 36)
    registered = SnowparkStore(session, read_only=True).registered_task("signals")
    assert registered is not None and len(registered.rows) == 80 and len(registered.test_rows) == 36
    assert set(registered.test_rows["id"]) == {f"ts{i:03d}" for i in range(80) if i % 7 < 3}


def test_coco_help_in_snowflake_prints_the_rows_it_prints_in_duckdb(session: Session, tmp_path: Path) -> None:
    con = coco_sql.connect(tmp_path / "help.duckdb")
    for topic in (None, "coco_task", "coco_evolve", "agent mutator"):
        rows = [tuple(row) for row in session.call("coco_help", topic).collect()]
        assert rows == con.execute("FROM coco_help(?)", [topic]).fetchall(), topic
    with pytest.raises(SnowparkLocalTestingException, match="coco_help has no topic 'nosuch'"):
        session.call("coco_help", "nosuch")
    con.close()


def _rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without timestamps (written at different times) and with floats to 9 places."""

    def cell(value: Any) -> Any:
        if isinstance(value, float):
            return round(value, 9)
        if isinstance(value, str) and value[:1] in "[{":
            try:
                return json.loads(value)  # VARIANT text comes back re-indented
            except ValueError:
                return value
        return value

    return [{k: cell(v) for k, v in row.items() if "created_at" not in k} for row in rows]


def test_the_candidates_and_probes_run_as_warehouse_queries_over_the_staged_split(session: Session) -> None:
    """Every candidate, draft test, probe and screening query is one Snowflake query over a split's staged
    table (the candidate engine's), none runs in the store's executor, and none is a DESCRIBE."""
    seen: list[str] = []
    store_sql: list[str] = []

    class Watched(LocalQueries):
        def __call__(self, sql: str, *, timeout_s: float) -> Any:
            seen.append(sql)
            return super().__call__(sql, timeout_s=timeout_s)

    class WatchedStore(LocalSql):
        def __call__(self, sql: str, *, timeout_s: float | None = None) -> Any:
            store_sql.append(sql)
            return super().__call__(sql, timeout_s=timeout_s)

    store = SnowparkStore(session, sql=WatchedStore(session), queries=Watched(session))
    api.register_task("signals", "signals", OPTIONS, db=store)
    api.evolve("signals", db=store, budget=2, options={"seed": 1})
    assert not [sql for sql in store_sql if "COCO_INPUT_" in sql]
    candidates = [
        sql for sql in seen if sql.startswith("SELECT CAST(id AS VARCHAR) AS id, action AS output FROM (")
    ]
    probes = [sql for sql in seen if sql not in candidates]
    assert candidates and probes, "no candidate or no probe ran in the warehouse"
    # Snowflake SQL over the split's temporary table; the mutator's probes read the training rows only
    assert all("COCO_INPUT_" in sql and "DESCRIBE" not in sql.upper() for sql in seen)
    assert {sql.split("COCO_INPUT_")[1].split("_")[0] for sql in candidates} == {"TRAIN", "VAL", "TEST"}
    assert {part.split("_")[0] for sql in probes for part in sql.split("COCO_INPUT_")[1:]} == {"TRAIN"}
    assert any("__coco_h" in sql.lower() for sql in probes)  # the screening query of many hypotheses


@pytest.mark.slow
def test_resuming_after_an_interrupted_write_equals_an_uninterrupted_run(
    session: Session, tmp_path: Path
) -> None:
    session.call("coco_task", "signals", "signals", OPTIONS)
    session.call("coco_evolve", "signals", 2, {"seed": 1})
    # iteration 3 died half-written: evaluations, a ledger row and a score, but no program row
    store = SnowparkStore(session)
    programs = store.table_frame("programs", run_id=1)
    evaluations = store.table_frame("evaluations", run_id=1, program_id="1-2")
    evaluations["program_id"] = "1-3"
    ledger = store.table_frame("ledger", run_id=1, iteration=2)
    ledger["iteration"] = 3
    scores = store.table_frame("program_scores", run_id=1, program_id="1-2")
    scores["program_id"] = "1-3"
    for table, frame in (("evaluations", evaluations), ("ledger", ledger), ("program_scores", scores)):
        frame.columns = [c.upper() for c in frame.columns]
        _append(session, table, frame)
    assert len(programs) == 3
    (resumed,) = session.call("coco_resume", 1, 4).collect()
    assert resumed["ITERATIONS"] == 4

    con = duckdb_run(tmp_path, 4)
    for table in COMPARED:
        if table != "events":  # the resumed run has a run_resumed event more
            assert snowflake_rows(session, table) == duckdb_rows(con, table), table
    kinds = [row[1] for row in snowflake_rows(session, "events")]
    assert kinds.count("run_resumed") == 1 and kinds.count("run_finished") == 2  # budgets 2 and 4
    con.close()


def _append(session: Session, table: str, frame: pd.DataFrame) -> None:
    columns = table_columns()[table]
    rows = [[json.loads(v) if c.type == "JSON" and isinstance(v, str) else _plain(v) for v, c in zip(row, columns, strict=True)]
            for row in frame[[c.name.upper() for c in columns]].itertuples(index=False, name=None)]  # fmt: skip
    schema = snowpark_schema([(c.name, c.type) for c in columns], columns)
    session.create_dataframe(rows, schema=schema).write.save_as_table(table, mode="append")


@pytest.mark.slow
def test_mirror_pulls_a_run_into_duckdb_where_every_tool_reads_it(session: Session, tmp_path: Path) -> None:
    session.call("coco_task", "signals", "signals", OPTIONS)
    (summary,) = session.call("coco_evolve", "signals", 3, {"seed": 1}).collect()
    target = tmp_path / "mirror.duckdb"
    with DuckDBStore(target) as local:
        steps: list[tuple[str, int, int]] = []
        copied = mirror_run(
            SnowparkStore(session, read_only=True), local, 1, lambda *step: steps.append(step)
        )
    assert copied.rows["programs"] == 4 and copied.rows["task_rows"] == 80
    assert steps[-1][1] == steps[-1][2] == len(copied.rows) and [s[1] for s in steps] == list(
        range(1, len(steps) + 1)
    )
    with DuckDBStore(target, read_only=True) as local:
        assert champion_of(local, 1).champion.program_id == summary["CHAMPION_ID"]  # type: ignore[union-attr]
        con = local._con
        for table in COMPARED.keys() - {"coco_progress"}:  # the run's tables (progress is not mirrored)
            assert duckdb_rows(con, table) == snowflake_rows(session, table), table
        assert api.export(1, db=local).program_id == summary["CHAMPION_ID"]
    # the mirrored run resumes locally, from the task rows it brought along
    resumed = api.resume(1, db=target, budget=4)
    assert resumed.iterations == 4
    with DuckDBStore(target) as local, pytest.raises(StoreError, match="run 1 is already in"):
        mirror_run(SnowparkStore(session, read_only=True), local, 1)


BAD_CALLS = {
    "unknown task": (("coco_evolve", "nosuch", 3, {"seed": 1}), "no task named 'nosuch'"),
    "missing label column": (
        ("coco_task", "t", "signals", {**OPTIONS, "label": "verdict"}),
        "option 'label' names column 'verdict', which 'signals' does not have",
    ),
    "failing source": (
        ("coco_task", "t", "SELECT * FROM nowhere", OPTIONS),
        "the source 'SELECT \\* FROM nowhere' fails",
    ),
    "label of the wrong type": (
        ("coco_task", "t", "SELECT id, color, ARRAY_CONSTRUCT(speed) AS action FROM signals", OPTIONS),
        "the label column 'action'",
    ),
    "empty source": (("coco_task", "t", "SELECT * FROM signals WHERE speed > 100", OPTIONS), "has no rows"),
    "bad option name": (("coco_evolve", "signals", 3, {"sed": 1}), "unknown option 'sed'|unknown .*'sed'"),
    # issue 25: the source is one read-only query, the name an identifier, the options checked first
    "two statements": (("coco_task", "t", "signals; DROP TABLE programs", OPTIONS), "holds 2 statements"),
    "a table function": (
        ("coco_task", "t", "SELECT * FROM TABLE(coco_evolve('signals', 1))", OPTIONS),
        "must only read tables",
    ),
    "a name that is not an identifier": (
        ("coco_task", "bad name!", "signals", OPTIONS),
        "a task name is a letter",
    ),
    "a seed out of range": (
        ("coco_evolve", "signals", 3, {"seed": -1}),
        "option 'seed' must be an integer in",
    ),
}


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_a_bad_call_is_one_clear_error_and_writes_nothing(
    session: Session, call: tuple[tuple[Any, ...], str]
) -> None:
    if call[0][0] == "coco_evolve" and call[0][1] == "signals":
        session.call("coco_task", "signals", "signals", OPTIONS)
    store = SnowparkStore(session)
    before = {table: len(store.table_frame(table)) for table in table_columns()}
    arguments, message = call
    with pytest.raises(SnowparkLocalTestingException, match=message) as caught:
        session.call(*arguments)
    assert "\n" not in str(caught.value).strip()
    assert {table: len(store.table_frame(table)) for table in table_columns()} == before


@pytest.mark.skipif(
    not os.environ.get("COCO_SNOWFLAKE_CONNECTION"),
    reason="no Snowflake account here: set COCO_SNOWFLAKE_CONNECTION to a connection of connections.toml "
    "(and COCO_SNOWFLAKE_SCHEMA to a scratch DB.SCHEMA)",
)
def test_a_run_on_a_real_account_holds_what_the_same_run_holds_in_duckdb(tmp_path: Path) -> None:
    """The same comparison on an account: deploy, then the procedures through `session.sql('CALL ...')`, with
    the store's executor being `session.sql` and the candidates running on Snowflake's own engine."""
    from coco_sql.engines.snowflake.procs import deploy

    name = os.environ["COCO_SNOWFLAKE_CONNECTION"]
    schema = os.environ.get("COCO_SNOWFLAKE_SCHEMA")
    deploy.deploy(name, schema=schema)
    session = Session.builder.config("connection_name", name).create()
    try:
        if schema:
            session.sql(f"USE SCHEMA {schema}").collect()
        frame = signals()
        frame.columns = [c.upper() for c in frame.columns]
        session.create_dataframe(frame).write.save_as_table("signals", mode="overwrite")
        session.sql(
            f"CALL coco_task('signals_{os.getpid()}', 'signals', PARSE_JSON(?))", [json.dumps(OPTIONS)]
        ).collect()
        (summary,) = session.sql(f"CALL coco_evolve('signals_{os.getpid()}', 3, {{'seed': 1}})").collect()
        con = duckdb_run(tmp_path, 3)
        local = dict(zip(("run_id", "task", "iterations", "champion_id", "seed_val", "champion_val"),
                         con.execute("CALL coco_status()").fetchone(), strict=False))  # fmt: skip
        assert summary["ITERATIONS"] == local["iterations"]
        store = SnowparkStore(session, read_only=True)
        run_id = int(summary["RUN_ID"])
        # run ids differ between the two databases: compare the columns that carry none
        for table, columns in (
            ("programs", ["iteration", "code", "cell", "approach", "strategy", "valid"]),
            ("program_scores", ["split", "score", "n_rows", "n_errors"]),
            ("ledger", ["iteration", "strategy", "kind", "status", "parent_score", "child_score"]),
        ):
            remote = store.table_frame(table, run_id=run_id)[columns].astype(str).values
            ours = con.execute(f"SELECT {', '.join(columns)} FROM {table}").df()[columns].astype(str).values
            assert sorted(map(tuple, remote)) == sorted(map(tuple, ours)), table
        con.close()
    finally:
        session.close()


def test_the_agent_mutator_runs_on_cortex_inside_a_procedure(session: Session) -> None:
    """`CALL coco_evolve(..., {'mutator': 'agent', ...'cortex:<model>'})`: the procedure hands its own session to
    the model layer, and the agent's turns go to COMPLETE (patched here with a scripted model that speaks
    COMPLETE's documented answer shape and the prompted tool protocol)."""
    calls: list[str] = []

    def agent(history: list[dict[str, str]]) -> str:
        step = sum(1 for turn in history if turn["role"] == "assistant")
        if step == 0:
            call = {"name": "offline_search", "arguments": {}}
        elif step == 1:
            found = json.loads(history[-1]["content"].split("\n", 1)[1])
            call = {"name": "write_candidate", "arguments": {"code": found["code"]}}
        else:
            call = {
                "name": "commit",
                "arguments": {"approach": "hillclimb", "description": "offline search's child"},
            }
        return json.dumps({"tool_calls": [call]})

    @patch(COMPLETE_FUNCTION)
    def complete(model: ColumnEmulator, history: ColumnEmulator, options: ColumnEmulator) -> ColumnEmulator:
        answers = []
        for name, turns, _ in zip(model, history, options, strict=True):
            calls.append(name)
            reply = agent(turns)
            usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
            answers.append(json.dumps({"choices": [{"messages": reply}], "model": name, "usage": usage}))
        return ColumnEmulator(data=answers, sf_type=ColumnType(StringType(), True))

    try:
        session.call("coco_task", "signals", "signals", OPTIONS)
        options = {"seed": 1, "mutator": "agent", "mutator_settings": {"model": "cortex:mistral-large2"}}
        (summary,) = session.call("coco_evolve", "signals", 2, options).collect()
    finally:
        MockedFunctionRegistry.get_or_create().unregister(COMPLETE_FUNCTION)
    assert summary["ITERATIONS"] == 2 and calls == ["mistral-large2"] * 6
    store = SnowparkStore(session)
    turns = store.table_frame("agent_turns")
    assert sorted(turns["tool_name"].dropna()) == sorted(["offline_search", "write_candidate", "commit"] * 2)
    usage = store.table_frame("ai_usage")
    mutator = usage[usage["split"] == "mutator"]
    assert set(mutator["model"]) == {"cortex:mistral-large2"} and mutator["input_tokens"].sum() == 600
    programs = store.table_frame("programs")
    assert set(programs[programs["iteration"] > 0]["approach"]) == {"offline search's child"}


@pytest.mark.slow
def test_primitives_in_snowpark_hold_what_they_hold_in_duckdb(session: Session, tmp_path: Path) -> None:
    """PACE from a Snowflake procedure: the library and trials written through Snowpark equal DuckDB's, and the
    warehouse ran the candidates with their macros inlined (Snowflake has none)."""
    session.call("coco_task", "signals", "signals", OPTIONS).collect()
    session.call("coco_evolve", "signals", 4, {"seed": 1, "primitives": True}).collect()
    con = coco_sql.connect(tmp_path / "local.duckdb")
    con.execute(f"CREATE TABLE signals AS {SIGNALS_SQL}")
    con.execute("CALL coco_task('signals', 'signals', ?::JSON)", [json.dumps(OPTIONS)]).fetchall()
    con.execute("CALL coco_evolve('signals', 4, {'seed': 1, 'primitives': true})").fetchall()
    compared = {
        "primitives": "name, language, code, signature, origin_program, created_iteration, how",
        "primitive_trials": "iteration, program_id, operator, focus, parent_score, child_score, improved, verified",
    }
    store = SnowparkStore(session, read_only=True)
    for table, columns in compared.items():
        names = [c.strip() for c in columns.split(",")]
        remote = sorted(
            tuple(_plain(v) for v in row)
            for row in store.table_frame(table)[names].itertuples(index=False, name=None)
        )
        local = sorted(
            tuple(_plain(v) for v in row) for row in con.execute(f"SELECT {columns} FROM {table}").fetchall()
        )
        assert remote == local and remote, table
    con.close()
