"""`CALL coco_evolve` as a Snowflake procedure runs it, in Snowpark's local testing mode under the strict
emulation of a procedure's limits (no process, no socket, writes under /tmp, one thread; `snowpark_helpers`):
every candidate, probe, draft test and screening query is a warehouse query over the split's staged rows, a
Python program a temporary UDF, and what the candidates' AI calls cost is metered in their own queries.

Each run is compared with the same run on DuckDB: the same programs and evaluations, and for an AI task the same
ai_usage totals (AI_CLASSIFY's calls and tokens, in every split; the local stand-in's AI_COUNT_TOKENS is e5's
tokenizer, as the embedded AI_CLASSIFY's billing). Small budgets: the suite's time matters.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
from pack_copies import small_pack
from snowflake.snowpark import Session
from snowflake.snowpark.mock.exceptions import SnowparkLocalTestingException
from snowpark_helpers import plain, procedure_session, strict_session, usage_totals

from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.engines.snowflake.candidates import WarehouseCandidates
from coco_sql.engines.snowflake.store import SnowparkStore
from coco_sql.engines.snowflake.strict import strict_procedures

COMPARED = {
    "programs": ["program_id", "parent_id", "code", "cell", "approach", "valid", "error"],
    "evaluations": ["program_id", "split", "instance_id", "score", "output", "error"],
}


def _rows(frame: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(plain(v) for v in row) for row in frame[columns].itertuples(index=False, name=None))


def _compare(session: Session, db: Path) -> tuple[SnowparkStore, DuckDBStore]:
    remote = SnowparkStore(session, read_only=True)
    with DuckDBStore(db, read_only=True) as local:
        for table, columns in COMPARED.items():
            assert _rows(remote.table_frame(table), columns) == _rows(
                local.query(f"SELECT {', '.join(columns)} FROM {table}"), columns
            ), table
        return remote, local


@pytest.mark.slow
@pytest.mark.parametrize(("pack", "rows", "budget"), [("lockpicking6", 0, 2), ("tsp_construct", 6, 2)])
def test_an_offline_run_in_a_procedure_equals_the_run_on_duckdb(
    tmp_path: Path, pack: str, rows: int, budget: int
) -> None:
    """lockpicking6 with the offline mutator (probes, screening, draft tests as warehouse queries) and
    tsp_construct (each Python program a temporary UDF, its tours measured here)."""
    task = str(small_pack(tmp_path, pack, rows, 4)) if rows else pack
    db = tmp_path / "local.duckdb"
    api.evolve(task, db=db, budget=budget, options={"seed": 1})
    with strict_session() as (session, limits):
        (summary,) = session.call("coco_evolve", task, budget, {"seed": 1}).collect()
        assert summary["ITERATIONS"] == budget and limits.calls == 1
        _compare(session, db)


@pytest.mark.slow
def test_an_ai_run_in_a_procedure_bills_what_the_run_on_duckdb_bills(tmp_path: Path) -> None:
    """hotpotqa_type's AI_CLASSIFY pipeline: the same programs, and the same AI_CLASSIFY calls and tokens in
    every split (train, val, test, the mutator's drafts), metered in the candidates' queries instead of by
    coco-sql's runtime. AI_EMBED (the mutator's probes for diverse examples) bills the same calls; its tokens
    differ: the DuckDB stand-in counts e5's special tokens and query prefix, AI_COUNT_TOKENS does not.

    One iteration: its child is the learned proxy (the linear head fitted on each engine's own AI_EMBED vectors,
    the warehouse's through a query). The embedded model's vectors differ in the last bits with the batch they
    were embedded in, so later proxy edits, ranked by those fits, may tie-break differently on the two paths."""
    task = str(small_pack(tmp_path, "hotpotqa_type", 40, 6))
    db = tmp_path / "local.duckdb"
    api.evolve(task, db=db, budget=1, options={"seed": 1})
    with strict_session() as (session, _):
        session.call("coco_evolve", task, 1, {"seed": 1}).collect()
        remote, _ = _compare(session, db)
        warehouse = usage_totals(remote.table_frame("ai_usage"))
        providers = set(remote.table_frame("ai_calls")["provider"])
        with DuckDBStore(db, read_only=True) as local:
            duckdb = usage_totals(local.query("SELECT * FROM ai_usage"))
    with DuckDBStore(db, read_only=True) as local:
        assert (
            local.query("SELECT approach FROM programs WHERE program_id = '1-1'")
            .approach[0]
            .startswith("knn_proxy")
        )  # the warehouse fitted and proposed the proxy too (`_compare`): before, it never could
    classify = {key: value for key, value in duckdb.items() if key[1] == "AI_CLASSIFY"}
    assert {split for split, _, _ in classify} == {"train", "val", "test", "drafts"}
    assert {key: value for key, value in warehouse.items() if key[1] == "AI_CLASSIFY"} == classify
    embedded = {key: value[0] for key, value in duckdb.items() if key[1] == "AI_EMBED"}
    assert {key: value[0] for key, value in warehouse.items() if key[1] == "AI_EMBED"} == embedded
    assert providers == {"warehouse"}  # one call per metered query and function


def test_yesterdays_probe_sandbox_fails_under_the_procedure_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before issue 27 a warehouse runner had no query engine, so the evaluator started a DuckDB worker process
    for the probes: refused (and counted) inside a procedure."""
    monkeypatch.setattr(WarehouseCandidates, "probes", lambda engine, tables: None)
    session = procedure_session()
    try:
        with (
            strict_procedures(session) as limits,
            pytest.raises(SnowparkLocalTestingException, match="not allowed"),
        ):
            session.call("coco_evolve", "lockpicking6", 1, {"seed": 1})
    finally:
        session.close()
    assert limits.refused["process"] >= 1


# -- on a real account: Snowflake enforces the limits itself -----------------------------------------------------
ACCOUNT = os.environ.get("COCO_SNOWFLAKE_CONNECTION")
on_an_account = pytest.mark.skipif(
    not ACCOUNT,
    reason="no Snowflake account here: set COCO_SNOWFLAKE_CONNECTION to a connection of connections.toml "
    "(and COCO_SNOWFLAKE_SCHEMA to a scratch DB.SCHEMA)",
)
TASKS = Path(__file__).resolve().parents[1] / "tasks"


def _account_session() -> Session:
    """The scratch schema with coco-sql deployed in it (`coco-sql deploy`), and a session using it."""
    from coco_sql.engines.snowflake.procs import deploy

    schema = os.environ.get("COCO_SNOWFLAKE_SCHEMA")
    deploy.deploy(str(ACCOUNT), schema=schema)
    session = Session.builder.config("connection_name", ACCOUNT).create()
    if schema:
        session.sql(f"USE SCHEMA {schema}").collect()
    return session


def _register(session: Session, name: str, frame: pd.DataFrame, options: dict[str, Any]) -> None:
    upper = frame.copy()
    upper.columns = [c.upper() for c in upper.columns]
    session.create_dataframe(upper).write.save_as_table(name, mode="overwrite")
    session.sql("CALL coco_task(?, ?, PARSE_JSON(?))", [name, name, json.dumps(options)]).collect()


@on_an_account
def test_on_a_real_account_procedures_run_offline_and_ai_tasks_and_bill_cortex(tmp_path: Path) -> None:
    """lockpicking6's rows and an AI task (hotpotqa_type's first rows) as tasks from tables, evolved by `CALL
    coco_evolve` inside Snowflake, which refuses a process, a socket or a write outside /tmp by itself: both runs
    finish; the AI task's candidates are billed by their own queries (ai_usage under Cortex's model, provider
    'warehouse'); and no candidate query was preceded by a DESCRIBE (the session's query history)."""
    session = _account_session()
    suffix = os.getpid()
    try:
        lockpicking = pd.read_csv(
            TASKS / "lockpicking6" / "data" / "pool.csv", dtype={"id": str, "code": str}
        )
        seed = (TASKS / "lockpicking6" / "seed.sql").read_text(encoding="utf-8")
        _register(
            session,
            f"lp_{suffix}",
            lockpicking,
            {"label": "label", "dialect": "duckdb", "seed_program": seed},
        )
        (summary,) = session.sql(f"CALL coco_evolve('lp_{suffix}', 2, {{'seed': 1}})").collect()
        assert summary["ITERATIONS"] == 2
        questions = pd.read_csv(TASKS / "hotpotqa_type" / "data" / "pool.csv", dtype=str).head(40)
        options = {
            "label": "label",
            "seed_program": (TASKS / "hotpotqa_type" / "seed.sql").read_text(encoding="utf-8"),
            "allowed_functions": ["AI_CLASSIFY", "AI_SIMILARITY", "AI_EMBED"],
        }
        _register(session, f"hq_{suffix}", questions, options)
        (summary,) = session.sql(f"CALL coco_evolve('hq_{suffix}', 2, {{'seed': 1}})").collect()
        assert summary["ITERATIONS"] == 2
        usage = SnowparkStore(session, read_only=True).table_frame("ai_usage", run_id=int(summary["RUN_ID"]))
        candidates = usage[usage["split"].isin(["train", "val", "test"])]
        assert set(candidates["model"]) == {"cortex:ai_classify"}
        assert candidates["calls"].sum() > 0 and candidates["input_tokens"].sum() > 0
        history = session.sql(
            "SELECT COUNT(*) FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY_BY_SESSION(RESULT_LIMIT => 10000)) "
            "WHERE QUERY_TEXT ILIKE 'describe%coco_input%'"
        ).collect()
        assert history[0][0] == 0
    finally:
        session.close()


@on_an_account
def test_on_a_real_account_python_programs_run_as_temporary_udfs(tmp_path: Path) -> None:
    """tsp_construct's programs as Snowflake Python UDFs (the client's session here: task packs are not shipped
    to the warehouse): the same programs and tour lengths as the zygote sandbox gives on DuckDB."""
    task = str(small_pack(tmp_path, "tsp_construct", 6, 4))
    db = tmp_path / "local.duckdb"
    api.evolve(task, db=db, budget=2, options={"seed": 1})
    session = _account_session()
    try:
        store = SnowparkStore(session)
        summary = api.evolve(task, db=store, budget=2, options={"seed": 1})
        with DuckDBStore(db, read_only=True) as local:
            for table, columns in (
                ("programs", ["iteration", "code", "valid"]),
                ("program_scores", ["split", "score"]),
            ):
                remote = store.table_frame(table, run_id=summary.run_id)
                ours = local.query(f"SELECT {', '.join(columns)} FROM {table}")
                assert _rows(remote, columns) == _rows(ours, columns), table
    finally:
        session.close()
