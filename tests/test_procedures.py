"""The procedures from SQL, in a real DuckDB: `coco_sql.connect()`, then `CALL coco_evolve(...)` and friends, and the
run read back with plain SQL. A run started from SQL equals the CLI's run with the same seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import coco_sql

OPTIONS = "{'seed': 3, 'mutator_settings': {'max_drafts': 6}}"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[duckdb.DuckDBPyConnection, Path, tuple]:
    db = tmp_path_factory.mktemp("procedures") / "warehouse.duckdb"
    con = coco_sql.connect(db)
    (summary,) = con.execute(f"CALL coco_evolve('lockpicking6', 4, {OPTIONS})").fetchall()
    yield con, db, summary
    con.close()


def test_a_run_started_from_sql_is_in_the_tables_and_equals_the_clis(session, tmp_path: Path) -> None:
    con, _, summary = session
    run_id, task, iterations, champion_id, seed_val, champion_val, _, champion_test, stopped = summary
    assert (run_id, task, iterations, stopped) == (1, "lockpicking6", 4, None) and champion_val > seed_val

    board = con.execute(
        "SELECT program_id, val_score FROM leaderboard WHERE run_id = ? ORDER BY val_rank, iteration LIMIT 1",
        [run_id],
    ).fetchone()
    assert board == (champion_id, champion_val)
    ledger = con.execute("SELECT count(*) FROM ledger WHERE run_id = ?", [run_id]).fetchone()
    assert ledger == (4,)
    evaluations = con.execute(
        "SELECT count(*) FROM evaluations WHERE program_id = ? AND split = 'val'", [champion_id]
    ).fetchone()
    assert evaluations == (50,)

    cli = subprocess.run(
        [sys.executable, "-m", "coco_sql.cli", "evolve", "lockpicking6", "--budget", "4", "--seed", "3",
         "--max-drafts", "6", "--db", str(tmp_path / "cli.duckdb"), "--json", "--quiet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    from_cli = json.loads(cli.stdout.splitlines()[-1])
    assert (from_cli["champion_id"], from_cli["champion_val_score"], from_cli["champion_test_score"]) == (
        champion_id,
        champion_val,
        champion_test,
    )


def test_status_resume_export_and_eval(session) -> None:
    con, _, summary = session
    run_id = summary[0]
    assert con.execute("CALL coco_status(?)", [run_id]).fetchone()[4] == "finished"
    (resumed,) = con.execute("CALL coco_resume(?, 5)", [run_id]).fetchall()
    assert resumed[0] == run_id and resumed[2] == 5
    assert con.execute("SELECT budget, status FROM coco_status() WHERE run_id = ?", [run_id]).fetchone() == (
        5,
        "finished",
    )
    run, program_id, score, form, code, findings = con.execute("CALL coco_export(?)", [run_id]).fetchone()
    assert (run, program_id, form, findings) == (run_id, resumed[3], "sql", None) and "CASE" in code.upper()
    task, split, evaluated, rows, _, error = con.execute(
        "CALL coco_eval('lockpicking6', ?, 'val')", [code]
    ).fetchone()
    assert (task, split, rows, error) == ("lockpicking6", "val", 50, None) and evaluated == pytest.approx(
        score
    )


BAD_CALLS = {
    "unknown task": ("CALL coco_evolve('nosuch', 3)", "no task named 'nosuch'"),
    "bad option name": ("CALL coco_evolve('lockpicking6', 3, {'sede': 1})", "unknown run option 'sede'"),
    "bad option value": ("CALL coco_evolve('lockpicking6', 3, {'policy': 'nope'})", "unknown policy 'nope'"),
    "bad mutator setting": (
        "CALL coco_evolve('lockpicking6', 3, {'mutator_settings': {'drafts': 2}})",
        "has no setting 'drafts'",
    ),
    "unknown run": ("CALL coco_resume(99)", "no run 99"),
    "unknown form": ("CALL coco_export(1, 'pdf')", "unknown export form 'pdf'"),
}


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_a_bad_call_is_one_clear_error_and_writes_nothing(session, call: tuple[str, str]) -> None:
    con, _, _ = session
    before = con.execute("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM programs)").fetchone()
    statement, message = call
    with pytest.raises(duckdb.Error, match=message) as caught:
        con.execute(statement).fetchall()
    assert "\n" not in str(caught.value).strip()
    assert (
        con.execute("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM programs)").fetchone()
        == before
    )


def test_the_sql_command_runs_a_call_and_gives_one_error_line(tmp_path: Path) -> None:
    db = tmp_path / "shell.duckdb"
    command = [sys.executable, "-m", "coco_sql.cli", "sql", "--db", str(db)]
    done = subprocess.run(
        [*command, "--json", "CALL coco_evolve('lockpicking6', 1, {'seed': 1})"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["run_id"] == 1 and row["iterations"] == 1
    failed = subprocess.run(
        [*command, "CALL coco_evolve('nosuch')"], capture_output=True, text=True, timeout=120
    )
    assert failed.returncode == 2
    assert failed.stderr.splitlines() == [
        "coco-sql: error: no task named 'nosuch' (known: goemotions, hotpotqa_type, lockpicking6, tsp_construct)"
    ]


SIGNALS = """
CREATE TABLE signals AS
SELECT 's' || lpad(i::VARCHAR, 3, '0') AS id, ['red', 'green', 'amber', 'blue'][1 + i % 4] AS color, i % 7 AS speed,
       CASE ['red', 'green', 'amber', 'blue'][1 + i % 4] WHEN 'red' THEN 'stop' WHEN 'green' THEN 'go' ELSE 'wait' END
           AS action
