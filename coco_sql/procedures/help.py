"""`CALL coco_help()`: the procedures, and `CALL coco_help('coco_task')`: one procedure's options, from SQL.

Why (issue 26): an analyst found coco_task's options and defaults (timeout 10 s, train 0.5, test 0.2, test rows
carved first) only by reading `tasks/from_rows.py` and `tasks/splits.py`. The options' types, ranges, defaults,
examples and docs live once, in `coco_sql.options` (`OptionTable.rows()`); this prints those rows, and the
arguments of each procedure from `ARGUMENTS` below (a test holds them equal to the procedures' signatures in
DuckDB and in Snowflake). Every row has the columns of `COLUMNS`; a procedure's row in the list has type
`procedure`, its arguments as its range and an example call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from coco_sql.errors import ConfigError
from coco_sql.options import (
    AI_OPTIONS,
    RUN_OPTIONS,
    TASK_OPTIONS,
    Option,
    OptionTable,
    kind_task_options,
    tables,
)

COLUMNS = (
    ("name", "VARCHAR"),
    ("type", "VARCHAR"),
    ("range", "VARCHAR"),
    ("default", "VARCHAR"),
    ("example", "VARCHAR"),
    ("doc", "VARCHAR"),
)


def _arguments(title: str, *options: Option) -> OptionTable:
    return OptionTable(title, options)


_RUN_ID = Option("run_id", "integer", None, "the run (default: the latest)", nullable=True, example="1")
ARGUMENTS: Mapping[str, OptionTable] = {
    "coco_task": _arguments(
        "coco_task(name, source, options)",
        Option("name", "string", None, "the task's name: a letter or _, then letters, digits or _",
               example="'questions'"),
        Option("source", "string", None, "the labelled rows: a table name or one SELECT query (NULL for a dbt "
               "task, whose tables are its options)",
               example="'questions'"),
        Option("options", "object", None, "the task's options: the rows options.* below",
               example="{'label': 'label', 'seed_program': '...'}"),
    ),
    "coco_evolve": _arguments(
        "coco_evolve(task, budget, options)",
        Option("task", "string", None, "a registered task or a task pack", example="'questions'"),
        replace(RUN_OPTIONS["budget"], example="10"),
        Option("options", "object", {}, "the run's options: the rows options.* below",
               example="{'seed': 1}"),
    ),
    "coco_resume": _arguments(
        "coco_resume(run_id, budget, max_spend)",
        _RUN_ID,
        Option("budget", "integer", None, "a larger budget (default: the run's)", nullable=True, example="100"),
        Option("max_spend", "amount", None, "a larger spend limit for a paused run (default: the run's)",
               nullable=True, example="'$5'"),
    ),
    "coco_status": _arguments("coco_status(run_id)", _RUN_ID),
    "coco_export": _arguments(
        "coco_export(run_id, form, max_cost, source)",
        _RUN_ID,
        Option("form", "choice", "sql", "the form of the champion's code",
               choices=("sql", "duckdb_view", "duckdb_macro", "snowflake_view", "snowflake_function", "dbt",
                        "snowflake_ai_function", "snowflake_experiment"),
               example="'duckdb_view'"),
        Option("max_cost", "amount", None, "the best program within this deploy cost per 1,000 rows instead",
               nullable=True, example="'500 calls'"),
        Option("source", "string", None, "the table the export reads (default: the task's source table)",
               nullable=True, example="'questions_test'"),
    ),
    "coco_eval": _arguments(
        "coco_eval(task, program, split)",
        Option("task", "string", None, "a registered task or a task pack", example="'questions'"),
        Option("program", "string", None, "the program's SQL", example="'SELECT id, ''bridge'' AS label FROM input'"),
        Option("split", "choice", "val", "the split to score it on", choices=("train", "val", "test"),
               example="'test'"),
    ),
    "coco_report": _arguments("coco_report(run_id)", _RUN_ID),
    "coco_help": _arguments(
        "coco_help(topic)",
        Option("topic", "string", None, "a procedure (its arguments and options), a dbt task's options "
               "('coco_task dbt'), or the settings of 'offline mutator', 'agent mutator' or 'history tools'",
               nullable=True, example="'coco_task'"),
    ),
}  # fmt: skip

_SUMMARIES = {
    "coco_task": ("register a task over a table's labelled rows", "(task, rows, train, val, test)"),
    "coco_evolve": (
        "start a run and evolve it to its budget; progress in coco_progress",
        "the run's summary row",
    ),
    "coco_resume": ("continue a run (to a larger budget, or under a larger spend limit)", "the summary row"),
    "coco_status": ("one row per run", "(run_id, task, seed, budget, status, iterations, best_val)"),
    "coco_export": ("the champion as a view, macro, table function or dbt model", "(..., code, findings)"),
    "coco_eval": ("score one program on one split", "(task, split, score, rows, failing_rows, error)"),
    "coco_report": ("the run's HTML report", "(run_id, html)"),
    "coco_help": ("this list; a topic's options", "(name, type, range, default, example, doc)"),
}
# The tables of a procedure's `options` argument, printed after its arguments as rows `options.<name>`.
_OPTIONS: Mapping[str, tuple[OptionTable, ...]] = {
    "coco_task": (TASK_OPTIONS,),
    "coco_evolve": (RUN_OPTIONS, AI_OPTIONS),
}
_SETTINGS = (
    "coco_task spec",
    "offline mutator",
    "agent mutator",
    "prompt_only mutator",
    "history tools",
)


def topics() -> list[str]:
    """Every topic `coco_help` takes: the procedures, each kind's own coco_task options ('coco_task dbt'), the
    settings tables."""
    return [*ARGUMENTS, *(f"coco_task {name}" for name in kind_task_options()), *_SETTINGS]


def _kind_rows(shown: set[str]) -> list[dict[str, str]]:
    """coco_task's options that only some kinds take (`KindPlugin.task_options`), each once, its doc saying
    which kind: 'kind dbt: ...'. The options `shown` already (the shared ones) are left out."""
    rows = []
    for name, table in kind_task_options().items():
        for row in table.rows():
            if row["name"] not in shown:
                shown.add(row["name"])
                rows.append({**row, "doc": f"kind {name}: {row['doc']}"})
    return rows


def coco_help(store: Any, topic: str | None) -> list[dict[str, str]]:
    """The rows of `topic` (module docstring); `store` is unused (every procedure takes one)."""
    if topic is None:
        return [_procedure(name) for name in ARGUMENTS]
    key = topic.strip()
    if key in ARGUMENTS:
        options = [row for table in _OPTIONS.get(key, ()) for row in table.rows()]
        if key == "coco_task":
            options += _kind_rows({row["name"] for row in options})
        return ARGUMENTS[key].rows() + [{**row, "name": f"options.{row['name']}"} for row in options]
    if key in topics():
        return tables()[key].rows()
    raise ConfigError(f"coco_help has no topic {topic!r} (topics: {', '.join(topics())})")


def _procedure(name: str) -> dict[str, str]:
    doc, returns = _SUMMARIES[name]
    table = ARGUMENTS[name]
    options = f"; its arguments and options: CALL coco_help('{name}')"
    return {
        "name": name,
        "type": "procedure",
        "range": table.title[len(name) :],
        "default": "",
        "example": f"CALL {name}({', '.join(o.example for o in table)})",
        "doc": f"{doc}; returns {returns}{options}",
    }
