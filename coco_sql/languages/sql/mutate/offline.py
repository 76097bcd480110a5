"""The offline mutator: data-driven edits of the SQL AST, tested on training rows before commit (no LLM).

It uses the same tools an LLM agent gets: the curator's context bundle (targets chosen by InfoGain, donors
that already solve a target, the ledger, the parent's already-tried approaches) and the live environment
(probes and draft tests over the training rows only). One proposal:

1. run the parent on the training rows (its feedback) and take the curator's targets, most wanted first;
2. probe the live data for what each CASE can see: each target row's values and each column's frequent values;
3. contrast many failures at once: guards fitted to each of the top `screen_targets` targets (kept only if they
   fire on their target row), arms of the donors, swaps and drops are screened together in ONE query
   (`screening`), and the best `confirm` are rendered, validated and tested as real drafts;
4. if none of those gains, investigate one target at a time with every operator (`edits`: guards, leaf
   changes, recombination, drops), up to `max_drafts` tested drafts;
5. commit a draft by net row-level gain over the parent: closeness is the row score, or minus the absolute
   error for numeric contracts, and regressions weigh `regression_penalty` times more than fixes. Hypotheses and
   drafts are scored inside the engine, as SQL over their outputs and the training labels (`hypothesis_scoring`).
   The committed draft is drawn from the RNG among the near-best (`choice`, `sql_near_best`): within 10% of the
   best gain, at most the top 3, so different seeds take different edit orders.

Steps 3 and 4 (and the joint fit below) are stages: generators of drafts that feed the shared draft -> test ->
pick loop (`mutate.drafts.DraftLoop`) in order, share its budget, and read its trials to decide whether to go on.

When the ledger shows stagnation the mutator takes a named new direction, recorded as 'restructure' instead of
'hillclimb': first it refits all point guards of the parent jointly against every training row (`joint_fit`, once
per parent), then the draft budget shifts from new guards to restructuring (recombine, prune, leaf changes). With `probe=False` (ablation)
nothing touches the data: one hypothesis built from the program's own literals is committed untested.

Everything random comes from the injected RNG, so a proposal is a pure function of (request, data, RNG).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
from sqlglot import exp

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.evaluate import Outcome
from coco_sql.languages.sql.mutate.ai_edits import classify_calls
from coco_sql.languages.sql.mutate.ai_pipeline import AI_COST_WEIGHT, AiPipelineSearch
from coco_sql.languages.sql.mutate.edits import (
    Edit,
    change_leaf,
    drop_guard,
    duplicate_guard,
    recombine,
    scope_probe,
    static_scopes,
)
from coco_sql.languages.sql.mutate.hypothesis_scoring import (
    NUMERIC_TYPES,
    DraftScorer,
    changes_from_rows,
    output_changes,
    score_hypotheses,
)
from coco_sql.languages.sql.mutate.joint_fit import (
    NODE_LIMIT,
    additive_shape,
    conditions_from_rows,
    guard_edits,
    rules_edit,
    solve_rules,
    strip_point_guards,
)
from coco_sql.languages.sql.mutate.joint_fit import OPERATOR as JOINT_FIT
from coco_sql.languages.sql.mutate.prompt_edits import complete_calls
from coco_sql.languages.sql.mutate.prompt_only import PromptOnlyMutator
from coco_sql.languages.sql.mutate.scope_probing import ScopeProbing, _Probes
from coco_sql.languages.sql.mutate.screening import screenable, screening_sql, split_by_hypothesis
from coco_sql.mutate.base import MutationRequest, Proposal
from coco_sql.mutate.choice import NearBest
from coco_sql.mutate.drafts import DraftLoop
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sandbox import QueryResult
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import parse_program


@dataclass(frozen=True)
class OperatorShares:
    """How the draft budget is split between operators (unused share flows to the others)."""

    duplicate_guard: float = 0.7
    change_leaf: float = 0.1
    recombine: float = 0.1
    drop_guard: float = 0.1


# When the ledger shows stagnation, the mutator switches to a named direction that restructures instead of
# adding guards: prune and recombine more, fit fewer new guards.
RESTRUCTURE = OperatorShares(duplicate_guard=0.3, change_leaf=0.2, recombine=0.25, drop_guard=0.25)

# The SQL path's committed draft: one of the top 3 within 10% of the best net gain. Tighter than the AI path's
# (`ai_pipeline.AI_NEAR_BEST`): a guard's net gain counts regressions ten times, so a 10% gap is already a
# real difference there.
SQL_NEAR_BEST = NearBest(relative=0.1, absolute=0.0, top=3)


@dataclass
class _Search:
    """One proposal's search, which its stages read and fill: the request, the parent parsed and its training
    outcome, the probes made so far, and what the stages found, for the notes (the targets investigated, the
    hypotheses each operator made, the joint fit's notes)."""

    request: MutationRequest
    query: exp.Expression
    outcome: Outcome
    numeric: bool
    probes: _Probes = field(default_factory=_Probes)
    targets: list[str | None] = field(default_factory=list)
    hypotheses: dict[str, int] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


def _gains(loop: DraftLoop[Edit, tuple[float, float]]) -> bool:
    """Whether a draft the loop tested gains over the parent."""
    return any(trial.result[0] > 0 for trial in loop.trials)


class OfflineMutator(ScopeProbing):
    name = "offline"

    def __init__(
        self,
        max_drafts: int = 32,
        shares: OperatorShares | None = None,
        regression_penalty: float = 10.0,
        max_targets: int = 3,
        probe: bool = True,
        stagnation_window: int = 5,
        screen_targets: int = 10,
        max_screened: int = 400,
        confirm: int = 3,
        joint_fit: bool = True,
        joint_fit_node_limit: int = NODE_LIMIT,
        max_fit_hypotheses: int = 2000,
        max_examples: int = 0,  # 0: no cap (the learned proxy takes over a call with 20+ examples)
        cost_weight: float = AI_COST_WEIGHT,  # AI drafts: score worth a 100% cut in deploy cost (0: ignore cost)
        sql_near_best: NearBest | None = None,
    ) -> None:
        if max_drafts < 1 or max_targets < 1:
            raise ValueError("max_drafts and max_targets must be at least 1")
        self.max_drafts = max_drafts
        self.max_targets = max_targets
        self.shares = shares or OperatorShares()
        self.regression_penalty = regression_penalty
        self.probe = probe  # live probing and draft tests on training rows; off = the static ablation
        self.stagnation_window = stagnation_window
        self.screen_targets = screen_targets  # targets whose guards are screened together (0: no screening)
        self.max_screened = max_screened
        self.confirm = confirm  # screened hypotheses re-tested as real drafts before one is committed
        self.joint_fit = joint_fit  # on stagnation, refit all point guards at once (see `joint_fit`)
        self.joint_fit_node_limit = joint_fit_node_limit  # a bound in work: the same fit at any load
        self.max_fit_hypotheses = max_fit_hypotheses
        self.max_examples = max_examples  # few-shot examples per AI_CLASSIFY call (`examples`)
        self.cost_weight = cost_weight
        self.sql_near_best = sql_near_best or SQL_NEAR_BEST

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        env = request.env
        parent_query = self._parse(request.parent.code, env)
        if parent_query is None:
            return Proposal(
                code=request.parent.code,
                approach="parent does not parse",
                notes={"error": "unparseable parent"},
                exhausted="the parent does not parse",
            )
        context = request.context
        strategy, shares = (
            ("restructure", RESTRUCTURE)
            if context.stagnant(self.stagnation_window)
            else (
                "hillclimb",
                self.shares,
            )
        )
        if not self.probe:
            return self._static_proposal(request, parent_query, shares, strategy, rng)

        parent_outcome = env.test_draft(request.parent.code)
        numeric = env.output_type.upper() in NUMERIC_TYPES
        if classify_calls(parent_query):
            return self._propose_ai(request, parent_query, parent_outcome, strategy, rng)
        scorer = DraftScorer(env, request.parent.code, parent_outcome, numeric, self.regression_penalty)
        ranked_targets = list(context.targets) or self._own_failures(parent_outcome, rng)
        targets = ranked_targets[: self.max_targets] or [None]
        search = _Search(request, parent_query, parent_outcome, numeric)
        # Each draft measured as (net gain, training score) and ranked by both; no program tested twice, nor the
        # parent's. The stages feed one loop, in order; each runs only when the loop asks for its drafts.
        loop: DraftLoop[Edit, tuple[float, float]] = DraftLoop(
            lambda edit: self._render(edit.apply(parent_query), env),
            lambda _, code: scorer.test(code),
            lambda measured: measured,
            skip=[request.parent.code],
        )
        loop.run(
            chain(
                self._joint_fit_drafts(search, strategy),
                self._screened_drafts(search, ranked_targets[: self.screen_targets], rng),
                self._target_drafts(search, targets, shares, loop, rng),
            )
        )
        if not _gains(loop) and complete_calls(parent_query):
            # an AI_COMPLETE prompt: the edits Snowflake's optimizer makes (its model, its prompt), so that this
            # search holds that one (`prompt_only`)
            prompt = PromptOnlyMutator(self.max_drafts, self.max_examples).propose(request, rng)
            if prompt.exhausted is None or not loop.trials:
                return prompt
        # By net gain, then training score, then the order drafts were drawn in; one of the near-best is drawn.
        chosen = loop.pick(rng, self.sql_near_best)
        if chosen is None:
            return Proposal(
                code=request.parent.code,
                approach="no applicable edit",
                strategy=strategy,
                notes={"targets": search.targets, **search.extra},
                exhausted="no applicable edit",
            )
        gain, score = chosen.result
        return Proposal(
            code=chosen.code,
            approach=chosen.draft.approach,
            strategy=strategy,
            donor_id=chosen.draft.donor_id,
            notes={
                "targets": search.targets,
                "hypotheses": search.hypotheses,
                "drafts_tested": len(loop.trials),
                "parent_train_score": parent_outcome.score,
                "child_train_score": score,
                "net_gain": gain,
                "best_gain": loop.ranked()[0].result[0],
                **search.extra,
            },
        )

    # -- the stages: drafts for the one loop, in order -----------------------------------------------------
    def _joint_fit_drafts(self, search: _Search, strategy: str) -> Iterator[Edit]:
        """Stage 0, a named new direction when hill-climbing stalls: all point guards fitted jointly
        (`joint_fit`), once per parent."""
        context = search.request.context
        if (
            strategy != "restructure"
            or not self.joint_fit
            or any(approach.startswith(f"{JOINT_FIT}:") for approach in context.tried)
        ):
            return
        env = search.request.env
        root = self._parse(context.root.code, env) if context.root is not None else None
        fitted, fit_notes = self._joint_fit(search.query, env, search.probes, root)
        search.hypotheses["joint_fit"] = int(fit_notes.get("hypotheses", 0))
        search.extra["joint_fit"] = fit_notes
        if fitted is not None:
            yield fitted

    def _screened_drafts(
        self, search: _Search, targets: list[str | None], rng: np.random.Generator
    ) -> Iterator[Edit]:
        """Stage 1: contrast many failures at once. Guards fitted to each of `targets` (and arms of the donors)
        are screened together in one query; the best `confirm` untried ones are tested as real drafts."""
        if not self.screen_targets:
            return
        screened = self._screen(
            search.query, search.request, targets, search.outcome, search.numeric, search.probes, rng
        )
        search.hypotheses["screened"] = len(screened)
        search.targets.extend(t for t in targets if t is not None)
        fresh = [edit for edit, _ in screened if edit.approach not in search.request.context.tried]
        yield from fresh[: self.confirm]

    def _target_drafts(
        self,
        search: _Search,
        targets: list[str | None],
        shares: OperatorShares,
        loop: DraftLoop[Edit, tuple[float, float]],
        rng: np.random.Generator,
    ) -> Iterator[Edit]:
        """Stage 2: investigate one target at a time with every operator, moving on only while no tested draft
        gains. The first target's drafts take the budget the earlier stages left; later ones only what it left."""
        request, query = search.request, search.query
        for target in targets:
            if _gains(loop):
                return
            quota = self.max_drafts - len(loop.trials)
            scopes = self._profile_scopes(query, request.env, target, search.probes)
            pools: dict[str, list[Edit]] = {
                "duplicate_guard": duplicate_guard(query, scopes, self._fires(request.env, target)),
                "change_leaf": change_leaf(query, scopes),
                "recombine": self._recombinations(query, request, target, rng),
                "drop_guard": drop_guard(query),
            }
            for name, pool in pools.items():
                search.hypotheses[name] = search.hypotheses.get(name, 0) + len(pool)
            if target not in search.targets:
                search.targets.append(target)
            drawn = self._allocate(pools, rng, quota, shares)
            yield from [edit for edit in drawn if edit.approach not in request.context.tried]

    def _propose_ai(
        self,
        request: MutationRequest,
        parent_query: exp.Expression,
        parent_outcome: Outcome,
        strategy: str,
        rng: np.random.Generator,
    ) -> Proposal:
        """AI-pipeline edits (`ai_pipeline`), tested cross-fitted on the training rows; a near-best one wins."""
        targets = list(request.context.targets) or [
            t for t in self._own_failures(parent_outcome, rng) if t is not None
        ]
        search = AiPipelineSearch(self.max_drafts, self.max_targets, self.max_examples, self.cost_weight)
        root = request.context.root
        root_query = self._parse(root.code, request.env) if root is not None else None
        return search.propose(request, parent_query, parent_outcome, targets, strategy, rng, root_query)

    def _static_proposal(
        self,
        request: MutationRequest,
        parent_query: exp.Expression,
        shares: OperatorShares,
        strategy: str,
        rng: np.random.Generator,
    ) -> Proposal:
        """Without live probing: hypotheses from the program's own columns and literals, committed untested."""
        scopes = static_scopes(parent_query, rng)
        pools: dict[str, list[Edit]] = {
            "duplicate_guard": duplicate_guard(parent_query, scopes),
            "change_leaf": change_leaf(parent_query, scopes),
            "recombine": self._recombinations(parent_query, request, None, rng),
            "drop_guard": drop_guard(parent_query),
        }
        for edit in self._allocate(pools, rng, 1, shares):
            return Proposal(
                code=self._render(edit.apply(parent_query), request.env),
                approach=f"{edit.operator} (untested): {edit.description}",
                strategy=strategy,
                donor_id=edit.donor_id,
                notes={"probe": False, "hypotheses": {name: len(pool) for name, pool in pools.items()}},
            )
        return Proposal(request.parent.code, "no applicable edit", exhausted="no applicable edit (untested)")

    def _screen(
        self,
        query: exp.Expression,
        request: MutationRequest,
        targets: list[str | None],
        parent_outcome: Outcome,
        numeric: bool,
        probes: dict[str, QueryResult | None],
        rng: np.random.Generator,
    ) -> list[tuple[Edit, float]]:
        """Screen guard and donor-arm hypotheses in one query; return them by net gain, best first."""
        env = request.env
        candidates: dict[tuple[int, str], Edit] = {}
        for target in targets:
            if target is None:
                continue
            scopes = self._profile_scopes(query, env, target, probes)
            edits = duplicate_guard(query, scopes, self._fires(env, target))
            edits += self._recombinations(query, request, target, rng)
            for edit in edits:
                assert edit.arm is not None
                candidates.setdefault((edit.arm[0], edit.arm[1].sql(dialect=SANDBOX_DIALECT)), edit)
        edits = screenable(query, list(candidates.values()))[: self.max_screened]
        if not edits:
            return []
        penalty = self.regression_penalty
        scores = score_hypotheses(env, query, edits, parent_outcome, numeric, penalty)  # type: ignore[arg-type]
        if scores is None:
            return []
        order = sorted(range(len(edits)), key=lambda i: (-scores[i].gain, i))
        return [(edits[i], scores[i].gain) for i in order]

    def _joint_fit(
        self,
        query: exp.Expression,
        env: DraftEnvironment,
        probes: dict[str, QueryResult | None],
        root: exp.Expression | None = None,
    ) -> tuple[Edit | None, dict[str, object]]:
        """Fit the point guards of an additive program jointly on the training rows (see `joint_fit`)."""
        shape = additive_shape(query, env.output_column, root)
        if shape is None or env.output_type.upper() not in NUMERIC_TYPES:
            return None, {"status": "not applicable: the output is not a numeric sum of CASEs"}
        base = strip_point_guards(query, shape)
        base_outcome = env.test_draft(self._render(base, env))
        scope_sql = scope_probe(base, base) if isinstance(base, exp.Select) else None
        if not base_outcome.ok or scope_sql is None:
            return None, {"status": f"base program failed: {base_outcome.error or 'reads nothing'}"}
        try:
            residual = [
                float(json.loads(row.expected)) - float(json.loads(row.output))  # type: ignore[arg-type]
                for row in base_outcome.rows
            ]
        except (TypeError, ValueError):
            return None, {"status": "not applicable: non-numeric outputs or labels"}
        if scope_sql not in probes:
            try:
                probes[scope_sql] = env.probe(scope_sql)
            except EvaluationError:
                probes[scope_sql] = None
        scope = probes[scope_sql]
        if scope is None:
            return None, {"status": "scope probe failed"}
        conditions = conditions_from_rows(scope.columns, scope.rows)
        per_condition = len(shape.case_indices)
        conditions = conditions[: max(1, self.max_fit_hypotheses // per_condition)]
        edits = screenable(base, guard_edits(shape, conditions))
        if len(edits) != len(conditions) * per_condition:
            return None, {"status": "not applicable: guards cannot be screened"}
        changes = output_changes(env, base, edits)  # type: ignore[arg-type]
        if changes is None:  # not in the engine: read the screening rows here
            try:
                result = env.probe(screening_sql(base, edits, env.output_column))  # type: ignore[arg-type]
            except EvaluationError as error:
                return None, {"status": f"screening failed: {error}"}
            changes = changes_from_rows(split_by_hypothesis(result.rows, len(edits)), base_outcome)
        effects: dict[tuple[int, int], dict[int, float]] = {}
        for i, r, delta in changes:
            a, k = divmod(i, per_condition)
            effects.setdefault((a, shape.case_indices[k]), {})[r] = delta
        fit = solve_rules(shape, conditions, effects, residual, self.joint_fit_node_limit)
        notes: dict[str, object] = {
            "status": fit.status,
            "hypotheses": len(edits),
            "variables": fit.variables,
            "group_size": shape.group_size,
        }
        if fit.rules is None:
            return None, notes
        notes["rules"] = len(fit.rules)
        return rules_edit(
            shape, fit.rules, f"{len(fit.rules)} rules fitted jointly to all training rows"
        ), notes

    @staticmethod
    def _own_failures(parent_outcome: Outcome, rng: np.random.Generator) -> list[str | None]:
        failures = [row.instance_id for row in parent_outcome.rows if row.score < 1.0]
        return [failures[int(i)] for i in rng.permutation(len(failures))]

    # -- steps -----------------------------------------------------------------------------------------------
    def _parse(self, code: str, env: DraftEnvironment) -> exp.Expression | None:
        spec = ValidationSpec(input_columns={}, output_column=env.output_column, dialect=env.dialect)
        try:
            return parse_program(code, spec)
        except CandidateRejected:
            return None

    def _render(self, query: exp.Expression, env: DraftEnvironment) -> str:
        return query.sql(dialect=env.dialect, pretty=True)

    def _recombinations(
        self, query: exp.Expression, request: MutationRequest, target: str | None, rng: np.random.Generator
    ) -> list[Edit]:
        """Arms from the donor that already solves the target, if the curator found one; else a random elite."""
        donor = request.context.donors.get(target) if target is not None else None
        others = request.others
        if donor is None and not others:
            return []
        if donor is None:
            donor = others[int(rng.integers(len(others)))]
        donor_query = self._parse(donor.code, request.env)
        return recombine(query, donor_query, donor.program_id) if donor_query is not None else []

    @staticmethod
    def _allocate(
        pools: dict[str, list[Edit]], rng: np.random.Generator, quota: int, operator_shares: OperatorShares
    ) -> list[Edit]:
        """Sample `quota` drafts across the pools by their shares, passing unused quota on to the others."""
        shares = {name: getattr(operator_shares, name) for name in pools}
        remaining = quota
        chosen: list[Edit] = []
        order = sorted(pools, key=lambda name: len(pools[name]))  # small pools first so their slack flows on
        total_share = sum(shares.values()) or 1.0
        for position, name in enumerate(order):
            pool = pools[name]
            later_share = sum(shares[n] for n in order[position:]) or total_share
            take = (
                min(len(pool), round(remaining * shares[name] / later_share))
                if position < len(order) - 1
                else min(len(pool), remaining)
            )
            picks = rng.choice(len(pool), size=take, replace=False) if take else []
            chosen.extend(pool[int(i)] for i in sorted(picks))
            remaining -= take
        return chosen


__all__ = ["OfflineMutator", "OperatorShares"]
