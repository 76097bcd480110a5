"""The `coco-sql` command end to end, as a subprocess: output formats, exit codes, one-line errors, store safety."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import SEED_SQL, CliRunner, PackCopier, run_cli

from coco_sql.engines.duckdb.store import DuckDBStore

TABLES = ("runs", "programs", "evaluations", "program_scores", "archive_entries", "ledger", "events")
SUMMARY_KEYS = {
    "run_id",
    "iterations",
    "champion_id",
    "seed_val_score",
    "champion_val_score",
    "seed_test_score",
    "champion_test_score",
    "best_id",
    "best_val_score",
    "stopped",
}
TOML = (SEED_SQL.parent / "task.toml").read_text()


@pytest.fixture(scope="module")
def evolved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A store holding one tiny finished lockpicking6 run, and the run's --json summary."""
    work = tmp_path_factory.mktemp("evolved")
    db = work / "run.duckdb"
    done = run_cli(
        "evolve", "lockpicking6", "--budget", "2", "--max-drafts", "4", "--db", db, "--json", cwd=work
    )
    assert done.returncode == 0, done.stderr
    return db, json.loads(done.stdout.strip().splitlines()[-1])


def table_counts(db: Path) -> dict[str, int]:
    with DuckDBStore(db, read_only=True) as store:
        return {t: int(store.query(f"SELECT count(*) AS n FROM {t}").n[0]) for t in TABLES}


