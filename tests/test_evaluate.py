"""Behaviour of the sandboxed evaluator on the real packs, real DuckDB and the real validator."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from coco_sql.errors import ConfigError, EvaluationError, EvaluationTimeout
from coco_sql.evaluate import REPORT_SPLITS, SEARCH_SPLITS, Evaluator
from coco_sql.sandbox import Sandbox
from coco_sql.tasks import TaskPack, load_task

LOCKPICKING6 = Path(__file__).resolve().parents[1] / "tasks" / "lockpicking6"
SEED_SQL = LOCKPICKING6 / "seed.sql"

ENDLESS_CTE = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
HUGE_JOIN = "SELECT count(*) FROM range(100000000) AS a, range(100000000) AS b"
ENDLESS_CANDIDATE = (
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
    "SELECT i.id, (SELECT count(*) FROM r) AS label FROM input AS i"
)


@pytest.fixture(scope="module")
def lockpicking6() -> TaskPack:
    return load_task("lockpicking6")


@pytest.fixture
def evaluator(lockpicking6: TaskPack) -> Iterator[Evaluator]:
    ev = Evaluator(lockpicking6, (*SEARCH_SPLITS, *REPORT_SPLITS))
    yield ev
    ev.close()


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(pd.DataFrame({"id": ["a", "b", "c"], "x": [1, 2, 3]}))
    yield box
    box.close()


# ------------------------------------------------------------------------------------------- scoring


def test_seed_scores_one_in_fifty_on_val_and_0_035_on_test(
    evaluator: Evaluator, lockpicking6: TaskPack
) -> None:
    seed = SEED_SQL.read_text()
    val = evaluator.evaluate(seed, "val")
    assert val.ok and val.score == pytest.approx(0.02)
    assert sum(r.score == 1.0 for r in val.rows) == 1
    assert [r.instance_id for r in val.rows] == lockpicking6.split("val").ids
    test = evaluator.evaluate(seed, "test")
    assert test.ok and test.score == pytest.approx(0.035)
    assert len(test.rows) == len(lockpicking6.split("test")) == 2000
    summary = test.as_split_evaluation("1-0").summary
    assert (summary.split, summary.n_rows, summary.score) == ("test", 2000, pytest.approx(0.035))


def test_a_label_that_is_not_an_integer_is_a_row_error(evaluator: Evaluator) -> None:
    outcome = evaluator.evaluate("SELECT id, 'abc' AS label FROM input", "val")
    assert outcome.score == 0.0 and len(outcome.rows) == 50
    assert all(
        r.score == 0.0 and r.error and r.error.startswith("output is not INTEGER") for r in outcome.rows
    )


def test_missing_ids_score_zero_with_a_reason(evaluator: Evaluator, lockpicking6: TaskPack) -> None:
    seed = SEED_SQL.read_text()
    full = {r.instance_id: r for r in evaluator.evaluate(seed, "val").rows}
    outcome = evaluator.evaluate(f"SELECT * FROM ({seed}) AS s WHERE id >= 'lp026'", "val")
    assert [r.instance_id for r in outcome.rows] == lockpicking6.split("val").ids
    for row in outcome.rows:
        if row.instance_id < "lp026":
            assert (row.score, row.error, row.output) == (0.0, "no output row for this id", None)
        else:
            assert (row.score, row.error) == (full[row.instance_id].score, None)


def test_duplicated_ids_score_zero_with_a_reason(evaluator: Evaluator) -> None:
    outcome = evaluator.evaluate(
        "SELECT id, 1 AS label FROM input UNION ALL SELECT id, 1 AS label FROM input WHERE id = 'lp001'",
        "val",
    )
    by_id = {r.instance_id: r for r in outcome.rows}
    assert (by_id["lp001"].score, by_id["lp001"].error) == (0.0, "2 output rows for this id (expected one)")
    assert all(r.error is None for i, r in by_id.items() if i != "lp001")


def test_a_rejected_candidate_scores_zero_on_every_row(evaluator: Evaluator) -> None:
    outcome = evaluator.evaluate("DELETE FROM input", "val")
    assert outcome.error is not None and outcome.error.startswith("rejected: DELETE is not allowed")
    assert len(outcome.rows) == 50 and all(r.score == 0.0 and r.error == outcome.error for r in outcome.rows)


# ---------------------------------------------------------------------------------------- split walls


def test_the_search_evaluator_refuses_the_test_split(lockpicking6: TaskPack) -> None:
    ev = Evaluator(lockpicking6)
    try:
        with pytest.raises(ConfigError, match="'test'"):
            ev.evaluate(SEED_SQL.read_text(), "test")
        with pytest.raises(ConfigError, match="'test'"):
            ev.probe("SELECT count(*) FROM input", "test", 5.0)
        assert ev.evaluate(SEED_SQL.read_text(), "val").ok
    finally:
        ev.close()


def test_the_train_sandbox_holds_only_train_rows(lockpicking6: TaskPack) -> None:
    ev = Evaluator(lockpicking6)
    try:
        (count, lo, hi) = ev.probe("SELECT count(*), min(id), max(id) FROM input", "train", 5.0).rows[0]
        train = lockpicking6.split("train")
        assert (count, lo, hi) == (len(train), train.ids[0], train.ids[-1])
        assert ev.probe("SELECT id FROM input WHERE id LIKE 'lt%'", "train", 5.0).rows == []
    finally:
        ev.close()


@pytest.mark.slow
def test_goemotions_train_sandbox_cannot_see_test_or_val_ids() -> None:
    task = load_task("goemotions")
    train, val, test = (set(task.split(s).ids) for s in ("train", "val", "test"))
    assert train and test and val
    assert not train & test and not train & val
    ev = Evaluator(task)
    try:
        assert ev.probe("SELECT count(*) FROM input", "train", 5.0).rows == [(len(train),)]
        for other in (sorted(test)[:5], sorted(val)[:5]):
            in_list = ", ".join(f"'{i}'" for i in other)
            assert ev.probe(f"SELECT id FROM input WHERE id IN ({in_list})", "train", 5.0).rows == []
    finally:
        ev.close()


def test_a_probe_must_be_exactly_one_select(evaluator: Evaluator) -> None:
    with pytest.raises(EvaluationError, match="one SELECT"):
        evaluator.probe("SELECT 1; SELECT 2", "val", 5.0)
    with pytest.raises(EvaluationError, match="one SELECT"):
        evaluator.probe("DROP TABLE input", "val", 5.0)
    assert evaluator.probe("SELECT count(*) FROM input", "val", 5.0).rows == [(50,)]


# ------------------------------------------------------------------------------------------ lock-down


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT * FROM read_csv('{LOCKPICKING6 / 'data' / 'test.csv'}')",
        f"SELECT * FROM '{LOCKPICKING6 / 'data' / 'test.csv'}'",
        "COPY (SELECT * FROM input) TO '{tmp}/leak.csv'",
        "ATTACH '{tmp}/other.duckdb' AS other",
        "SET enable_external_access = true",
        "RESET enable_external_access",
        "SET threads = 4",
        "RESET lock_configuration",
        "SET python_enable_replacements = true",
    ],
)
def test_sandbox_blocks_files_and_settings_even_without_the_validator(
    sandbox: Sandbox, tmp_path: Path, sql: str
) -> None:
    with pytest.raises(EvaluationError, match="query failed"):
        sandbox.run(sql.format(tmp=tmp_path), 5.0)
    assert list(tmp_path.iterdir()) == []
    assert sandbox.run("SELECT current_setting('enable_external_access')", 5.0).rows == [(False,)]


def test_sandbox_cannot_read_python_variables(sandbox: Sandbox) -> None:
    secret_frame = pd.DataFrame({"s": [42]})
    # control: an ordinary connection would find the local variable by name
    assert duckdb.connect().execute("SELECT s FROM secret_frame").fetchall() == [(42,)]
    with pytest.raises(EvaluationError, match="secret_frame"):
        sandbox.run("SELECT s FROM secret_frame", 5.0)
    assert len(secret_frame) == 1


# ------------------------------------------------------------------------------------------ deadlines


@pytest.mark.parametrize("sql", [ENDLESS_CTE, HUGE_JOIN], ids=["recursive-cte", "cross-join"])
def test_runaway_queries_stop_at_the_deadline(sandbox: Sandbox, sql: str) -> None:
    start = time.perf_counter()
    with pytest.raises(EvaluationTimeout, match="1 s deadline"):
        sandbox.run(sql, 1.0)
    assert time.perf_counter() - start < 1.0 + 2.0
    assert sandbox.run("SELECT count(*) FROM input", 1.0).rows == [(3,)]


def test_a_slow_candidate_times_out_with_zero_on_every_row(fast_pack: Path) -> None:
    task = load_task(fast_pack)
    assert task.timeout_seconds == 1.0
    ev = Evaluator(task)
    try:
        start = time.perf_counter()
        outcome = ev.evaluate(ENDLESS_CANDIDATE, "val")
        assert time.perf_counter() - start < 1.0 + 2.0
        assert outcome.error is not None and "deadline" in outcome.error
        assert len(outcome.rows) == 50 and all(
            r.score == 0.0 and r.error == outcome.error for r in outcome.rows
        )
        assert ev.evaluate(SEED_SQL.read_text(), "val").score == pytest.approx(0.02)  # sandbox still works
    finally:
        ev.close()


# ------------------------------------------------------------------------------------------- memoising


def test_re_evaluating_a_program_returns_the_memoised_outcome(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    real_run = Sandbox.run

    def counting_run(self: Sandbox, sql: str, deadline_s: float, on_timeout=None):  # type: ignore[no-untyped-def]
        runs.append(sql)
        return real_run(self, sql, deadline_s, on_timeout)

    monkeypatch.setattr(Sandbox, "run", counting_run)
    seed = SEED_SQL.read_text()
    first = evaluator.evaluate(seed, "val")
    assert len(runs) == 1
    assert evaluator.evaluate(seed, "val") is first
    assert len(runs) == 1
    other_split = evaluator.evaluate(seed, "train")
    assert other_split is not first and len(runs) == 2


def test_the_memo_holds_a_bounded_number_of_rows(lockpicking6: TaskPack) -> None:
    """Outcomes of huge splits must not pile up: past `cache_rows` the oldest outcome is dropped and re-run."""
    a, b = "SELECT id, 1 AS label FROM input", "SELECT id, 2 AS label FROM input"
    bounded = Evaluator(lockpicking6, SEARCH_SPLITS, cache_rows=60)  # lockpicking6's val split has 50 rows
    roomy = Evaluator(lockpicking6, SEARCH_SPLITS)
    try:
        for ev, kept in ((bounded, False), (roomy, True)):
            first = ev.evaluate(a, "val")
            ev.evaluate(b, "val")
            assert (ev.evaluate(a, "val") is first) is kept
            assert [r.score for r in ev.evaluate(a, "val").rows] == [r.score for r in first.rows]
    finally:
        bounded.close()
        roomy.close()


def test_a_warehouse_evaluation_answers_and_bills_what_the_duckdb_evaluation_does(tmp_path: Path) -> None:
    """The learned proxy (AI_EMBED over the input, the `examples` table and the categories, in CTEs; AI_CLASSIFY
    for the rows it is unsure of) evaluated on a warehouse (a Snowpark local-testing session: Snowflake SQL over
    the staged rows, metered with AI_COUNT_TOKENS) and in the DuckDB sandbox: the same outputs, the same
    AI_CLASSIFY calls and tokens, the same AI_EMBED calls (their tokens are counted without e5's special tokens
    there, as AI_COUNT_TOKENS counts them)."""
    pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed")
    import sqlglot
    from pack_copies import small_pack
    from snowflake.snowpark import Session
    from test_proxy import SEED

    from coco_sql.engines.snowflake.store import SnowparkStore
    from coco_sql.languages.sql import SqlLanguage
    from coco_sql.languages.sql.mutate.proxy_edits import plan, proxy_ctes, with_proxy

    task = load_task(small_pack(tmp_path, "hotpotqa_type", 24, 4))
    where = plan(sqlglot.parse_one(SEED, read="snowflake"), 0, "snowflake")
    assert where is not None
    ctes = proxy_ctes(where, "label", multi=False, model="snowflake-arctic-embed-m-v1.5")
    proxy = with_proxy(where, ctes, 0.6, "snowflake")(sqlglot.parse_one(SEED, read="snowflake"))
    session = Session.builder.config("local_testing", True).create()
    local = Evaluator(task)
    remote = Evaluator(task, language=SqlLanguage(task, SnowparkStore(session).candidate_engine()))
    try:
        for code in (SEED, proxy.sql(dialect="snowflake")):
            duck, warehouse = local.evaluate(code, "val"), remote.evaluate(code, "val")
            assert duck.ok and warehouse.ok and list(warehouse.outputs) == list(duck.outputs)
            assert duck.usage is not None and warehouse.usage is not None
            for key, line in duck.usage.lines.items():
                billed = warehouse.usage.lines[key]
                assert billed.calls == line.calls > 0 and billed.cache_hits == 0
                if key[0] == "AI_CLASSIFY":
                    assert (billed.input_tokens, billed.output_tokens) == (
                        line.input_tokens + line.cached_input_tokens,
                        line.output_tokens + line.cached_output_tokens,
                    )
            assert set(warehouse.usage.lines) == set(duck.usage.lines)
    finally:
        local.close()
        remote.close()
        session.close()
