"""The mutator's environment E_0 (CoCoEvolve Section 2.2): live tools over the TRAINING split only.

`check` validates a draft without running it, `test_draft` scores it on training rows, and `probe` runs a
read-only query over the training rows in the same engine as the candidates (the locked-down DuckDB sandbox, or
the warehouse over the staged training rows when the warehouse runs them). Nothing here can reach validation or test
rows: the environment is bound to the evaluator's 'train' sandbox, which holds no other split's rows, and
`labels_sql` writes out the training split's labels only, so that a probe can score outputs inside the engine.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from coco_sql.errors import CandidateRejected, ConfigError, EvaluationError
from coco_sql.evaluate import Evaluator, Outcome
from coco_sql.plugin_loader import SANDBOX_DIALECT, load_kind
from coco_sql.sandbox import QueryResult
from coco_sql.store.records import EvaluationRow
from coco_sql.tasks import TaskPack

TRAIN = "train"

# How `labels_sql` writes each contract type: the JSON type that `from_json` reads, and the DuckDB type of
# `expected`. Numbers travel as text and are cast by DuckDB (exact: integers, and shortest round-trip floats).
_LABEL_TYPES: dict[str, tuple[str, str]] = {
    "INTEGER": ('["VARCHAR"]', "HUGEINT"),
    "DOUBLE": ('["VARCHAR"]', "DOUBLE"),
    "VARCHAR": ('["VARCHAR"]', "VARCHAR"),
    "BOOLEAN": ('["BOOLEAN"]', "BOOLEAN"),
    "VARCHAR[]": ('[["VARCHAR"]]', "VARCHAR[]"),
}
_HUGEINT_LIMIT = 2**127


class DraftEnvironment:
    def __init__(self, evaluator: Evaluator, *, probe_deadline_s: float | None = None) -> None:
        self._evaluator = evaluator
        # Probes get the same deadline as a candidate run, so that load on the machine does not decide a run.
        self._probe_deadline_s = probe_deadline_s or evaluator.task.timeout_seconds
        self.drafts_tested = 0
        self.probes_run = 0
        self._labels_sql: str | None = None

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

    def observe(self, code: str, instance_id: str) -> EvaluationRow:
        """A program's evaluation row for one training row: from its whole-split outcome when the evaluator
        still holds it, else from a run over that row alone (a program that reads other rows, an aggregate,
        may answer differently there)."""
        outcome = self._evaluator.memoised(code, TRAIN) or self._evaluator.evaluate(
            code, TRAIN, [instance_id]
        )
        return outcome.row(instance_id)

    def on_rows(self, ids: Sequence[str]) -> DraftEnvironment:
        """The same tools over only the training rows `ids` (Algorithm 1's T_t under minibatches): a sandbox of
        their own, so probes, draft tests and the labels see nothing else. Close it with `close`."""
        evaluator = Evaluator(
            self.task.with_rows(TRAIN, ids),
            (TRAIN,),
            ai=self._evaluator.ai,
            language=self._evaluator.language,
        )
        return DraftEnvironment(evaluator, probe_deadline_s=self._probe_deadline_s)

    def close(self) -> None:
        """Close the sandboxes of an environment made by `on_rows` (the run's own closes with its evaluator)."""
        self._evaluator.close()

    def probe(self, sql: str) -> QueryResult:
        """Run one read-only DuckDB query over the training rows (table `input`). Raises EvaluationError."""
        self.probes_run += 1
        return self._evaluator.probe(sql, TRAIN, self._probe_deadline_s)

    def score_outputs(self, rows: list[tuple[object, object]]) -> Outcome:
        """Score (id, output) pairs against the training labels, as `test_draft` scores a program's rows."""
        return self._evaluator.score_rows(TRAIN, rows)

    def program_sql(self, code: str) -> str | None:
        """The query `test_draft` runs for `code` in the training sandbox (rows of id VARCHAR and output, as the
        SQL runner wraps a program), for a probe that tests a draft inside the engine (`probe_draft`). None when
        programs do not run in this sandbox (a warehouse engine, a Python task). Raises CandidateRejected."""
        language = self._evaluator.language
        drafts = load_kind(language.name).in_engine_drafts  # KindPlugin.in_engine_drafts
        if drafts is None or not drafts.runs_here(language):
            return None
        return drafts.query(self._evaluator.check(code).runnable, self.output_column)

    def program_columns(self, code: str) -> QueryResult:
        """Every column `code`'s query selects on the training rows, run as its programs run (in the DuckDB
        sandbox or in the warehouse, in the task's dialect): for a draft that reads more than its output column
        (a proxy's confidence). Counts as a probe. Raises CandidateRejected and EvaluationError."""
        self.probes_run += 1
        return self._evaluator.program_columns(code, TRAIN, self._probe_deadline_s)

    @property
    def reference_tables(self) -> frozenset[str]:
        """The tables a program of the task may read beside `input` (none for a kind that has no such idea)."""
        return getattr(self._evaluator.language, "reference_tables", frozenset())

    def runnable(self, code: str) -> str:
        """The DuckDB query the validator makes of `code`, for a probe that reads more than its output column
        (a proxy's confidence). Raises CandidateRejected."""
        return self._evaluator.check(code).runnable

    def probe_draft(self, sql: str) -> QueryResult:
        """`probe` for a query that tests a draft on the training rows inside the engine: counts as a draft test."""
        self.drafts_tested += 1
        return self.probe(sql)

    def labels_sql(self) -> str | None:
        """The training rows' labels as a parenthesised SQL subquery with columns (pos, id, expected), for a probe
        that scores outputs inside the engine (`languages.sql.mutate.hypothesis_scoring`).

        `pos` is the row's place in the order `test_draft` scores rows in, `id` is VARCHAR and `expected` has the
        contract's DuckDB type (INTEGER labels as HUGEINT). The text holds the training split's labels and nothing
        else; it is built once. None when a label cannot be written exactly (a NUL character, an integer past
        HUGEINT), or when the probes run on a warehouse (the scoring queries are DuckDB's own: `list_reduce`,
        DESCRIBE): the caller then scores in Python, with the same results.
        """
        if self._labels_sql is None:
            in_duckdb = (
                self._evaluator.probe_dialect(TRAIN) == SANDBOX_DIALECT
            )  # the scoring SQL is DuckDB's own
            self._labels_sql = (
                in_duckdb and _labels_sql(self._evaluator.task.split(TRAIN).expected, self.output_type)
            ) or ""
        return self._labels_sql or None

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
        is refused with the same message whether or not it exists elsewhere. A kind with a `draft_view` (dbt:
        which target, key and column mismatch) answers in its own shape beside the train score and error.
        """
        outcome = self.test_draft(code)
        by_id = {row.instance_id: row for row in outcome.rows}
        picked: list[EvaluationRow] | None = None
        if instance_ids is not None:
            unknown = [i for i in instance_ids if i not in by_id]
            if unknown:
                raise ConfigError(f"no training instance {unknown[0]!r}")
            picked = [by_id[i] for i in list(instance_ids)[:limit]]
        view = load_kind(self.task.language).draft_view  # KindPlugin.draft_view
        if view is not None:
            shown = view(self.task, outcome.rows, limit, picked)
            return {"train_score": outcome.score, "error": outcome.error, **shown}
        chosen = picked
        if chosen is None:
            chosen = sorted(outcome.rows, key=lambda r: (r.score >= 1.0, r.instance_id))[:limit]
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


def _labels_sql(expected: dict[str, object], contract_type: str) -> str | None:
    """(pos, id, expected) from two JSON literals, which DuckDB reads far faster than a VALUES list."""
    kind = _LABEL_TYPES.get(contract_type.upper())
    if kind is None:
        return None
    values: list[object] = []
    for value in expected.values():
        if contract_type.upper() == "INTEGER":
            if not isinstance(value, int) or abs(value) >= _HUGEINT_LIMIT:
                return None
            values.append(str(value))
        elif contract_type.upper() == "DOUBLE":
            if not isinstance(value, float | int) or math.isnan(value):
                return None
            values.append(repr(float(value)))
        else:
            values.append(value)
    ids_json, values_json = json.dumps(list(expected)), json.dumps(values)
    if "\\u0000" in ids_json or "\\u0000" in values_json:
        return None
    json_type, sql_type = kind

    def literal(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    return (
        f"(SELECT pos, id, CAST(value AS {sql_type}) AS expected FROM (SELECT unnest(range(len(ids))) AS pos, "
        f"unnest(ids) AS id, unnest(vals) AS value FROM (SELECT from_json({literal(ids_json)}, '[\"VARCHAR\"]') "
        f"AS ids, from_json({literal(values_json)}, {literal(json_type)}) AS vals)))"
    )


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
