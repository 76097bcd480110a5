"""Score hypotheses and drafts inside the engine: one aggregate row per hypothesis comes back, not one per row.

The screening query (`screening`) gives every hypothesis's output on every training row. Scoring them in Python
costs about 14 us per row per hypothesis (convert, serialise, parse, compare with the parent), which at 5,000
training rows and 100 hypotheses is 7 s per iteration. Here the scoring is SQL over the hypotheses' outputs joined
with the training labels (`DraftEnvironment.labels_sql`), run as one probe in the training sandbox:

    c_hi = closeness of hypothesis h on row i: the row score, or -|output - expected| for numeric contracts
           (-1e6 for a missing output), exactly as `closeness` computes it from an evaluated row;
    d_hi = c_hi - c_pi, where p is the parent: one more hypothesis number in the screening query, with no arm;
    gain_h = sum over rows i, in training order, of (d_hi if d_hi > 0 else lambda * d_hi)   (`net_gain`).

The sum is a left fold in row order over the non-zero terms (`list_reduce` over an ordered `list`), the very
sequence of float additions `net_gain` makes, so the gains, and the order of hypotheses they give, are bit for bit
those of the Python path (adding a zero never changes a float sum that is not -0.0, and this one starts at +0.0).
A draft is scored the same way (`DraftScorer`: the draft as hypothesis 0, the parent as 1), and its training score
is the sum of its non-zero row scores, added up in Python exactly as the evaluator adds all of them.

The row rules are written for the output types and scorers where SQL and Python provably agree (`_row_rule`):
numeric closeness for INTEGER and DOUBLE contracts over integer and float outputs, equality for VARCHAR, BOOLEAN
and VARCHAR[] labels, and example F1 over printable-ASCII label lists. Everything else (DECIMAL and text outputs
of numeric contracts, token_match and sql scorers of text contracts, numbers past 2^53, non-finite values, a
warehouse engine) keeps the Python path, which each function takes by itself: results never depend on which ran.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import ne

from sqlglot import exp

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.evaluate import Outcome
from coco_sql.languages.sql.mutate.edits import Edit
from coco_sql.languages.sql.mutate.scoring_sql import (
    EXACT_LIMIT,
    FLOAT_TYPES,
    INTEGER_TYPES,
    MISSING,
    _column_types,
    _same_rows,
    _scored,
    _scoring_sql,
)
from coco_sql.languages.sql.mutate.screening import screening_sql, split_by_hypothesis
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.store.records import EvaluationRow

NUMERIC_TYPES = {"INTEGER", "BIGINT", "DOUBLE", "FLOAT", "DECIMAL"}
ENGINE_DRAFT_ROWS = 1000  # training rows from which a draft is tested in the engine (`DraftScorer`)
_NON_FINITE = frozenset({"Infinity", "-Infinity", "NaN"})


@dataclass(frozen=True)
class HypothesisScore:
    """What one hypothesis does to the training rows, against the parent."""

    gain: float  # net row-level gain, regressions weighted by the penalty (`net_gain`)
    fixed: int  # rows it moves closer to their label
    broken: int  # rows it moves away from it


def closeness(row: EvaluationRow, numeric: bool) -> float:
    """How close a row is to its label: its score, or -|output - expected| for numeric contracts."""
    return _closeness(row.score, row.output, row.expected, numeric)


def _closeness(score: float, output: str | None, expected: str | None, numeric: bool) -> float:
    """`closeness` of a row given as its columns (score, output and expected JSON text)."""
    if not numeric:
        return score
    try:
        return -abs(float(json.loads(output)) - float(json.loads(expected)))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return MISSING if output is None else -1e3


def net_gain(
    parent: Outcome, draft: Outcome, numeric: bool, penalty: float, held_out: frozenset[str] = frozenset()
) -> float:
    """Row-level gain with regressions weighted up: sum max(0, d_i - p_i) - lambda * sum max(0, p_i - d_i).

    d_i and p_i are the draft's and the parent's closeness on row i: the row score, or for numeric contracts
    minus the absolute error, which also credits an edit that moves a row toward its label without reaching
    it (interacting rules often need two edits before a row is exact). A draft that fixes the target while
    breaking rows the parent had is usually a surrogate rule that fits the sample, not the rule behind it;
    lambda > 1 makes the mutator prefer edits that do no harm.
    """
    return ParentRows(parent, numeric).score(draft, penalty, held_out).gain


class ParentRows:
    """The parent's evaluated rows, as columns; each draft outcome is scored against them (`net_gain`).

    A draft row whose output equals the parent's has the same closeness, so its term is zero and is skipped
    (exactly: see the module docstring), unless that closeness is not finite (an infinite or NaN number), where
    x - x is not zero. So only the rows a draft changes are parsed, for the draft and for the parent. A draft
    of the parent's rows in the parent's order (the evaluator's own ids: the usual case) finds them with one
    C-level comparison of the two output columns, not a loop over every row."""

    def __init__(self, parent: Outcome, numeric: bool) -> None:
        self.numeric = numeric
        self._ids = parent.ids
        self._scores: list[float] = parent.scores.tolist()
        self._outputs, self._expected = parent.outputs, parent.expected
        self._index: dict[str, int] | None = None  # id -> parent row, for drafts of other rows
        self._not_finite: list[int] | None = None  # parent rows whose closeness is not finite

    def score(
        self, draft: Outcome, penalty: float, held_out: frozenset[str] = frozenset()
    ) -> HypothesisScore:
        if not draft.ok:
            return HypothesisScore(float("-inf"), 0, 0)
        ids, outputs, expected, numeric = draft.ids, draft.outputs, draft.expected, self.numeric
        scores: list[float] = draft.scores.tolist()
        if ids is self._ids or (len(ids) == len(self._ids) and ids == self._ids):
            changed = compress(range(len(ids)), map(ne, outputs, self._outputs))
            rows = sorted({*changed, *self._non_finite()}) if numeric else list(changed)
            pairs = [(k, k) for k in rows]
        else:
            index = self._by_id()
            pairs = [(k, index.get(instance_id)) for k, instance_id in enumerate(ids)]
        gain, fixed, broken = 0.0, 0, 0
        for k, p in pairs:
            if held_out and ids[k] in held_out:
                continue
            if p is not None and outputs[k] == self._outputs[p] and self._finite(p):
                continue
            delta = _closeness(scores[k], outputs[k], expected[k], numeric) - (
                0.0
                if p is None
                else _closeness(self._scores[p], self._outputs[p], self._expected[p], numeric)
            )
            gain += delta if delta > 0 else penalty * delta
            fixed, broken = fixed + (delta > 0), broken + (delta < 0)
        return HypothesisScore(gain, fixed, broken)

    def _by_id(self) -> dict[str, int]:
        if self._index is None:
            self._index = {instance_id: p for p, instance_id in enumerate(self._ids)}
        return self._index

    def _non_finite(self) -> list[int]:
        if self._not_finite is None:
            self._not_finite = [p for p in range(len(self._ids)) if not self._finite(p)]
        return self._not_finite

    def _finite(self, p: int) -> bool:
        """Whether parent row `p`'s closeness is finite, without parsing it: scores are in [0, 1], and a number's
        JSON (`to_json`) is not finite only as these three words."""
        return not self.numeric or (
            self._outputs[p] not in _NON_FINITE and self._expected[p] not in _NON_FINITE
        )


def score_hypotheses(
    env: DraftEnvironment,
    query: exp.Select,
    edits: Sequence[Edit],
    parent: Outcome,
    numeric: bool,
    penalty: float,
) -> list[HypothesisScore] | None:
    """Each screenable edit's score against the parent, in edit order; None when the screening query fails.

    In the engine when the task's row rule is written in SQL for the output's type, else in Python."""
    screen = screening_sql(query, edits, env.output_column, baseline=True)
    labels = env.labels_sql()
    if labels is not None:
        same_rows = _same_rows(query)
        rows = _scored(
            env,
            lambda rule: _scoring_sql(labels, screen, len(edits), rule, penalty, screen, same_rows=same_rows),
            screen,
            slice(-1, None),
            numeric,
        )
        if rows is not None and len(rows) == len(edits):
            return [HypothesisScore(float(row[1]), int(row[2]), int(row[3])) for row in rows]
    try:
        result = env.probe(screening_sql(query, edits, env.output_column))
    except EvaluationError:
        return None
    baseline = ParentRows(parent, numeric)
    return [
        baseline.score(env.score_outputs(rows), penalty)
        for rows in split_by_hypothesis(result.rows, len(edits))
    ]


class DraftScorer:
    """Tests drafts on the training rows against one parent: (net gain, training score) per draft, the values
    `net_gain` and `test_draft(code).score` give, computed inside the engine when the row rule allows.

    In the engine a draft costs what `test_draft` costs in queries (its validation, one probe); a draft whose
    probe fails is then tested by `test_draft`, for the evaluator's own verdict (and counted twice). Below
    `ENGINE_DRAFT_ROWS` training rows the evaluator's Python scoring is cheaper than compiling the scoring query
    (measured on lockpicking-style rows: 7 against 31 ms a draft at 50 rows, 81 against 32 ms at 2,000)."""

    def __init__(
        self, env: DraftEnvironment, parent_code: str, parent: Outcome, numeric: bool, penalty: float
    ) -> None:
        self._env, self._numeric, self._penalty = env, numeric, penalty
        self._parent_code = parent_code
        self._parent_rows = ParentRows(parent, numeric)
        self._parent_sql: str | None = None
        self._parent_read = len(parent.ids) < ENGINE_DRAFT_ROWS  # below it, never in the engine

    def test(self, code: str) -> tuple[float, float]:
        in_engine = self._in_engine(code)
        if in_engine is not None:
            return in_engine
        outcome = self._env.test_draft(code)
        return self._parent_rows.score(outcome, self._penalty).gain, outcome.score

    def _in_engine(self, code: str) -> tuple[float, float] | None:
        env = self._env
        if not self._parent_read:
            self._parent_read = True
            try:
                self._parent_sql = env.program_sql(self._parent_code)
            except CandidateRejected:
                self._parent_sql = None
        labels = env.labels_sql()
        if self._parent_sql is None or labels is None:
            return None
        try:
            draft_sql = env.program_sql(code)
        except CandidateRejected:  # test_draft gives the rejection's outcome
            return None
        if draft_sql is None:
            return None
        both = f"SELECT d.output, p.output FROM ({draft_sql}) AS d, ({self._parent_sql}) AS p"
        screen = (
            f"SELECT 0, id, output FROM ({draft_sql}) AS d "
            f"UNION ALL SELECT 1, id, output FROM ({self._parent_sql}) AS p"
        )
        penalty = self._penalty
        rows = _scored(
            env,
            lambda rule: _scoring_sql(labels, screen, 1, rule, penalty, both, same_rows=False, scores=True),
            both,
            slice(0, 2),
            self._numeric,
            run=env.probe_draft,
            need_score=True,
        )
        if rows is None or len(rows) != 1:
            return None
        _, gain, _, _, _, n_rows, scores, _ = rows[0]
        return float(gain), (sum(float(s) for s in scores) / n_rows if n_rows else 0.0)


def output_changes(
    env: DraftEnvironment, query: exp.Select, edits: Sequence[Edit]
) -> list[tuple[int, int, float]] | None:
    """(hypothesis, training row position, output - the parent's output) for every row where a screened edit
    changes a numeric output, by hypothesis then row; None when that is not computed here (the caller reads the
    screening rows itself). What `joint_fit` needs from the screening, without its rows."""
    screen = screening_sql(query, edits, env.output_column, baseline=True)
    labels = env.labels_sql()
    types = _column_types(env, screen) if labels is not None else None
    if labels is None or not types or types[-1] not in INTEGER_TYPES + FLOAT_TYPES:
        return None
    exact = f"abs(o) < {EXACT_LIMIT}" if types[-1] in INTEGER_TYPES else "isfinite(o)"
    count = len(edits)
    sql = f"""
WITH __coco_labels AS {labels},
__coco_screened AS NOT MATERIALIZED (
  SELECT hyp, COALESCE(id, 'None') AS id, o FROM ({screen}) AS s(hyp, id, o)
),
__coco_base AS (SELECT id, o FROM __coco_screened WHERE hyp = {count})
SELECT -1 AS hyp, -1 AS pos, CAST(COALESCE(bool_and({exact}), TRUE) AS DOUBLE) AS d FROM __coco_screened
UNION ALL
SELECT s.hyp, l.pos, CAST(s.o AS DOUBLE) - CAST(b.o AS DOUBLE) AS d
FROM __coco_screened AS s JOIN __coco_labels AS l ON l.id = s.id JOIN __coco_base AS b ON b.id = s.id
WHERE s.hyp < {count} AND s.o IS NOT NULL AND CAST(s.o AS DOUBLE) - CAST(b.o AS DOUBLE) <> 0
ORDER BY hyp, pos"""
    try:
        rows = env.probe(sql).rows
    except EvaluationError:
        return None
    if not rows or rows[0][:2] != (-1, -1) or rows[0][2] != 1.0:
        return None
    return [(int(hyp), int(pos), float(delta)) for hyp, pos, delta in rows[1:]]


def changes_from_rows(
    per_hypothesis: list[list[tuple[object, object]]], base: Outcome
) -> list[tuple[int, int, float]]:
    """`output_changes` from the screening rows, in Python: (hypothesis, row, output - base output) where it is not 0."""
    position = {instance_id: r for r, instance_id in enumerate(base.ids)}
    base_output = [float(json.loads(output)) for output in base.outputs]  # type: ignore[arg-type]
    changes: list[tuple[int, int, float]] = []
    for i, rows in enumerate(per_hypothesis):
        for instance_id, output in rows:
            r = position.get(str(instance_id))
            if r is not None and output is not None:
                delta = float(output) - base_output[r]  # type: ignore[arg-type]
                if delta:
                    changes.append((i, r, delta))
    return changes


__all__ = [
    "DraftScorer",
    "HypothesisScore",
    "ParentRows",
    "changes_from_rows",
    "closeness",
    "net_gain",
    "output_changes",
    "score_hypotheses",
]
