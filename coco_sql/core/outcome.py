"""What running a program over one split produced, scored row by row, before it is tied to a program id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from coco_sql.core.program import Program
from coco_sql.llm.usage import Usage
from coco_sql.store.records import EvaluationColumns, EvaluationRow, ProgramScore, SplitEvaluation


@dataclass(frozen=True)
class Outcome:
    """What running a program on a split produced, before it is tied to a program id.

    `rows` are the evaluator's `EvaluationColumns`: one column per field (`ids`, `scores`, `outputs`,
    `expected`, `errors`), read by every hot path, and `EvaluationRow`s only for a caller that iterates them
    (built once). An Outcome made from a tuple of rows (`replace(outcome, rows=...)`) reads its columns from
    those rows."""

    split: str
    rows: Sequence[EvaluationRow]
    score: float
    error: str | None  # program-level diagnostic (rejection, runtime error, deadline), else None
    latency_ms: float
    program: Program | None = None  # the validated program, when it passed validation
    usage: Usage | None = None  # what its AI calls cost (None: the program made none)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ids(self) -> Sequence[str]:
        """Instance ids, in split order (for the whole split: the evaluator's own tuple, shared)."""
        return self._columns[0]

    @property
    def scores(self) -> np.ndarray:
        """Row scores (float64), aligned with `ids`. Shared: do not change it."""
        return self._columns[1]

    @property
    def outputs(self) -> Sequence[str | None]:
        """Each row's output as stored JSON text, None where there is none."""
        return self._columns[2]

    @property
    def expected(self) -> Sequence[str | None]:
        """Each row's expected value as stored JSON text."""
        return self._columns[3]

    @property
    def errors(self) -> Sequence[str | None]:
        return self._columns[4]

    def row(self, instance_id: str) -> EvaluationRow:
        """The row of `instance_id` (ValueError when it has none), built alone: what a caller that wants one
        row should read instead of scanning `rows`, which builds every row of the split (2.5 us each)."""
        return self.rows[self.ids.index(instance_id)]

    @property
    def n_errors(self) -> int:
        errors = self.errors
        return len(errors) - errors.count(None)

    @cached_property
    def _columns(self) -> tuple[Sequence[str], np.ndarray, Sequence[Any], Sequence[Any], Sequence[Any]]:
        rows = self.rows
        if isinstance(rows, EvaluationColumns):
            return rows.instance_ids, rows.scores, rows.outputs, rows.expected, rows.errors
        return (
            tuple(r.instance_id for r in rows),
            np.array([r.score for r in rows], dtype=np.float64),
            [r.output for r in rows],
            [r.expected for r in rows],
            [r.error for r in rows],
        )

    def as_split_evaluation(self, program_id: str) -> SplitEvaluation:
        usage = self.usage
        if usage is None and not isinstance(self.rows, EvaluationColumns):  # rows made elsewhere may count
            calls = sum(r.model_calls for r in self.rows)
            tokens = (sum(r.input_tokens for r in self.rows), sum(r.output_tokens for r in self.rows))
        else:  # the evaluator's rows count no AI use of their own: it is the evaluation's `usage`
            calls = usage.model_calls if usage else 0
            tokens = (usage.input_tokens, usage.output_tokens) if usage else (0, 0)
        return SplitEvaluation(
            summary=ProgramScore(
                program_id=program_id,
                split=self.split,
                score=self.score,
                n_rows=len(self.rows),
                n_errors=self.n_errors,
                model_calls=calls,
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                latency_ms=self.latency_ms,
                cache_hits=usage.cache_hits if usage else 0,
            ),
            rows=self.rows,
            usage=usage,
        )
