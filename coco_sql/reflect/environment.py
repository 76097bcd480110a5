"""The mutator's environment E_0 (CoCoEvolve Section 2.2): live tools over the TRAINING split only.

`check` validates a draft without running it, `test_draft` scores it on training rows, and `probe` runs a
read-only query over the training rows in the same locked-down sandbox. Nothing here can reach validation or test
rows: the environment is bound to the evaluator's 'train' sandbox, which holds no other split's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coco_sql.errors import CandidateRejected, ConfigError, EvaluationError
from coco_sql.evaluate import Evaluator, Outcome
from coco_sql.sandbox import QueryResult
from coco_sql.tasks import TaskPack

TRAIN = "train"


class DraftEnvironment:
    def __init__(self, evaluator: Evaluator, *, probe_deadline_s: float | None = None) -> None:
        self._evaluator = evaluator
        # Probes get the same deadline as a candidate run, so that load on the machine does not decide a run.
        self._probe_deadline_s = probe_deadline_s or evaluator.task.timeout_seconds
        self.drafts_tested = 0
        self.probes_run = 0

    @property
    def task(self) -> TaskPack:
        """The task being evolved (its description, contract and input columns; its rows stay behind the
        evaluator)."""
        return self._evaluator.task

    @property
    def output_column(self) -> str:
        return self._evaluator.task.contract.output

    @property
    def output_type(self) -> str:
        return self._evaluator.task.contract.type

    @property
    def allowed_functions(self) -> frozenset[str]:
        """Functions the task enables on top of the base allow-list (e.g. AI_CLASSIFY)."""
        return self._evaluator.task.allowed_functions

    @property
    def dialect(self) -> str:
        return self._evaluator.task.dialect

    def check(self, code: str) -> str | None:
        """The validator's message for `code`, or None when it would be accepted."""
        try:
            self._evaluator.check(code)
        except CandidateRejected as rejection:
            return str(rejection)
        return None

    def test_draft(self, code: str) -> Outcome:
        """Score a draft on every training row (outputs against expected)."""
        self.drafts_tested += 1
        return self._evaluator.evaluate(code, TRAIN)

    def probe(self, sql: str) -> QueryResult:
        """Run one read-only DuckDB query over the training rows (table `input`). Raises EvaluationError."""
        self.probes_run += 1
        return self._evaluator.probe(sql, TRAIN, self._probe_deadline_s)

    def score_outputs(self, rows: list[tuple[object, object]]) -> Outcome:
        """Score (id, output) pairs against the training labels, as `test_draft` scores a program's rows."""
        return self._evaluator.score_rows(TRAIN, rows)

    # -- the tools as an agent calls them: JSON-ready results ------------------------------------------------
    def query(self, sql: str, limit: int = 100) -> dict[str, Any]:
        """Read-only SQL over the training rows: {columns, rows (at most `limit`), truncated}."""
        result = self.probe(sql)
        return {
            "columns": list(result.columns),
            "rows": [[_plain(v) for v in row] for row in result.rows[:limit]],
            "truncated": len(result.rows) > limit,
        }

    def show_draft(
        self, code: str, instance_ids: Sequence[str] | None = None, limit: int = 10
    ) -> dict[str, Any]:
        """Run a draft and show outputs against expected on up to `limit` training rows.

        Without `instance_ids`, the rows shown are the draft's failures first. An id that is not a training row
        is refused with the same message whether or not it exists elsewhere.
        """
        outcome = self.test_draft(code)
        by_id = {row.instance_id: row for row in outcome.rows}
        if instance_ids is None:
            chosen = sorted(outcome.rows, key=lambda r: (r.score >= 1.0, r.instance_id))[:limit]
        else:
            unknown = [i for i in instance_ids if i not in by_id]
            if unknown:
                raise ConfigError(f"no training instance {unknown[0]!r}")
            chosen = [by_id[i] for i in list(instance_ids)[:limit]]
        return {
            "train_score": outcome.score,
            "error": outcome.error,
            "rows": [
                {
                    "id": r.instance_id,
                    "output": r.output,
                    "expected": r.expected,
                    "score": r.score,
                    "error": r.error,
                }
                for r in chosen
            ],
        }


def _plain(value: Any) -> Any:
    """A JSON-ready version of a DuckDB cell."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


__all__ = ["TRAIN", "DraftEnvironment", "EvaluationError"]