def run_each(
    commands: dict[str, tuple[str | Path, ...]], cwd: Path
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run independent CLI invocations one after another (in this process: `run_cli`)."""
    return {name: run_cli(*args, cwd=cwd) for name, args in commands.items()}


def assert_user_error(done: subprocess.CompletedProcess[str], *fragments: str, case: str = "") -> None:
    """Exit 2 and exactly one stderr line, `coco-sql: error: ...`, naming the problem; no traceback."""
    lines = done.stderr.splitlines()
    assert done.returncode == 2, (case, done.returncode, done.stderr)
    assert len(lines) == 1, (case, done.stderr)
    assert lines[0].startswith("coco-sql: error: "), (case, lines[0])
    assert "Traceback" not in done.stderr + done.stdout, case
    for fragment in fragments:
        assert fragment in lines[0], (case, fragment, lines[0])


# ------------------------------------------------------------------------------------------ happy paths


def test_tasks_lists_both_packs(cli: CliRunner) -> None:
    done = cli("tasks")
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert {"lockpicking6", "goemotions"} <= set(names)


def test_eval_of_the_seed_prints_json(cli: CliRunner) -> None:
    done = cli("eval", "lockpicking6", "--program", SEED_SQL, "--split", "val", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["score"] == pytest.approx(0.02)
    assert (result["task"], result["split"], result["rows"], result["error"]) == (
        "lockpicking6",
        "val",
        50,
        None,
    )


def test_evolve_json_summary_is_the_last_stdout_line(evolved: tuple[Path, dict[str, Any]]) -> None:
    _, summary = evolved
    assert set(summary) >= SUMMARY_KEYS
    assert summary["iterations"] == 2
    assert summary["seed_val_score"] == pytest.approx(0.02)
    assert summary["seed_test_score"] == pytest.approx(0.035)
    assert summary["champion_val_score"] >= summary["seed_val_score"]
    assert summary["champion_id"].startswith(f"{summary['run_id']}-")


def test_status_lists_the_run(cli: CliRunner, evolved: tuple[Path, dict[str, Any]]) -> None:
    db, summary = evolved
    done = cli("status", "--db", db)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [row[:2] for row in rows] == [[str(summary["run_id"]), "lockpicking6"]]
    assert rows[0][-1] == "finished"
    assert float(rows[0][-2]) == pytest.approx(summary["champion_val_score"])


def test_export_prints_sql_that_eval_scores_as_the_champion(
    cli: CliRunner, evolved: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, summary = evolved
    exported = cli("export", "--db", db)
    assert exported.returncode == 0, exported.stderr
    assert summary["champion_id"] in exported.stdout.splitlines()[0]
    program = tmp_path / "champion.sql"
    program.write_text(exported.stdout)
    done = cli("eval", "lockpicking6", "--program", program, "--split", "val", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["score"] == pytest.approx(summary["champion_val_score"])


# ------------------------------------------------------------------------------------------- user errors


def test_evolve_of_a_missing_task_is_one_line_and_keeps_the_store(
    cli: CliRunner, evolved: tuple[Path, dict[str, Any]]
) -> None:
    db, _ = evolved
    before = table_counts(db)
    assert_user_error(cli("evolve", "nosuch", "--db", db, "--budget", "1"), "no task named 'nosuch'")
    assert table_counts(db) == before


MALFORMED_TOML: dict[str, tuple[str | bytes, tuple[str, ...]]] = {
    "syntax": (TOML.replace('name = "lockpicking6"', 'name = "lockpicking6'), ("invalid TOML",)),
    "scorer-kind": (TOML.replace('kind = "exact"', 'kind = "nonsense"'), ("'scorer.kind'", "nonsense")),
    "timeout-type": (
        TOML.replace("timeout_seconds = 10.0", 'timeout_seconds = "ten"'),
        ("'program.timeout_seconds'", "string"),
    ),
    "unknown-key": (TOML.replace("[scorer]", "[scorer]\nbogus = 1"), ("'scorer.bogus'", "unknown key")),
    "missing-data": (TOML.replace("data/pool.csv", "data/nope.csv"), ("'data.pool'", "nope.csv")),
}

REJECTED_CANDIDATES: dict[str, tuple[str, str]] = {
    "ddl": ("CREATE TABLE t AS SELECT 1 AS id", "CREATE TABLE is not allowed"),
    "delete": ("DELETE FROM input", "DELETE is not allowed"),
    "two-statements": (
        "SELECT id, 1 AS label FROM input; SELECT id, 2 AS label FROM input",
        "exactly one statement, got 2",
    ),
    "off-allow-list": ("SELECT id, length(getenv('HOME')) AS label FROM input", "GETENV is not allowed"),
    "read-file": (
        "SELECT id, 1 AS label FROM read_csv('tasks/lockpicking6/data/test.csv')",
        "READ_CSV is not allowed",
    ),
    "test-table": ("SELECT * FROM test", "table 'test' is not allowed"),
    "call": ("CALL coco_evolve('x')", "CALL is not allowed"),  # sqlglot logs a warning for this one
}


def test_a_malformed_task_toml_is_one_line_and_keeps_the_store(
    copy_pack: PackCopier, evolved: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, _ = evolved
    before = table_counts(db)
    commands = {
        name: ("evolve", copy_pack(toml=toml), "--db", db, "--budget", "1")
        for name, (toml, _) in MALFORMED_TOML.items()
    }
    results = run_each(commands, tmp_path)
    for name, (_, fragments) in MALFORMED_TOML.items():
        assert_user_error(results[name], "task.toml", *fragments, case=name)
    assert table_counts(db) == before


def test_eval_of_a_rejected_candidate_is_one_line(tmp_path: Path) -> None:
    commands: dict[str, tuple[str | Path, ...]] = {}
    for name, (code, _) in REJECTED_CANDIDATES.items():
        program = tmp_path / f"{name}.sql"
        program.write_text(code)
        commands[name] = ("eval", "lockpicking6", "--program", program)
    results = run_each(commands, tmp_path)
    for name, (_, fragment) in REJECTED_CANDIDATES.items():
        assert_user_error(results[name], f"{name}.sql", "rejected", fragment, case=name)


def test_eval_of_an_endless_query_stops_at_the_pack_deadline(
    cli: CliRunner, fast_pack: Path, tmp_path: Path, evolved: tuple[Path, dict[str, Any]]
) -> None:
    db, _ = evolved
    before = table_counts(db)
    program = tmp_path / "endless.sql"
    program.write_text(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
        "SELECT i.id, (SELECT count(*) FROM r) AS label FROM input AS i"
    )
    # bounded by the test's own timeout (an endless query left running would hit it); how fast the
    # deadline fires is bench/ material, not a timed test's on a loaded machine
    done = cli("eval", fast_pack, "--program", program)
    assert_user_error(done, "endless.sql", "1 s deadline")
    assert table_counts(db) == before


def test_resume_without_a_run_of_the_task_is_one_line(
    cli: CliRunner, evolved: tuple[Path, dict[str, Any]]
) -> None:
    db, _ = evolved
    before = table_counts(db)
    assert_user_error(cli("evolve", "goemotions", "--resume", "--db", db), "no run of task 'goemotions'")
    assert table_counts(db) == before


def test_resume_on_a_missing_or_empty_store_is_one_line(cli: CliRunner, store_path: Path) -> None:
    assert_user_error(cli("evolve", "lockpicking6", "--resume", "--db", store_path), "no coco-sql database")
    assert not store_path.exists()
    DuckDBStore(store_path).close()  # an empty store: schema, no runs
    assert_user_error(
        cli("evolve", "lockpicking6", "--resume", "--db", store_path), "no run of task 'lockpicking6'"
    )


def test_export_of_a_missing_db_is_one_line_and_creates_nothing(cli: CliRunner, store_path: Path) -> None:
    assert_user_error(cli("export", "--db", store_path), "no coco-sql database", store_path.name)
    assert not store_path.exists()


# -- issue 25: every flag checked for type and range, before anything is written -----------------------------
HUGE = str(2**70)
OUT_OF_RANGE: dict[str, tuple[tuple[str, ...], str]] = {
    "islands": (("--islands", "100000000"), "option 'islands' must be an integer in [1, 64] (got 100000000)"),
    "seed": (("--seed", "-1"), "option 'seed' must be an integer in [0, 2147483647] (got -1)"),
    "budget": (("--budget", "1000000"), "option 'budget' must be an integer in [0, 100000] (got 1000000)"),
    "target": (("--target", "nan"), "option 'target' must be a number in [0, 1] (got nan)"),
    "minibatch": (("--minibatch", HUGE), "option 'minibatch' must be an integer in [0, 1000000]"),
    "primitive-k": (("--primitive-k", "1000"), "option 'primitive_k' must be an integer in [1, 32]"),
    "max-drafts": (("--max-drafts", "-1"), "setting 'max_drafts' must be an integer in [1, 1024] (got -1)"),
    "agent wall time": (
        ("--mutator", "agent", "--model", "x/y", "--mutator-setting", "wall_s=1e308"),
        "agent setting 'wall_s' must be a number in (0, 86400]",
    ),
}


def test_an_out_of_range_flag_is_one_line_and_writes_no_store(cli: CliRunner, tmp_path: Path) -> None:
    """A value past what memory, a timer or a BIGINT holds (islands 1e8 took 14 GB; a seed of -1 failed after
    its run row was written) is refused before the store is opened: no database file appears."""
    commands = {
        name: ("evolve", "lockpicking6", "--db", tmp_path / f"{name}.duckdb", "--quiet", *flags)
        for name, (flags, _) in OUT_OF_RANGE.items()
    }
    results = run_each(commands, tmp_path)
    for name, (_, message) in OUT_OF_RANGE.items():
        assert_user_error(results[name], message, case=name)
        assert not (tmp_path / f"{name}.duckdb").exists(), name


def test_an_integer_past_bigint_or_a_huge_timeout_is_one_line(
    cli: CliRunner, copy_pack: PackCopier, evolved: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, _ = evolved
    before = table_counts(db)
    commands: dict[str, tuple[str | Path, ...]] = {
        "resume budget": ("resume", "--db", db, "--budget", "-3"),
        "status run": ("export", "--db", db, "--run", HUGE),
        "cost run": ("cost", "--db", db, "--run", HUGE),
        "history n": ("history", "get_best_programs", "--db", db, "-n", HUGE),
        "env n": ("env", "lockpicking6", "query", "--sql", "SELECT 1", "-n", HUGE),
        "pack timeout": ("eval", copy_pack(timeout=1e308), "--program", SEED_SQL),
    }
    results = run_each(commands, tmp_path)
    expected = {
        "resume budget": "option 'budget' must be an integer in [0, 100000] (got -3)",
        "status run": f"no run {HUGE}",
        "cost run": f"no run {HUGE}",
        "history n": f"n must be a positive integer up to 100,000 (got {HUGE})",
        "env n": f"-n must be an integer in [1, 100000] (got {HUGE})",
        "pack timeout": "key 'program.timeout_seconds': must be a number in (0, 3600] (got 1e+308)",
    }
    for name, message in expected.items():
        assert_user_error(results[name], message, case=name)
    assert table_counts(db) == before


def test_a_run_with_nothing_left_to_try_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_loop import tiny_pack

    from coco_sql.cli import _print_progress
    from coco_sql.engine import IterationReport

    done = run_cli("evolve", tiny_pack(tmp_path / "tiny"), "--budget", "12", "--seed", "1", "--db",
                   tmp_path / "t.duckdb", "--json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["iterations"] == 3 and summary["stopped"].startswith("nothing left to try: ")
    assert f"run 1 stopped: {summary['stopped']}" in done.stderr.splitlines()
    assert [line[:8] for line in done.stderr.splitlines() if line.startswith("[")] == [
        "[  0/12]", "[  1/12]", "[  2/12]", "[  3/12]"
    ]  # fmt: skip
    # an iteration that went to another parent says which it left
    _print_progress(
        IterationReport(4, 8, "1-4", "1-1", 0.1, 0.08, False, "change_leaf: x", 0.14, {}, ("1-3",))
    )
    assert capsys.readouterr().err.endswith(
        "change_leaf: x  (1-3 has nothing left to try: the parent is 1-1)\n"
    )
