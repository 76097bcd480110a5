"""The evaluator's columnar outcomes (warehouse scale, issue 12): what they store is byte for byte what the row
path they replaced stored, and the hot paths (the summary, the store, the run state) never build row objects.

The reference is the evaluator's row path before columns, kept here verbatim (`old_score`, `old_failed`, the old
`_insert_columns` statement): one `EvaluationRow` per row, `coerce_output` and `to_json` per row, 13-tuples
unnested from lists. Both sides run the same programs on real lockpicking6 rows in real DuckDB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from coco_sql import api
from coco_sql.engine import RunConfig
from coco_sql.engine.run_state import RunState
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.evaluate import SEARCH_SPLITS, Evaluator, Outcome
from coco_sql.languages import language_for
from coco_sql.languages.sql.mutate.hypothesis_scoring import ParentRows, closeness
from coco_sql.store import rows as store_rows
from coco_sql.store.records import (
    EvaluationColumns,
    EvaluationRow,
    IterationBatch,
    ProgramRecord,
    RunRecord,
    json_texts,
    to_json,
)
from coco_sql.store.schema import schema_statements
from coco_sql.tasks import Split, TaskPack, coerce_output, load_task
from coco_sql.tasks.coerce import coerce_outputs

SEED_SQL = (Path(__file__).resolve().parents[1] / "tasks" / "lockpicking6" / "seed.sql").read_text()

# Programs whose rows cover every rule of the row contract.
PROGRAMS = {
    "seed": SEED_SQL,
    "text labels": "SELECT id, 'abc' AS label FROM input",  # row errors: not an INTEGER
    "numeric text": "SELECT id, CAST(length(code) AS VARCHAR) AS label FROM input",  # converts: '6' -> 6
    "halves": "SELECT id, length(code) / 4 AS label FROM input",  # 1.5: not integral, a row error
    "nulls": "SELECT id, CASE WHEN code LIKE '1%' THEN NULL ELSE 3 END AS label FROM input",
    "missing": f"SELECT * FROM ({SEED_SQL}) AS s WHERE id >= 'lp026'",  # no output row for half the ids
    "duplicated": "SELECT id, 1 AS label FROM input UNION ALL SELECT id, 2 AS label FROM input WHERE id < 'lp005'",
    "extra ids": "SELECT id, 2 AS label FROM input UNION ALL SELECT 'zz' || id, 2 AS label FROM input "
    "WHERE id <= 'lp010' UNION ALL SELECT id, 3 AS label FROM input WHERE id = 'lp004'",  # and one row error
    "reordered": "SELECT id, 4 AS label FROM input ORDER BY code DESC",
    "runtime error": "SELECT id, CAST('x' || code AS INTEGER) AS label FROM input",  # program_error
    "rejected": "DELETE FROM input",  # program_error before it runs
}


# -- the row path before columns, verbatim ------------------------------------------------------------------
def old_score(
    task: TaskPack,
    data: Split,
    expected_json: Mapping[str, str],
    result_rows: list[tuple[object, ...]],
    elapsed_ms: float,
    row_errors: Mapping[str, str] | None = None,
) -> tuple[tuple[EvaluationRow, ...], float]:
    produced: dict[str, list[object]] = {}
    for instance_id, value in result_rows:
        produced.setdefault(str(instance_id), []).append(value)
    ids = list(data.expected)
    per_row_ms = elapsed_ms / max(len(ids), 1)
    outputs: list[object | None] = []
    errors: list[str | None] = []
    for instance_id in ids:
        values = produced.get(instance_id, [])
        if not values:
            outputs.append(None)
            errors.append((row_errors or {}).get(instance_id, "no output row for this id"))
        elif len(values) > 1:
            outputs.append(None)
            errors.append(f"{len(values)} output rows for this id (expected one)")
        else:
            try:
                outputs.append(coerce_output(values[0], task.contract.type))
                errors.append(None)
            except ValueError as error:
                outputs.append(None)
                errors.append(f"output is not {task.contract.type}: {error}")
    expected = [data.expected[i] for i in ids]
    scores = task.scorer.score(outputs, expected)
    extra = len(set(produced) - set(data.expected))
    ok, row_error = (
        {"status": status} | ({"extra_ids": extra} if extra else {}) for status in ("ok", "row_error")
    )
    rows = tuple(
        EvaluationRow(
            instance_id=instance_id,
            score=float(score),
            output=None if output is None else to_json(output),
            expected=expected_json[instance_id],
            error=error,
            observation=ok if error is None else row_error,
            latency_ms=per_row_ms,
        )
        for instance_id, output, error, score in zip(ids, outputs, errors, scores, strict=True)
    )
    mean = sum(r.score for r in rows) / len(rows) if rows else 0.0
    return rows, mean


def old_failed(data: Split, expected_json: Mapping[str, str], message: str) -> tuple[EvaluationRow, ...]:
    observation = {"status": "program_error"}
    return tuple(
        EvaluationRow(instance_id, 0.0, None, expected_json[instance_id], message, observation)
        for instance_id in data.expected
    )


OLD_TYPES = ("BIGINT", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR", "VARCHAR", "VARCHAR", "JSON",
             "BIGINT", "BIGINT", "BIGINT", "DOUBLE")  # fmt: skip


def old_insert(con: duckdb.DuckDBPyConnection, run_id: int, program_id: str, split: str, rows: Any) -> None:
    """`iteration_rows` and `_insert_columns` of the evaluations table before columns."""
    tuples = [
        (run_id, program_id, split, r.instance_id, r.score, r.output, r.expected, r.error, to_json(r.observation),
         r.model_calls, r.input_tokens, r.output_tokens, r.latency_ms)
        for r in rows
    ]  # fmt: skip
    if not tuples:
        return
    columns = [list(column) for column in zip(*tuples, strict=True)]
    selects = ", ".join(f"unnest(?::{t}[])::JSON" if t == "JSON" else f"unnest(?::{t}[])" for t in OLD_TYPES)
    con.execute(f"INSERT INTO evaluations SELECT {selects}", columns)


STORED = (
    "SELECT run_id, program_id, split, instance_id, score, output, expected, error, CAST(observation AS VARCHAR), "
    "model_calls, input_tokens, output_tokens, latency_ms FROM evaluations ORDER BY program_id, split, instance_id"
)


def reference_database() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    for statement in schema_statements():
        con.execute(statement)
    return con


class Runners:
    """The reference's runners, one per set of rows (a split or a sample), each started once (a sandbox worker) and
    used for every program run on those rows, as the evaluator uses its own."""

    def __init__(self, task: TaskPack) -> None:
        self.task = task
        self._open: dict[tuple[str, ...], Any] = {}

    def on(self, data: Split) -> Any:
        key = tuple(data.expected)
        if key not in self._open:
            self._open[key] = language_for(self.task).runner(data, None)
        return self._open[key]

    def close(self) -> None:
        for runner in self._open.values():
            runner.close()


def reference_rows(task: TaskPack, code: str, data: Split, outcome: Outcome, runners: Runners) -> Any:
    """What the row path made of `code` on `data`, given the new outcome's wall time (timings differ per run)."""
    expected_json = {i: to_json(v) for i, v in data.expected.items()}
    if outcome.error is not None:
        return old_failed(data, expected_json, outcome.error), 0.0
    language = language_for(task)
    try:
        program = language.validate(code)
    except CandidateRejected as rejection:  # pragma: no cover - the outcome would have said so
        raise AssertionError(f"the evaluator accepted what the validator rejects: {rejection}") from None
    try:
        result = runners.on(data).run(program, task.timeout_seconds)
    except EvaluationError as error:  # pragma: no cover - the outcome would have said so
        raise AssertionError(f"the reference run failed: {error}") from None
    return old_score(task, data, expected_json, result.outputs, outcome.latency_ms, result.errors)