FROM range(80) t(i)
"""
SIGNALS_TASK = (
    "CALL coco_task('signals', 'signals', {'label': 'action', 'dialect': 'duckdb', 'seed_program': "
    "'SELECT id, CASE WHEN color = ''blue'' THEN ''go'' ELSE ''wait'' END AS action FROM input'})"
)


def test_a_task_from_the_users_own_table_evolves_like_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "warehouse.duckdb"
    con = coco_sql.connect(db)
    con.execute(SIGNALS)
    assert con.execute(SIGNALS_TASK).fetchall() == [("signals", 80, 40, 24, 16)]
    (summary,) = con.execute("CALL coco_evolve('signals', 6, {'seed': 1})").fetchall()
    run_id, _, iterations, champion_id, seed_val, champion_val, _, champion_test, stopped = summary
    assert iterations == 6 and champion_val > seed_val and stopped is None
    best = con.execute(
        "SELECT program_id FROM leaderboard WHERE run_id = ? ORDER BY val_rank, iteration LIMIT 1", [run_id]
    ).fetchone()
    assert best == (champion_id,)
    assert con.execute("SELECT count(*) FROM ledger WHERE run_id = ?", [run_id]).fetchone() == (6,)
    assert con.execute(
        "SELECT count(DISTINCT instance_id) FROM evaluations WHERE run_id = ? AND split = 'val'", [run_id]
    ).fetchone() == (24,)
    code = con.execute("SELECT code FROM coco_export(?)", [run_id]).fetchone()[0]

    # the champion where it will run: a DuckDB view over the user's table (executed here), a Snowflake view and
    # a dbt model (parsed back by sqlglot in Snowflake's dialect inside export_form)
    view = con.execute("SELECT code FROM coco_export(?, 'duckdb_view')", [run_id]).fetchone()[0]
    con.execute(view)
    answers = dict(con.execute("SELECT id, action FROM coco_signals_champion").fetchall())
    assert len(answers) == 80
    scored = con.execute(
        "SELECT instance_id, output FROM evaluations WHERE program_id = ? AND split = 'val'", [champion_id]
    ).fetchall()
    assert {i: json.loads(o) for i, o in scored} == {i: answers[i] for i, _ in scored}
    snowflake = con.execute("SELECT code FROM coco_export(?, 'snowflake_view')", [run_id]).fetchone()[0]
    assert (
        snowflake.startswith("CREATE OR REPLACE VIEW coco_signals_champion AS")
        and "FROM signals" in snowflake
    )
    dbt = con.execute("SELECT code FROM coco_export(?, 'dbt')", [run_id]).fetchone()[0]
    assert dbt.startswith("{{ config(materialized='view') }}") and "{{ ref('signals') }}" in dbt
    # the source grows after registration: the task keeps the rows it was registered with
    con.execute("INSERT INTO signals SELECT 'extra', 'red', 0, 'go'")
    con.close()

    cli = subprocess.run(
        [sys.executable, "-m", "coco_sql.cli", "evolve", "signals", "--budget", "6", "--seed", "1",
         "--db", str(db), "--json", "--quiet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    from_cli = json.loads(cli.stdout.splitlines()[-1])
    assert from_cli["champion_id"].split("-")[1] == champion_id.split("-")[1]
    assert (from_cli["champion_val_score"], from_cli["champion_test_score"]) == (champion_val, champion_test)
    with duckdb.connect(str(db), read_only=True) as check:
        programs = check.execute("SELECT code FROM programs WHERE program_id = ?", [from_cli["champion_id"]])
        assert programs.fetchone() == (code,)


BAD_TASKS = {
    "missing label column": (
        "CALL coco_task('t', 'signals', {'label': 'verdict', 'seed_program': 'SELECT id, 1 AS verdict FROM input'})",
        "option 'label' names column 'verdict', which 'signals' does not have",
    ),
    "failing source": (
        "CALL coco_task('t', 'SELECT * FROM nowhere', {'label': 'action', 'seed_program': 'x'})",
        "the source 'SELECT \\* FROM nowhere' fails: Catalog Error",
    ),
    "label of the wrong type": (
        "CALL coco_task('t', 'SELECT id, color, [speed] AS action FROM signals', "
        "{'label': 'action', 'seed_program': 'SELECT id, 1 AS action FROM input'})",
        "the label column 'action' is BIGINT\\[\\]",
    ),
    "empty source": (
        "CALL coco_task('t', 'SELECT * FROM signals WHERE false', "
        "{'label': 'action', 'seed_program': 'SELECT id, 1 AS action FROM input'})",
        "has no rows",
    ),
    "bad option name": ("CALL coco_task('t', 'signals', {'labl': 'action'})", "unknown option 'labl'"),
    "seed program without the label": (
        "CALL coco_task('t', 'signals', {'label': 'action', 'seed_program': 'SELECT id FROM input'})",
        "option 'seed_program' is rejected",
    ),
    "bad scorer": (
        "CALL coco_task('t', 'signals', {'label': 'action', 'scorer': 'bogus', "
        "'seed_program': 'SELECT id, 1 AS action FROM input'})",
        "option 'scorer': must be one of",
    ),
}


@pytest.mark.parametrize("call", BAD_TASKS.values(), ids=BAD_TASKS.keys())
def test_a_bad_task_is_one_clear_error_and_writes_nothing(tmp_path: Path, call: tuple[str, str]) -> None:
    con = coco_sql.connect(tmp_path / "bad.duckdb")
    con.execute(SIGNALS)
    statement, message = call
    with pytest.raises(duckdb.Error, match=message) as caught:
        con.execute(statement).fetchall()
    assert "\n" not in str(caught.value).strip()
    assert con.execute(
        "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM task_rows)"
    ).fetchone() == (0, 0)
    con.close()
