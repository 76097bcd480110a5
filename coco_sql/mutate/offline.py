"""The offline mutator: data-driven edits of the SQL AST, tested on training rows before commit (no LLM).

One proposal:
1. run the parent on the training rows and pick a target failure (uniformly; InfoGain targeting is a later
   policy);
2. probe the live training data for what each CASE can see: the target row's values and each column's
   frequent values;
3. form hypotheses as AST edits (`sql_edits`): guards fitted to the target row, leaf changes, arms recombined
   from another elite, dropped arms;
4. test up to `max_drafts` of them on the training rows and commit the best, ranked by net row-level gain over
   the parent (regressions weighted by `regression_penalty`), then (for numeric contracts) by mean absolute
   error, then by the RNG's order.

Everything random comes from the injected RNG, so a proposal is a pure function of (parent, others, data, RNG).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.evaluate import Outcome
from coco_sql.mutate.base import MutationRequest, ProgramView, Proposal
from coco_sql.mutate.sql_edits import (
    Edit,
    ScopeData,
    cases,
    change_leaf,
    drop_guard,
    duplicate_guard,
    enclosing_select,
    frequent_values,
    recombine,
    scope_probe,
)
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sqlcheck import ValidationSpec, parse_program

NUMERIC_TYPES = {"INTEGER", "BIGINT", "DOUBLE", "FLOAT", "DECIMAL"}


@dataclass(frozen=True)
class OperatorShares:
    """How the draft budget is split between operators (unused share flows to the others)."""

    duplicate_guard: float = 0.6
    change_leaf: float = 0.15
    recombine: float = 0.15
    drop_guard: float = 0.1


class OfflineMutator:
    name = "offline"

    def __init__(
        self, max_drafts: int = 32, shares: OperatorShares | None = None, regression_penalty: float = 10.0
    ) -> None:
        if max_drafts < 1:
            raise ValueError("max_drafts must be at least 1")
        self.max_drafts = max_drafts
        self.shares = shares or OperatorShares()
        self.regression_penalty = regression_penalty

    def _net_gain(self, parent: Outcome, draft: Outcome) -> float:
        """Row-level gain with regressions weighted up: sum max(0, d_i - p_i) - lambda * sum max(0, p_i - d_i).

        A draft that fixes the target while breaking rows the parent solved is usually a surrogate rule that
        fits the sample, not the rule behind it; lambda > 1 makes the mutator prefer edits that do no harm.
        """
        if not draft.ok:
            return float("-inf")
        before = {row.instance_id: row.score for row in parent.rows}
        gain = 0.0
        for row in draft.rows:
            delta = row.score - before.get(row.instance_id, 0.0)
            gain += delta if delta > 0 else self.regression_penalty * delta
        return gain

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        env = request.env
        parent_query = self._parse(request.parent.code, env)
        if parent_query is None:
            return Proposal(
                code=request.parent.code,
                approach="parent does not parse; resubmitted unchanged",
                notes={"error": "unparseable parent"},
            )
        parent_outcome = env.test_draft(request.parent.code)
        failures = [row for row in parent_outcome.rows if row.score < 1.0]
        target = failures[int(rng.integers(len(failures)))].instance_id if failures else None

        scopes = self._profile_scopes(parent_query, env, target)
        pools: dict[str, list[Edit]] = {
            "duplicate_guard": duplicate_guard(parent_query, scopes),
            "change_leaf": change_leaf(parent_query, scopes),
            "recombine": self._recombinations(parent_query, request.others, env, rng),
            "drop_guard": drop_guard(parent_query),
        }
        edits = self._allocate(pools, rng)
        if not edits:
            return Proposal(
                code=request.parent.code,
                approach="no applicable edit; resubmitted unchanged",
                notes={"target": target},
            )

        tested = []
        for edit in edits:
            code = self._render(edit.apply(parent_query), env)
            tested.append((edit, code, env.test_draft(code)))
        ranked = sorted(
            range(len(tested)),
            key=lambda i: (
                -self._net_gain(parent_outcome, tested[i][2]),
                self._residual(tested[i][2], env),
                i,
            ),
        )
        best, code, outcome = tested[ranked[0]]
        return Proposal(
            code=code,
            approach=f"{best.operator}: {best.description}",
            donor_id=best.donor_id,
            notes={
                "target": target,
                "hypotheses": {name: len(pool) for name, pool in pools.items()},
                "drafts_tested": len(tested),
                "parent_train_score": parent_outcome.score,
                "child_train_score": outcome.score,
                "net_gain": self._net_gain(parent_outcome, outcome),
            },
        )

    # -- steps -----------------------------------------------------------------------------------------------
    def _parse(self, code: str, env: DraftEnvironment) -> exp.Expression | None:
        spec = ValidationSpec(input_columns={}, output_column=env.output_column, dialect=env.dialect)
        try:
            return parse_program(code, spec)
        except CandidateRejected:
            return None

    def _render(self, query: exp.Expression, env: DraftEnvironment) -> str:
        return query.sql(dialect=env.dialect, pretty=True)

    def _profile_scopes(
        self, query: exp.Expression, env: DraftEnvironment, target: str | None
    ) -> dict[int, ScopeData]:
        """Probe the training rows once per distinct SELECT that contains a CASE."""
        by_probe: dict[str, ScopeData | None] = {}
        scopes: dict[int, ScopeData] = {}
        for index, case in enumerate(cases(query)):
            select = enclosing_select(case)
            probe = scope_probe(query, select) if select is not None else None
            if probe is None:
                continue
            if probe not in by_probe:
                by_probe[probe] = self._run_probe(probe, env, target)
            if by_probe[probe] is not None:
                scopes[index] = by_probe[probe]
        return scopes

    @staticmethod
    def _run_probe(sql: str, env: DraftEnvironment, target: str | None) -> ScopeData | None:
        try:
            result = env.probe(sql)
        except EvaluationError:
            return None
        columns = result.columns
        target_row = None
        if target is not None and "id" in columns:
            at = columns.index("id")
            for row in result.rows:
                if str(row[at]) == target:
                    target_row = dict(zip(columns, row, strict=True))
                    break
        return ScopeData(
            columns=columns, target_row=target_row, frequent=frequent_values(result.rows, columns)
        )

    def _recombinations(
        self,
        query: exp.Expression,
        others: tuple[ProgramView, ...],
        env: DraftEnvironment,
        rng: np.random.Generator,
    ) -> list[Edit]:
        if not others:
            return []
        donor = others[int(rng.integers(len(others)))]
        donor_query = self._parse(donor.code, env)
        return recombine(query, donor_query, donor.program_id) if donor_query is not None else []

    def _allocate(self, pools: dict[str, list[Edit]], rng: np.random.Generator) -> list[Edit]:
        """Sample drafts from each pool by its share of max_drafts, passing unused quota on to the others."""
        shares = {name: getattr(self.shares, name) for name in pools}
        remaining = self.max_drafts
        chosen: list[Edit] = []
        order = sorted(pools, key=lambda name: len(pools[name]))  # small pools first so their slack flows on
        total_share = sum(shares.values()) or 1.0
        for position, name in enumerate(order):
            pool = pools[name]
            later_share = sum(shares[n] for n in order[position:]) or total_share
            quota = (
                min(len(pool), round(remaining * shares[name] / later_share))
                if position < len(order) - 1
                else min(len(pool), remaining)
            )
            picks = rng.choice(len(pool), size=quota, replace=False) if quota else []
            chosen.extend(pool[int(i)] for i in sorted(picks))
            remaining -= quota
        return chosen

    @staticmethod
    def _residual(outcome: Outcome, env: DraftEnvironment) -> float:
        """Mean |output - expected| on numeric contracts (a finer signal than exact match); 0 otherwise."""
        if not outcome.ok or env.output_type.upper() not in NUMERIC_TYPES:
            return 0.0 if outcome.ok else float("inf")
        total = 0.0
        for row in outcome.rows:
            try:
                total += abs(float(row.output) - float(row.expected))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                total += 1e6
        return total / max(len(outcome.rows), 1)


__all__ = ["OfflineMutator", "OperatorShares"]