@pytest.fixture(scope="module")
def lockpicking6() -> TaskPack:
    return load_task("lockpicking6")


@pytest.fixture
def evaluator(lockpicking6: TaskPack) -> Iterator[Evaluator]:
    ev = Evaluator(lockpicking6, SEARCH_SPLITS)
    yield ev
    ev.close()


@pytest.fixture
def runners(lockpicking6: TaskPack) -> Iterator[Runners]:
    opened = Runners(lockpicking6)
    yield opened
    opened.close()


# -- byte identity ----------------------------------------------------------------------------------------
def test_every_row_rule_stores_the_row_paths_text(
    lockpicking6: TaskPack,
    evaluator: Evaluator,
    runners: Runners,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whole splits and a sample, each kind of row error, extra ids and program errors: the rows as rows, the
    summary and the stored table equal the row path's. Chunks of 7 rows make every evaluation span several."""
    monkeypatch.setattr(store_rows, "EVALUATION_CHUNK_ROWS", 7)
    sample = ["lp003", "lp004", "lp017", "lp030", "lp049"]
    store = DuckDBStore(tmp_path / "new.duckdb")
    store.create_run(RunRecord(1, "lockpicking6", "sha256:x", 1, 1, {}))
    reference = reference_database()
    evaluations = []
    for n, (name, code) in enumerate(PROGRAMS.items()):
        for split, ids in (("train", None), ("val", None), ("val", sample)):
            pid = f"1-{n}" if ids is None else f"1-{n}s"
            outcome = evaluator.evaluate(code, split, ids)
            data = lockpicking6.split(split) if ids is None else lockpicking6.split(split).subset(ids)
            rows, mean = reference_rows(lockpicking6, code, data, outcome, runners)
            assert tuple(outcome.rows) == rows, name
            assert outcome.score == mean, name
            summary = outcome.as_split_evaluation(pid).summary
            assert (summary.n_rows, summary.n_errors) == (len(rows), sum(r.error is not None for r in rows))
            evaluations.append(outcome.as_split_evaluation(pid))
            old_insert(reference, 1, pid, split, rows)
    assert {e.summary.program_id for e in evaluations} >= {"1-0", "1-10s"}
    store.write_iteration(IterationBatch(1, 0, evaluations=tuple(evaluations)))
    stored = store.query(STORED).itertuples(index=False, name=None)
    expected = reference.execute(STORED).fetchall()
    assert len(expected) == 11 * (50 + 50 + 5)
    assert list(stored) == expected
    assert {row[8] for row in expected} == {
        '{"status": "ok"}',
        '{"status": "row_error"}',
        '{"extra_ids": 10, "status": "ok"}',
        '{"extra_ids": 10, "status": "row_error"}',
        '{"extra_ids": 2, "status": "ok"}',  # the sample's rows lp003 and lp004
        '{"extra_ids": 2, "status": "row_error"}',
        '{"status": "program_error"}',
    }
    store.close()


def test_a_run_stores_what_the_row_path_stored(
    lockpicking6: TaskPack, runners: Runners, tmp_path: Path
) -> None:
    """Every evaluation a lockpicking6 run stored, with minibatches (sampled and full evaluations, the seed, a
    stopped child), equals the row path's evaluation of the same program on the same rows, to the byte (each
    row's timing is its evaluation's wall time, from program_scores, over its rows)."""
    db = tmp_path / "run.duckdb"
    api.evolve("lockpicking6", db=db, budget=5, options={"seed": 1, "minibatch": 20, "islands": 1})
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute(STORED).fetchall()
        programs = dict(con.execute("SELECT program_id, code FROM programs").fetchall())
        scores = {
            (pid, split): (score, n, wall)
            for pid, split, score, n, wall in con.execute(
                "SELECT program_id, split, score, n_rows, latency_ms FROM program_scores"
            ).fetchall()
        }
    by_evaluation: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in stored:
        by_evaluation.setdefault((row[1], row[2]), []).append(row)
    assert {n for _, n, _ in scores.values()} == {20, 50, 2000}  # sampled, full, and the test split
    for (pid, split), rows in by_evaluation.items():
        ids = [row[3] for row in rows]
        data = lockpicking6.split(split)
        data = data if len(ids) == len(data) else data.subset(ids)
        error = rows[0][7] if rows[0][8] == '{"status": "program_error"}' else None
        score, n, wall = scores[pid, split]
        outcome = Outcome(
            split, (), score, error, wall
        )  # what reference_rows reads: the error and the timing
        reference, mean = reference_rows(lockpicking6, programs[pid], data, outcome, runners)
        con = reference_database()
        old_insert(con, 1, pid, split, reference)
        assert rows == con.execute(STORED).fetchall(), (pid, split)
        assert (score, n) == (mean if error is None else 0.0, len(rows))


# -- the hot paths read columns ---------------------------------------------------------------------------
def test_summaries_writes_and_the_run_state_never_build_rows(
    lockpicking6: TaskPack, evaluator: Evaluator, tmp_path: Path
) -> None:
    outcomes = {split: evaluator.evaluate(SEED_SQL, split) for split in SEARCH_SPLITS}
    state = RunState(RunConfig.from_dict({"budget": 1}), lockpicking6)
    record = ProgramRecord("1-0", 1, 0, None, None, SEED_SQL, "sql", "duckdb", 0, "c", None, None, True, None)
    state.add(record, outcomes)
    store = DuckDBStore(tmp_path / "s.duckdb")
    store.create_run(RunRecord(1, "lockpicking6", "sha256:x", 1, 1, {}))
    batch = IterationBatch(1, 0, evaluations=tuple(o.as_split_evaluation("1-0") for o in outcomes.values()))
    store.write_iteration(batch)
    store.close()
    for split, outcome in outcomes.items():
        assert isinstance(outcome.rows, EvaluationColumns)
        assert "materialised" not in outcome.rows.__dict__  # no EvaluationRow was made
        scores = state.train_rows["1-0"] if split == "train" else state.val_rows["1-0"]
        assert scores is outcome.scores  # the whole split in split order: the array itself
        assert not outcome.scores.flags.writeable
        assert outcome.ids is evaluator.evaluate("SELECT id, 0 AS label FROM input", split).ids  # shared


def test_a_sampled_outcome_is_looked_up_and_the_other_rows_score_zero(
    lockpicking6: TaskPack, evaluator: Evaluator
) -> None:
    sample = ("lp002", "lp040")
    state = RunState(RunConfig.from_dict({"budget": 1}), lockpicking6)
    full = evaluator.evaluate(SEED_SQL, "val")
    outcomes = {split: evaluator.evaluate(SEED_SQL, split, sample) for split in SEARCH_SPLITS}
    record = ProgramRecord(
        "1-1", 1, 1, None, None, SEED_SQL, "sql", "duckdb", 0, "c", None, None, False, None
    )
    state.add(record, outcomes)
    expected = np.where(np.isin(state.val_ids, sample), full.scores, 0.0)
    assert np.array_equal(state.val_rows["1-1"], expected)
    assert state._index("train") is state._index("val")  # lockpicking6's splits are the same rows


def test_an_outcome_made_from_rows_reads_its_columns_from_them(evaluator: Evaluator) -> None:
    """The offline mutator rebuilds an outcome from a tuple of rows (`replace(outcome, rows=...)`)."""
    outcome = evaluator.evaluate(SEED_SQL, "train")
    rows = tuple(reversed(outcome.rows))
    rebuilt = replace(outcome, rows=rows, score=0.5)
    assert list(rebuilt.ids) == [r.instance_id for r in rows]
    assert rebuilt.scores.tolist() == [r.score for r in rows]
    assert rebuilt.n_errors == 0 and rebuilt.as_split_evaluation("1-0").summary.score == 0.5
    assert list(rebuilt.rows) == list(rows)


def test_the_memo_pins_at_most_cache_rows_rows(lockpicking6: TaskPack) -> None:
    ev = Evaluator(lockpicking6, SEARCH_SPLITS, cache_rows=120)
    try:
        for k in range(6):
            ev.evaluate(f"SELECT id, {k} AS label FROM input", "train")
            assert sum(len(o.ids) for o in ev._memo.values()) == ev._memo_rows <= 120
    finally:
        ev.close()


# -- vectorised conversions -------------------------------------------------------------------------------
COLUMNS: dict[str, list[object]] = {
    "INTEGER": [1, None, 2, 3],
    "DOUBLE": [1.5, None, float("nan"), float("inf"), -0.0],
    "VARCHAR": ["a", None, "b c", "ü"],
    "BOOLEAN": [True, None, False],
    "VARCHAR[]": [["a", "b"], None, []],
}
STRAYS: list[object] = [True, np.int64(7), np.float64(2.0), 2.5, "4", " 5 ", Decimal("6"), "x", float("nan"),
                        np.nan, [1, "a"], "[\"p\", \"q\"]", "p;q", 0, 1, b"bytes"]  # fmt: skip


@pytest.mark.parametrize("contract", sorted(COLUMNS))
def test_column_conversion_equals_the_per_row_function(contract: str) -> None:
    for values in (COLUMNS[contract], COLUMNS[contract] + STRAYS, STRAYS):
        converted, failures = coerce_outputs(values, contract)
        for k, value in enumerate(values):
            try:
                want: object = coerce_output(value, contract)
            except ValueError as error:
                assert (converted[k], failures[k]) == (None, str(error))
            else:
                assert k not in failures and converted[k] == want and type(converted[k]) is type(want)


def test_json_texts_are_to_json_texts() -> None:
    for values in (
        [1, 22, -3],
        ["a", "é", '"q"'],
        [1, None],
        ["a", None],
        [True, 1, "x", 1.5, [1, "b"], None],
    ):
        assert json_texts(values) == [None if v is None else to_json(v) for v in values]


def test_net_gain_on_columns_equals_the_row_rule(evaluator: Evaluator) -> None:
    """ParentRows' shortcut (the parent's own ids: compare the output columns) and its lookup by id give the
    row rule's gain, fixes and breaks."""
    parent = evaluator.evaluate(SEED_SQL, "train")
    draft = evaluator.evaluate(
        "SELECT id, CASE WHEN code LIKE '4%' THEN 1 WHEN code LIKE '7%' THEN NULL ELSE 2 END AS label FROM input",
        "train",
    )
    held = frozenset({"lp010", "lp011"})
    for numeric in (True, False):
        before = {r.instance_id: r for r in parent.rows}
        gain, fixed, broken = 0.0, 0, 0
        for row in draft.rows:
            old = before[row.instance_id]
            if row.instance_id in held or row.output == old.output:
                continue
            delta = closeness(row, numeric) - closeness(old, numeric)
            gain += delta if delta > 0 else 1.5 * delta
            fixed, broken = fixed + (delta > 0), broken + (delta < 0)
        shortcut = ParentRows(parent, numeric).score(draft, 1.5, held)
        reordered = replace(draft, rows=tuple(reversed(draft.rows)))  # other ids: looked up by id
        by_id = ParentRows(parent, numeric).score(reordered, 1.5, held)
        assert (shortcut.gain, shortcut.fixed, shortcut.broken) == (gain, fixed, broken)
        assert by_id == shortcut and fixed + broken > 0


def test_chunks_hold_at_most_their_size_and_keep_the_row_order(evaluator: Evaluator) -> None:
    outcomes = [evaluator.evaluate(SEED_SQL, split) for split in SEARCH_SPLITS]
    batch = IterationBatch(1, 0, evaluations=tuple(o.as_split_evaluation("1-0") for o in outcomes))
    chunks = list(store_rows.evaluation_chunks(batch, 30))
    assert [len(chunk[0]) for chunk in chunks] == [30, 30, 30, 10]
    rows = [row for chunk in chunks for row in zip(*chunk, strict=True)]
    assert rows == store_rows.iteration_rows(batch, datetime(2026, 1, 1))["evaluations"]
    assert [row[3] for row in rows] == [*outcomes[0].ids, *outcomes[1].ids]
    assert json.loads(rows[0][8]) == {"status": "ok"}


def test_a_sample_is_the_splits_subset(lockpicking6: TaskPack, evaluator: Evaluator) -> None:
    """The evaluator finds a sample's rows by position; `Split.subset` scans the split: the same rows."""
    for split in SEARCH_SPLITS:
        for ids in (
            ["lp040", "lp002", "lp002", "nope"],
            ["lp017"],
            [],
            list(lockpicking6.split(split).expected),
        ):
            mine, theirs = evaluator._split(split, ids), lockpicking6.split(split).subset(ids)
            assert mine.inputs.equals(theirs.inputs) and list(mine.inputs.dtypes) == list(
                theirs.inputs.dtypes
            )
            assert list(mine.expected.items()) == list(theirs.expected.items())


def test_one_row_is_read_without_building_the_others(evaluator: Evaluator) -> None:
    outcome = evaluator.evaluate("SELECT id, 'abc' AS label FROM input", "val")
    row = outcome.row("lp007")
    assert "materialised" not in outcome.rows.__dict__
    assert row == next(r for r in outcome.rows if r.instance_id == "lp007")
    assert row.error is not None and row.error.startswith("output is not INTEGER")
    with pytest.raises(ValueError):
        outcome.row("nope")
