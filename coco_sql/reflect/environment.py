"""The mutator's environment E_0 (CoCoEvolve Section 2.2): live tools over the TRAINING split only.

`check` validates a draft without running it, `test_draft` scores it on training rows, and `probe` runs a
read-only query over the training rows in the same locked-down sandbox. Nothing here can reach validation or test
rows: the environment is bound to the evaluator's 'train' sandbox, which holds no other split's rows.
"""

from __future__ import annotations

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.evaluate import Evaluator, Outcome, QueryResult

TRAIN = "train"


class DraftEnvironment:
    def __init__(self, evaluator: Evaluator, *, probe_deadline_s: float = 5.0) -> None:
        self._evaluator = evaluator
        self._probe_deadline_s = probe_deadline_s
        self.drafts_tested = 0
        self.probes_run = 0

    @property
    def output_column(self) -> str:
        return self._evaluator.task.contract.output

    @property
    def output_type(self) -> str:
        return self._evaluator.task.contract.type

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


__all__ = ["TRAIN", "DraftEnvironment", "EvaluationError"]
