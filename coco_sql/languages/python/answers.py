"""What a Python program answered, wherever it ran (coco-sql's sandbox, or a warehouse's UDF): the split's
instances as plain values, and each answer made an output by the harness's `measure` here, in coco-sql's own
process (`languages.python.language` says why)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from coco_sql.errors import EvaluationError
from coco_sql.languages.base import RunResult

Measure = Callable[[Any, Mapping[str, Any]], Any]


def finished(
    answers: list[tuple[object, object]],
    failures: dict[str, str],
    elapsed_ms: float,
    measure: Measure | None,
    instances: Mapping[str, Mapping[str, Any]],
) -> RunResult:
    """A program's run over the split from what it answered (wherever it ran): each answer as the harness's
    `measure` makes it an output, here, on `instances` (this process's own copy), a refused one its instance's
    failure; EvaluationError when no instance was finished. An id that is not an instance of the split is left
    out when measured (the sandbox has only these)."""
    outputs = answers
    if measure is not None:
        outputs = []
        for instance_id, answer in answers:
            instance = instances.get(str(instance_id))
            if instance is None:
                continue
            try:
                outputs.append((instance_id, measure(answer, instance)))
            except Exception as error:  # the harness refuses the answer: the instance's failure
                failures[str(instance_id)] = one_line_reason(error)
    if not outputs and failures:
        instance_id, reason = next(iter(failures.items()))
        raise EvaluationError(f"the program failed on every instance; on {instance_id}: {reason}")
    return RunResult(outputs, elapsed_ms, failures)


def one_line_reason(error: BaseException) -> str:
    text = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}{': ' + text if text else ''}"


def instance_rows(inputs: pd.DataFrame, columns: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """A split's input frame as `(id, {column: value})` pairs of plain Python values (arrays become lists)."""
    records = inputs[["id", *columns]].to_dict("records")
    return [(str(record["id"]), {c: _plain(record[c]) for c in columns}) for record in records]


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value
