"""The options tables (`coco_sql.options`): each option's type, range, default and doc in one place, printable, and
in agreement with the code that takes the option."""

from __future__ import annotations

import dataclasses
import math

import pytest

from coco_sql.agent.mutator import AgentSettings
from coco_sql.errors import ConfigError, TaskError
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.options import (
    AGENT_SETTINGS,
    RUN_OPTIONS,
    TASK_NAME,
    TASK_OPTIONS,
    as_object,
    check_task_name,
    offline_settings,
    tables,
)
from coco_sql.search import POLICIES
from coco_sql.tasks import CONTRACT_TYPES, DIALECTS, SCORER_KINDS


def test_every_table_prints_as_rows_of_text() -> None:
    for title, table in tables().items():
        rows = table.rows()
        columns = ["name", "type", "range", "default", "example", "doc"]
        assert rows and all(list(row) == columns for row in rows), title
        assert all(isinstance(v, str) for row in rows for v in row.values()), title
        assert all(row["doc"] and "\n" not in row["doc"] for row in rows), title
        assert len({row["name"] for row in rows}) == len(rows), title
    islands = RUN_OPTIONS.rows()[RUN_OPTIONS.names.index("islands")]
    assert islands == {
        "name": "islands", "type": "integer", "range": "[1, 64]", "default": "2", "example": "4",
        "doc": "MAP-Elites islands, each its own archive",
    }  # fmt: skip
    assert TASK_OPTIONS["timeout_seconds"].range == "(0, 3600]"
    assert all(row["example"] for row in TASK_OPTIONS.rows())  # every coco_task option has an example
    assert TASK_OPTIONS["scorer"].range == "exact | numeric | multilabel_f1 | token_match | bound_ratio"


def test_the_tables_agree_with_the_code_that_takes_the_options() -> None:
    agent = {f.name: f.default for f in dataclasses.fields(AgentSettings)}
    assert agent == {o.name: o.default for o in AGENT_SETTINGS}
    offline = OfflineMutator()
    assert {o.name: getattr(offline, o.name) for o in offline_settings()} == {
        o.name: o.default for o in offline_settings()
    }
    assert set(TASK_OPTIONS["output_type"].choices) == set(CONTRACT_TYPES)
    assert set(TASK_OPTIONS["dialect"].choices) == set(DIALECTS)
    assert set(TASK_OPTIONS["scorer"].choices) == set(SCORER_KINDS) - {"sql"}  # sql needs an expression
    assert all(policy in RUN_OPTIONS["policy"].doc for policy in POLICIES)


@pytest.mark.parametrize(
    ("name", "value", "held"),
    [("seed", 3, 3), ("seed", 3.0, 3), ("target", 1, 1.0), ("islands", 64, 64), ("max_spend", "$5", "$5")],
)
def test_a_value_in_range_is_held_as_the_option_holds_it(name: str, value: object, held: object) -> None:
    checked = RUN_OPTIONS[name].check(value)
    assert checked == held and type(checked) is type(held)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("seed", True), ("seed", -1), ("seed", 2**31), ("seed", 2**70), ("seed", 1.5), ("seed", "1"),
        ("target", math.nan), ("target", math.inf), ("target", "NaN"), ("target", 1.01), ("islands", 0),
        ("islands", 10**8), ("history", 1), ("targeting", "nope"), ("max_spend", 10**400), ("max_spend", [1]),
        ("mutator_settings", "x"),
    ],
)  # fmt: skip
def test_a_value_out_of_type_or_range_is_one_line_naming_the_option(name: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        RUN_OPTIONS[name].check(value)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"option {name!r} must be ") and "(got " in message


def test_task_names_and_objects() -> None:
    for good in ("signals", "_x", "Reviews_2024", "a" * 64):
        assert check_task_name(good) == good and TASK_NAME.fullmatch(good)
    for bad in ("", "1x", "a" * 65, "../x", "/tmp/x", "a b", "a-b", None, 3):
        with pytest.raises(TaskError, match=r"^a task name is a letter or _"):
            check_task_name(bad, error=TaskError)
    assert as_object(None, "options") == {}
    with pytest.raises(
        ConfigError, match=r"^options must be an object such as \{'seed': 1\} \(got a list \[1\]\)$"
    ):
        as_object([1], "options")
