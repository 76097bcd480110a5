"""What the coding agent's draft test shows of a dbt project's training rows (the kind's `draft_view`).

A row instance's output and expected value are JSON rows (`task.row_json`); shown as they are stored, they are
two JSON texts of a whole row each, and the agent has to diff them itself. This view does the diff, target by
target, with the same evidence the offline repair mutator reads (`evidence.Evidence`: which columns mismatch, by
what ratio, which values are swapped, which rows are missing or null):

    targets     per target model: its training keys, how many match, how many have no row, and the columns
                that mismatch with their counts; the patterns the evidence finds (a unit factor, swapped values,
                NULLs, missing rows)
    data_tests  the data tests that fail, when the task scores them
    rows        at most `limit` failing rows, one of each kind of failure before a second of any: (target,
                columns that differ) kinds, the largest first; each row names its target, its key, and for each
                column that differs the output and the expected value (a column within the task's tolerance
                is not listed)

Everything here is read from the training rows the draft test ran on; nothing names another split's keys.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from coco_sql.languages.dbt.compare import Tolerance, _agree
from coco_sql.languages.dbt.evidence import Evidence, decode_row
from coco_sql.languages.dbt.task import DbtTask

if TYPE_CHECKING:
    from coco_sql.store.records import EvaluationRow
    from coco_sql.tasks import TaskPack

_PATTERNS = 5  # swaps listed per target


def draft_view(
    task: TaskPack, rows: Sequence[EvaluationRow], limit: int, chosen: Sequence[EvaluationRow] | None
) -> dict[str, Any]:
    """The answer beside the train score (module docstring); `chosen`: exactly these rows."""
    data = task.kind_data
    assert isinstance(data, DbtTask)
    tolerances = {t.model: t.tolerances for t in data.targets}
    by_target: dict[str, list[EvaluationRow]] = {t.model: [] for t in data.targets}
    tests: list[EvaluationRow] = []
    extra: dict[str, Any] = {}
    for row in rows:
        if row.instance_id.endswith("#extra") and row.instance_id[:-6] in by_target:
            found = decode_row(row.output)
            extra[row.instance_id[:-6]] = found.get("__extra_rows__") if isinstance(found, dict) else None
            continue
        model = row.instance_id.split(":", 1)[0]
        by_target.get(model, tests).append(row)
    shown = [
        _row(r, tolerances) for r in (chosen if chosen is not None else _failures_first(rows, tolerances))
    ]
    answer: dict[str, Any] = {"targets": {m: _target(rs, tolerances[m]) for m, rs in by_target.items()}}
    for model, count in extra.items():
        answer["targets"][model]["extra_rows"] = count  # rows returned that no expected row has
    if tests:
        failing = sorted(r.instance_id for r in tests if r.score < 1.0)
        answer["data_tests"] = {"passing": len(tests) - len(failing), "failing": failing[:20]}
    answer["rows"] = shown[:limit]
    return answer


def _target(rows: Sequence[EvaluationRow], tolerance: Mapping[str, Tolerance]) -> dict[str, Any]:
    evidence = Evidence.of(
        [r.instance_id for r in rows], [r.output for r in rows], [r.expected for r in rows]
    )
    differing: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for row in rows:
        differs = _differs(row, tolerance)
        if differs is None:
            if row.score < 1.0:
                errors[row.error or "no row for this key"] += 1
        else:
            differing.update(list(differs))
    summary: dict[str, Any] = {
        "keys": len(rows),
        "matching": sum(1 for r in rows if r.score >= 1.0),
        "without_row": sum(errors.values()),
        "mismatching_columns": dict(differing.most_common()),
    }
    if errors:
        summary["why_no_row"] = [f"{n} keys: {reason}" for reason, n in errors.most_common(3)]
    patterns = []
    scale = evidence.scale()
    if scale is not None:
        factor, columns = scale
        patterns.append(f"output / expected is about {factor:g} in most mismatching rows of "
                        f"{', '.join(sorted(columns))}")  # fmt: skip
    for (column, got, wanted), n in evidence.swaps.most_common(_PATTERNS):
        patterns.append(f"{column}: {got!r} where {wanted!r} is expected ({n} rows)")
    for column, n in evidence.nulls.most_common():
        patterns.append(f"{column}: NULL where a value is expected ({n} rows)")
    if patterns:
        summary["patterns"] = patterns
    return summary


def _differs(row: EvaluationRow, tolerance: Mapping[str, Tolerance]) -> dict[str, Any] | None:
    """Column -> {output, expected} for each compared column that differs; None when the key has no row."""
    wanted, found = decode_row(row.expected), decode_row(row.output)
    if not isinstance(wanted, dict) or not isinstance(found, dict):
        return None
    return {
        column: {"output": found.get(column), "expected": value}
        for column, value in wanted.items()
        if column not in found or not _agree(found[column], value, tolerance.get(column, Tolerance()))
    }


def _row(row: EvaluationRow, tolerances: Mapping[str, Mapping[str, Tolerance]]) -> dict[str, Any]:
    model, _, key = row.instance_id.partition(":")
    if model not in tolerances:  # a data test: `test:KIND:MODEL.COLUMN`
        return {"id": row.instance_id, "data_test": key, "status": decode_row(row.output), "expected": "pass"}
    shown: dict[str, Any] = {"id": row.instance_id, "target": model, "key": key}
    differs = _differs(row, tolerances[model])
    if differs is None:
        shown["no_row"] = row.error or "the model produced no row for this key"
    elif differs:
        shown["differs"] = differs
    else:
        shown["matches"] = True
    return shown


def _failures_first(
    rows: Sequence[EvaluationRow], tolerances: Mapping[str, Mapping[str, Tolerance]]
) -> list[EvaluationRow]:
    """The failing rows, one of each kind (target, differing columns) in turn, the largest kinds first."""
    kinds: dict[tuple[str, str], list[EvaluationRow]] = {}
    for row in sorted(rows, key=lambda r: r.instance_id):
        if row.score >= 1.0 or row.instance_id.endswith("#extra"):
            continue
        model = row.instance_id.split(":", 1)[0]
        differs = _differs(row, tolerances[model]) if model in tolerances else None
        what = "no row" if differs is None else json.dumps(sorted(differs))
        kinds.setdefault((model, what), []).append(row)
    queues = sorted(kinds.values(), key=lambda q: -len(q))
    picked: list[EvaluationRow] = []
    depth = 0
    while any(depth < len(q) for q in queues):
        picked += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return picked
