"""How close a dbt pipeline is (issue 39): hand-made cases of the scoring rule in `languages.dbt.compare`.

- a row scores the share of its compared columns that agree, so a partial fix counts;
- a target scores over the union of keys: a missing row and an extra row (or a repeated key) cost the same;
- keys of several columns match as one;
- a program's score is per target, then weighted over targets, with the data tests' share on top;
- lists and structs compare by value, and the export keeps repeated raw rows and LIST columns.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from coco_sql.languages.dbt.compare import Tolerance, _agree, compare_rows, row_share
from coco_sql.languages.dbt.task import EXPECTED_ROWS, EXTRA_ROWS, DbtTask, RowScorer, Target, aggregate
from coco_sql.languages.dbt.validate import DbtSpec

EXPECTED = pd.DataFrame({"id": [1, 2, 3], "a": [10, 20, 30], "b": ["x", "y", "z"]})


def test_a_partial_row_counts_and_missing_and_extra_rows_cost_the_same() -> None:
    actual = pd.DataFrame({"id": [1, 2, 4], "a": [10, 20, 40], "b": ["x", "wrong", "w"]})
    score = compare_rows(actual, EXPECTED, "id", ["a", "b"])
    assert score.matched == 1 and score.missing == ("3",) and score.unexpected == ("4",)
    assert score.wrong == {"2": ("b",)}
    assert score.partial == pytest.approx(
        (1 + 2 / 3 + 0) / 4
    )  # row 1, two of row 2's three columns (its key agrees), row 3 missing, row 4 extra
    assert score.score == pytest.approx(1 / 4)  # the all-columns rule, for comparison


def test_a_repeated_key_scores_zero_and_its_repeat_is_an_extra_row() -> None:
    actual = pd.DataFrame({"id": [1, 1, 2, 3], "a": [10, 10, 20, 30], "b": ["x", "x", "y", "z"]})
    score = compare_rows(actual, EXPECTED, "id", ["a", "b"])
    assert score.partial == pytest.approx(2 / 4)


def test_a_key_of_several_columns() -> None:
    expected = pd.DataFrame(
        {"c": [1, 1, 2], "month": ["2020-01-01", "2020-02-01", "2020-01-01"], "mrr": [5, 6, 7]}
    )
    actual = pd.DataFrame(
        {
            "c": [1, 1, 2],
            "month": pd.to_datetime(["2020-01-01", "2020-02-01", "2020-01-01"]),
            "mrr": [5.0, 0, 7],
        }
    )
    score = compare_rows(actual, expected, ["c", "month"], ["mrr"])
    assert (
        score.matched == 2
        and list(score.wrong) == ["1|2020-02-01"]
        and score.partial == pytest.approx((2 + 2 / 3) / 3)
    )  # the wrong row agrees on its two key columns


def test_row_share_with_tolerance_nulls_and_nested_values() -> None:
    tolerance = {"amount": Tolerance(abs_tol=0.01)}
    assert row_share({"amount": 1.004, "tags": None}, {"amount": 1.0, "tags": None}, tolerance) == 1.0
    assert row_share({"amount": 1.5}, {"amount": 1.0, "tags": "a"}, tolerance) == 0.0
    assert _agree(np.array([1, 2]), [1.0, 2.0], Tolerance())  # a LIST from DuckDB and one read from JSON
    assert _agree({"a": 1, "b": [2]}, {"b": [2.0], "a": "1"}, Tolerance())  # a STRUCT, keys in any order
    assert not _agree(np.array([1, 2]), [2, 1], Tolerance())
    assert _agree("2020-01-01 00:00:00", pd.Timestamp("2020-01-01"), Tolerance())


def test_the_row_scorer_gives_column_shares_and_the_extra_rows_instance() -> None:
    scorer = RowScorer({})
    row = json.dumps({"a": 1, "b": "x", "c": None})
    assert scorer.score([json.dumps({"a": 1, "b": "y", "c": None}), None], [row, row]) == [
        pytest.approx(2 / 3),
        0.0,
    ]
    extra = json.dumps({EXPECTED_ROWS: 30})
    outputs = [json.dumps({EXTRA_ROWS: n}) for n in (0, 10, -1)]
    assert scorer.score(outputs, [extra] * 3) == [1.0, pytest.approx(30 / 40), 0.0]


def _task(weights: dict[str, float], tests_weight: float = 0.1) -> DbtTask:
    targets = tuple(Target(m, ("id",), ("a",), {}, w) for m, w in weights.items())
    return DbtTask(DbtSpec(), targets, {}, (), tests_weight=tests_weight)


def test_a_program_scores_per_target_then_by_weight() -> None:
    # a small dimension wholly wrong next to a large fact wholly right: half, not 2 %
    ids = ["dim:1", "dim:2", *(f"fact:{i}" for i in range(98)), "dim#extra", "fact#extra"]
    scores = [0.0, 0.0, *([1.0] * 98), 1.0, 1.0]
    assert aggregate(_task({"dim": 1, "fact": 1}), ids, scores) == pytest.approx(0.5)
    assert aggregate(_task({"dim": 1, "fact": 3}), ids, scores) == pytest.approx(0.75)
    # the extra-rows instance scales its target: 98 right rows and 98 extra ones make that target half right
    halved = [*scores[:-1], 0.5]
    assert aggregate(_task({"dim": 1, "fact": 1}), ids, halved) == pytest.approx(0.25)
    # data tests take their share of the whole
    with_tests = aggregate(_task({"dim": 1, "fact": 1}, 0.2), [*ids, "test:unique:dim.id"], [*scores, 0.0])
    assert with_tests == pytest.approx(0.8 * 0.5)


def test_the_export_keeps_repeated_raw_rows_and_list_columns() -> None:
    import duckdb

    from coco_sql.languages.dbt.export import _json_lines, _whole_sources

    rows = "(1, ['a'], {'x': 1}), (1, ['a'], {'x': 1}), (2, ['b', 'c'], {'x': 2})"
    events = duckdb.sql(
        f"SELECT * FROM (VALUES {rows}) t(user, tags, s)"
    ).df()  # as a pack's sources are read
    users = pd.DataFrame({"id": [1, 2]})
    sources = {
        "train": {"s.events": events.iloc[:2], "s.users": users},
        "val": {"s.events": events.iloc[2:], "s.users": users},
        "test": {"s.events": events.iloc[:0], "s.users": users},
    }
    data = SimpleNamespace(sources=sources, cut=frozenset({"s.events"}))
    whole = _whole_sources(data)  # type: ignore[arg-type]
    assert len(whole["s.events"]) == 3 and len(whole["s.users"]) == 2  # the repeated raw row stays repeated
    lines = [json.loads(line) for line in _json_lines(whole["s.events"]).splitlines()]
    assert lines[2] == {"user": 2, "tags": ["b", "c"], "s": {"x": 2}}
