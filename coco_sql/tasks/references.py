"""Reference tables: read-only tables a task's programs may read beside `input` (issue 15, parts 2 and 3).

For a SQL task that enables AI functions there is one, `examples`: the training rows with their labels (`id`,
the input columns, and the contract's output column holding the expected value in the contract's type). It is
what few-shot examples and learned proxies are drawn from *by reference*: a program joins it, so hundreds of
examples are never written inline, and a deployment ships the table next to the query (the Snowflake export
creates it from the same rows).

Only training rows are in it, whichever split a program runs on: validation and test rows never are. On the
training split a program that reads it sees each row's own label, so a program that uses it must leave the row
itself out (the offline mutator's proxy joins on `examples.id <> input.id`); pack ids are unique across splits,
so on the other splits that condition drops nothing. Under minibatches the mutator's environment holds only the
iteration's training sample, and so does its `examples`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from coco_sql.errors import TaskError

if TYPE_CHECKING:
    from coco_sql.tasks.loader import TaskPack

EXAMPLES = "examples"
TRAIN = "train"


def has_references(task: TaskPack) -> bool:
    """Whether `task`'s programs get reference tables: its kind says (SQL: tasks that enable AI functions)."""
    from coco_sql.plugins import kind

    wanted = kind(task.language).references
    return wanted is not None and wanted(task)


def reference_columns(task: TaskPack) -> dict[str, dict[str, str]]:
    """name -> {column: DuckDB type} of each reference table (the validator's schema)."""
    if not has_references(task):
        return {}
    output = task.contract.output
    if output in task.input_columns or output == "id":
        raise TaskError(f"task '{task.name}': the output column {output!r} is also an input column")
    return {EXAMPLES: {"id": "VARCHAR", **task.input_columns, output: task.contract.type}}


def reference_tables(task: TaskPack) -> dict[str, pd.DataFrame]:
    """name -> rows of each reference table (the sandbox's tables); built from the task's training split."""
    columns = reference_columns(task)
    if not columns:
        return {}
    train = task.split(TRAIN)
    rows = train.inputs.copy()
    rows[task.contract.output] = [train.expected[str(i)] for i in rows["id"]]
    return {EXAMPLES: rows[list(columns[EXAMPLES])]}
