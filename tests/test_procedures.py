"""The procedures from SQL, in a real DuckDB: `coco_sql.connect()`, then `CALL coco_evolve(...)` and friends, and the
run read back with plain SQL. A run started from SQL equals the CLI's run with the same seed."""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

import duckdb
import pytest

import coco_sql
from tests.conftest import run_cli

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
    (
        run_id,
        task,
        iterations,
        champion_id,
        seed_val,
        champion_val,
        _,
        champion_test,
        best_id,
        best_val,
        stopped,
        _,
    ) = summary
    assert (run_id, task, iterations, stopped) == (1, "lockpicking6", 4, None) and champion_val > seed_val
    assert (best_id, best_val) == (champion_id, champion_val)  # no AI calls: the champion is the best

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

    cli = run_cli("evolve", "lockpicking6", "--budget", "4", "--seed", "3", "--max-drafts", "6",
                  "--db", tmp_path / "cli.duckdb", "--json", "--quiet", cwd=tmp_path)  # fmt: skip
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
    command = ["sql", "--db", str(db)]
    done = run_cli(*command, "--json", "CALL coco_evolve('lockpicking6', 1, {'seed': 1})", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["run_id"] == 1 and row["iterations"] == 1
    failed = run_cli(*command, "CALL coco_evolve('nosuch')", cwd=tmp_path)
    assert failed.returncode == 2
    packs = sorted(p.parent.name for p in (Path(__file__).parents[1] / "tasks").glob("*/task.toml"))
    assert failed.stderr.splitlines() == [
        f"coco-sql: error: no task named 'nosuch' (known: {', '.join(packs)})"
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
    run_id, _, iterations, champion_id, seed_val, champion_val, _, champion_test, _, _, stopped = summary[:11]
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

    cli = run_cli("evolve", "signals", "--budget", "6", "--seed", "1", "--db", db, "--json", "--quiet",
                  cwd=tmp_path)  # fmt: skip
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
        "option 'scorer' must be one of exact, numeric",
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


# -- issue 25: input hardening ---------------------------------------------------------------------------------
SIGNALS_OPTIONS = (
    "{'label': 'action', 'dialect': 'duckdb', "
    "'seed_program': 'SELECT id, CASE WHEN color = ''blue'' THEN ''go'' ELSE ''wait'' END AS action FROM input'}"
)
COCO_ERROR = r"(TaskError|ConfigError|StoreError): "


def written(con: duckdb.DuckDBPyConnection) -> tuple:
    """What a call may have written: tasks, runs, programs and events (the programs table must still exist)."""
    return con.execute(
        "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM task_rows), (SELECT count(*) FROM runs), "
        "(SELECT count(*) FROM programs), (SELECT count(*) FROM events)"
    ).fetchone()


def one_line_error(con: duckdb.DuckDBPyConnection, statement: str, match: str = COCO_ERROR) -> str:
    with pytest.raises(duckdb.Error, match=match) as caught:
        con.execute(statement).fetchall()
    message = str(caught.value).strip()
    assert "\n" not in message and re.search(COCO_ERROR, message), message
    return message


@pytest.fixture
def signals_db(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = coco_sql.connect(tmp_path / "warehouse.duckdb")
    con.execute(SIGNALS)
    yield con
    con.close()


INJECTIONS = {
    "drop": ("signals; DROP TABLE programs", "2 statements"),
    "copy": ("signals; COPY signals TO '{out}'", "2 statements"),
    "call statement": ("SELECT * FROM signals; CALL coco_evolve('lockpicking6', 1)", "2 statements"),
    "procedure in FROM": ("SELECT * FROM coco_evolve('lockpicking6', 1)", "is not a table"),
    "procedure's UDF": ("SELECT coco_evolve_py('lockpicking6', 1, NULL) AS r", "calls coco_evolve_py"),
    "copy alone": ("COPY signals TO '{out}'", "neither a table name nor a SELECT"),
}


@pytest.mark.parametrize("source", INJECTIONS.values(), ids=INJECTIONS.keys())
def test_a_task_source_runs_as_one_read_only_query(
    signals_db, tmp_path: Path, source: tuple[str, str]
) -> None:
    """The source is parsed before it runs: a second statement, a procedure or a table function is refused in
    one line, the archive's tables are intact, no run is committed and no file is written."""
    con = signals_db
    out = tmp_path / "leak.csv"
    text, problem = source
    statement = f"CALL coco_task('t', ?, {SIGNALS_OPTIONS})"
    with pytest.raises(duckdb.Error, match=re.escape(problem)) as caught:
        con.execute(statement, [text.format(out=out)]).fetchall()
    assert "\n" not in str(caught.value).strip() and "StoreError: " in str(caught.value)
    assert written(con) == (0, 0, 0, 0, 0) and not out.exists()
    # the same source, written as a table name or one SELECT, is registered
    assert con.execute(f"CALL coco_task('t', 'SELECT * FROM signals', {SIGNALS_OPTIONS})").fetchone()[1] == 80


@pytest.mark.parametrize("shape", ["absolute", "parent"])
def test_a_path_shaped_task_name_writes_no_file_anywhere(
    signals_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """A task's files are written in a temporary folder under its name: a name that is a path would put
    task.toml, seed.sql and data/pool.csv where it points. The name is refused first."""
    scratch = tmp_path / "scratch" / "temp"
    scratch.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the task's temporary folder would be
    name = str(tmp_path / "elsewhere" / "x") if shape == "absolute" else "../../x"
    before = sorted(tmp_path.rglob("*"))
    message = one_line_error(signals_db, f"CALL coco_task('{name}', 'signals', {SIGNALS_OPTIONS})")
    assert "a task name is a letter or _" in message
    assert sorted(tmp_path.rglob("*")) == before  # no task.toml, seed.sql or data/pool.csv anywhere
    assert written(signals_db) == (0, 0, 0, 0, 0)


def test_a_failed_evolve_leaves_no_half_made_run(signals_db) -> None:
    """Out-of-range options, or a seed that fails on the validation split, write no run row and no event: the
    store's latest run, its status and its resume are what they were."""
    con = signals_db
    con.execute(SIGNALS_TASK).fetchall()
    (first,) = con.execute("CALL coco_evolve('signals', 1, {'seed': 1})").fetchall()
    status = con.execute("CALL coco_status()").fetchall()
    before = written(con)
    cast_seed = "'seed_program': 'SELECT id, CAST(color AS INTEGER) AS action FROM input'"
    con.execute(
        f"CALL coco_task('broken', 'signals', {{'label': 'action', 'dialect': 'duckdb', {cast_seed}}})"
    )
    for statement, problem in (
        (
            "CALL coco_evolve('signals', 1, {'seed': -1})",
            "option 'seed' must be an integer in [0, 2147483647]",
        ),
        (
            "CALL coco_evolve('signals', 1, {'mutator_settings': {'max_drafts': -3}})",
            "setting 'max_drafts' must be an integer in [1, 1024] (got -3)",
        ),
        ("CALL coco_evolve('signals', -5)", "option 'budget' must be an integer in [0, 100000] (got -5)"),
        ("CALL coco_evolve('broken', 2)", "the seed program fails on the validation split"),
    ):
        assert problem in one_line_error(con, statement)
        assert written(con)[2:] == before[2:]
        assert con.execute("CALL coco_status()").fetchall() == status
    (resumed,) = con.execute("CALL coco_resume(NULL, 2)").fetchall()  # the latest run is still the first
    assert resumed[0] == first[0] and resumed[2] == 2


HUGE = {
    "islands": (
        "CALL coco_evolve('signals', 1, {'islands': 100000000})",
        "option 'islands' must be an integer in [1, 64]",
    ),
    "budget": (
        "CALL coco_evolve('signals', 2147483647)",
        "option 'budget' must be an integer in [0, 100000]",
    ),
    "timeout": (
        "CALL coco_task('t', 'signals', {'label': 'action', 'seed_program': 'SELECT id, 1 AS action FROM input', "
        "'timeout_seconds': 1e308})",
        "option 'timeout_seconds' must be a number in (0, 3600]",
    ),
    "minibatch": (
        "CALL coco_evolve('signals', 1, {'minibatch': 9223372036854775807})",
        "option 'minibatch' must be an integer in [0, 1000000]",
    ),
    "agent wall time": (
        "CALL coco_evolve('signals', 1, {'mutator': 'agent', 'mutator_settings': {'model': 'x/y', 'wall_s': 1e308}})",
        "agent setting 'wall_s' must be a number in (0, 86400]",
    ),
}


@pytest.mark.parametrize("call", HUGE.values(), ids=HUGE.keys())
def test_huge_options_are_refused_at_once_in_one_line(signals_db, call: tuple[str, str]) -> None:
    con = signals_db
    con.execute(SIGNALS_TASK).fetchall()
    before = written(con)
    statement, problem = call
    started = time.monotonic()
    assert problem in one_line_error(con, statement)
    assert time.monotonic() - started < 10 and written(con) == before


ONE_LINE_ERRORS = {
    "NULL name": (f"CALL coco_task(NULL, 'signals', {SIGNALS_OPTIONS})", "a task name is a letter or _"),
    "NULL source": (
        f"CALL coco_task('t', NULL, {SIGNALS_OPTIONS})",
        "the source is a table name or one SELECT",
    ),
    "NULL program": ("CALL coco_eval('lockpicking6', NULL)", "the program to evaluate is SQL or Python text"),
    "split_seed 'abc'": (
        "CALL coco_task('t', 'signals', {'label': 'action', 'seed_program': 'x', 'split_seed': 'abc'})",
        "option 'split_seed' must be an integer in [0, 2147483647] (got 'abc')",
    ),
    "task options as a string": ("CALL coco_task('t', 'signals', 'abc')", "the options must be an object"),
    "task options as a list": ("CALL coco_task('t', 'signals', [1, 2])", "the options must be an object"),
    "run options as a string": ("CALL coco_evolve('signals', 1, 'abc')", "options must be an object"),
    "run options as a list": ("CALL coco_evolve('signals', 1, [1])", "options must be an object"),
    "seed 'x'": ("CALL coco_evolve('signals', 1, {'seed': 'x'})", "option 'seed' must be an integer"),
    "seed 1e30": ("CALL coco_evolve('signals', 1, {'seed': 1e30})", "option 'seed' must be an integer"),
    "target 'NaN'": (
        "CALL coco_evolve('signals', 1, {'target': 'NaN'})",
        "option 'target' must be a number in [0, 1]",
    ),
    "model as a number": (
        "CALL coco_evolve('signals', 1, {'classify_model': 3})",
        "option 'classify_model' must be a string",
    ),
}


@pytest.mark.parametrize("call", ONE_LINE_ERRORS.values(), ids=ONE_LINE_ERRORS.keys())
def test_each_bad_argument_is_one_coco_error_line(signals_db, call: tuple[str, str]) -> None:
    con = signals_db
    con.execute(SIGNALS_TASK).fetchall()
    before = written(con)
    statement, problem = call
    assert problem in one_line_error(con, statement)
    assert written(con) == before


def test_connect_twice_to_one_file_works_and_outlives_the_first(tmp_path: Path) -> None:
    """DuckDB shares a Python UDF between the connections of one process to a file: the second connection gets
    UDFs of its own, so its procedures work, and still work once the first connection is closed."""
    db = tmp_path / "twice.duckdb"
    first = coco_sql.connect(db)
    first.execute(SIGNALS)
    second = coco_sql.connect(db)
    assert second.execute(SIGNALS_TASK).fetchall() == [("signals", 80, 40, 24, 16)]
    assert first.execute("CALL coco_status()").fetchall() == []
    first.close()
    (summary,) = second.execute("CALL coco_evolve('signals', 1, {'seed': 1})").fetchall()
    assert summary[2] == 1 and second.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    third = coco_sql.connect(db)
    assert third.execute("SELECT run_id, status FROM coco_status()").fetchall() == [(1, "finished")]
    second.close()
    third.close()


def test_the_sql_command_gives_one_line_for_bad_arguments(tmp_path: Path) -> None:
    db = tmp_path / "shell.duckdb"
    command = ["sql", "--db", str(db)]
    for statement, problem in (
        (f"CALL coco_task(NULL, 'x', {SIGNALS_OPTIONS})", "a task name is a letter or _"),
        (
            "CALL coco_task('t', 'x; DROP TABLE programs', {'label': 'a', 'seed_program': 'x'})",
            "2 statements",
        ),
        (
            "CALL coco_evolve('lockpicking6', 1, {'islands': 100000000})",
            "option 'islands' must be an integer",
        ),
        ("CALL coco_evolve('lockpicking6', 1, 'abc')", "options must be an object"),
    ):
        done = run_cli(*command, statement, cwd=tmp_path)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("coco-sql: error: ") and problem in done.stderr
    with duckdb.connect(str(db), read_only=True) as check:
        assert check.execute(
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM tasks)"
        ).fetchone() == (0, 0)
        assert check.execute("SELECT count(*) FROM programs").fetchone() == (0,)


def test_a_task_registered_under_an_older_name_rule_still_evolves(signals_db) -> None:
    """Before the identifier rule a registered name could be a pack-style one ('old-signals'): such a stored
    task still loads and evolves, while registering a new task under that name is refused."""
    con = signals_db
    con.execute(SIGNALS_TASK).fetchall()
    con.execute("UPDATE tasks SET name = 'old-signals'")
    con.execute("UPDATE task_rows SET task = 'old-signals'")
    (summary,) = con.execute("CALL coco_evolve('old-signals', 1, {'seed': 1})").fetchall()
    assert summary[1:3] == ("old-signals", 1)
    assert "a task name is a letter or _" in one_line_error(
        con, f"CALL coco_task('new-signals', 'signals', {SIGNALS_OPTIONS})"
    )
