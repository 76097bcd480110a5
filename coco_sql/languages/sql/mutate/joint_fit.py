"""Joint fit: choose a whole set of point guards at once, consistent with every training row.

Greedy hill-climbing adds one guard per iteration and keeps it if the training rows improve. When several hidden
rules overlap, a surrogate guard often explains as many rows as a true one, gets locked in, and masks the true
rules (lockpicking6 measured this: the true guards rank 3rd to 330th of 360 by single-edit gain). Reasoning over
all failures jointly breaks that: a row whose label the parent already gets right forbids every guard that would
fire on it, a row off by two needs exactly two guards, and so on. This module states that reasoning as a small
integer program and solves it exactly (HiGHS, through scipy).

The program shape it applies to is common in rule-counting SQL: the output is a SUM of CASE terms (`additive`),
and rules are point guards `WHEN column = literal THEN leaf`. The parent's own point guards show the rules' arity:
the seed of lockpicking6 has `p1 = 4` in two CASEs, so a rule is one condition added to a set of `group_size`
CASEs. The fit:

1. strips the parent's point guards (the base), so that surrogates the greedy search locked in do not constrain it;
2. screens every (condition, CASE) guard on the base in ONE query (`screening`): the observed change of the output
   on each row is the guard's effect there, so nothing about the CASEs' semantics is assumed;
3. solves: minimise the number of rules (the parent's own rules cost half, so ties keep them) such that every
   training row's output equals its label, each condition used by at most one rule.

Variables are z (a rule: condition a on CASE set S), x (edge a -> CASE k, x = sum of the z covering it) and
y (CASE k changes on row r, the OR of the edges active there):

    min  sum_z cost_z z
    s.t. x_ak = sum_{S ∋ k} z_aS                      for every edge with an effect
         y_kr >= x_ak                                for every edge a active on row r of CASE k
         y_kr <= sum_a x_ak                          (over the edges active there)
         sum_k c_kr y_kr = expected_r - base_r       for every training row r
         sum_S z_aS <= 1                             for every condition a

c_kr is the change of the output when CASE k takes its new leaf on row r; two guards of one CASE that both fire on
a row change it once (that is why the OR). The result is tested as a draft like every other hypothesis, so a
program whose output is not really additive only costs one wasted draft.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from coco_sql.languages.sql.mutate.edits import Edit, cases, literal
from coco_sql.plugin_loader import SANDBOX_DIALECT

OPERATOR = "joint_fit"


@dataclass(frozen=True)
class AdditiveShape:
    """Where point guards go in a program whose output is a sum of CASE terms."""

    case_indices: tuple[int, ...]  # CASEs summed into the output, by their depth-first index
    leaves: Mapping[int, exp.Expression]  # the THEN literal a new guard of each CASE gets
    group_size: int  # how many CASEs one rule's condition guards, read off the parent's point guards
    rules: frozenset[tuple[str, frozenset[int]]]  # the parent's rules: (condition SQL, CASE indices)


@dataclass(frozen=True)
class Rule:
    condition: exp.Expression
    case_indices: tuple[int, ...]

    @property
    def key(self) -> str:
        return self.condition.sql(dialect=SANDBOX_DIALECT)


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren | exp.Cast):
        node = node.this
    return node


def is_point_guard(arm: exp.If) -> bool:
    """`WHEN column = literal THEN literal` (either side order)."""
    condition = _unparen(arm.this)
    if not isinstance(condition, exp.EQ) or not isinstance(_unparen(arm.args["true"]), exp.Literal):
        return False
    sides = {type(_unparen(condition.this)), type(_unparen(condition.expression))}
    return sides == {exp.Column, exp.Literal}


def _sum_terms(query: exp.Expression, output_column: str) -> list[exp.Expression] | None:
    """The terms of the outermost SELECT's `output_column` when it is a sum (a single term counts)."""
    if not isinstance(query, exp.Select):
        return None
    projection = next((p for p in query.expressions if p.alias_or_name == output_column), None)
    if projection is None:
        return None
    terms: list[exp.Expression] = []
    stack = [_unparen(projection.this if isinstance(projection, exp.Alias) else projection)]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Add):
            stack.extend([_unparen(node.this), _unparen(node.expression)])
        else:
            terms.append(node)
    return terms


def _point_guards(query: exp.Expression, case_indices: Sequence[int]) -> dict[str, set[int]]:
    """Condition SQL -> the CASEs (of `case_indices`) that guard on it with a point guard."""
    where: dict[str, set[int]] = {}
    all_cases = cases(query)
    for k in case_indices:
        if k < len(all_cases):
            for arm in all_cases[k].args.get("ifs") or []:
                if is_point_guard(arm):
                    where.setdefault(_unparen(arm.this).sql(dialect=SANDBOX_DIALECT), set()).add(k)
    return where


def additive_shape(
    query: exp.Expression, output_column: str, structure: exp.Expression | None = None
) -> AdditiveShape | None:
    """The shape, when the outermost SELECT computes `output_column` as a sum of CASEs; else None.

    A rule's arity (`group_size`) is read off `structure`, the lineage's first program, when it has point guards:
    the user wrote that one, while a descendant's guards may be surrogates locked in by greedy search (one
    condition copied into three CASEs, say). Otherwise it is read off `query` itself.
    """
    terms = _sum_terms(query, output_column)
    if not terms or not all(isinstance(t, exp.Case | exp.Literal) for t in terms):
        return None
    all_cases = cases(query)
    index_of = {id(case): i for i, case in enumerate(all_cases)}
    summed = sorted(index_of[id(t)] for t in terms if isinstance(t, exp.Case))
    leaves: dict[int, exp.Expression] = {}
    for k in summed:
        arms = all_cases[k].args.get("ifs") or []
        thens = [
            _unparen(arm.args["true"])
            for arm in ([a for a in arms if is_point_guard(a)] or arms)
            if isinstance(_unparen(arm.args["true"]), exp.Literal)
        ]
        if thens:
            most_common = Counter(t.sql(dialect=SANDBOX_DIALECT) for t in thens).most_common(1)[0][0]
            leaves[k] = next(t for t in thens if t.sql(dialect=SANDBOX_DIALECT) == most_common).copy()
    if not leaves:
        return None
    case_indices = tuple(k for k in summed if k in leaves)
    where = _point_guards(query, case_indices)
    stated = _point_guards(structure, case_indices) if structure is not None else {}
    group_size = max((len(ks) for ks in (stated or where).values()), default=1)
    rules = frozenset((condition, frozenset(ks)) for condition, ks in where.items())
    return AdditiveShape(case_indices, leaves, group_size, rules)


def strip_point_guards(query: exp.Expression, shape: AdditiveShape) -> exp.Expression:
    """The base: the program without the point guards of its additive CASEs."""
    base = query.copy()
    base_cases = cases(base)
    for k in shape.case_indices:
        case = base_cases[k]
        case.set("ifs", [arm for arm in case.args.get("ifs") or [] if not is_point_guard(arm)])
    return base


def conditions_from_rows(
    columns: Sequence[str], rows: Sequence[Sequence[object]], min_support: int = 2, max_values: int = 30
) -> list[exp.Expression]:
    """`column = value` for values that at least `min_support` training rows (but not all) take."""
    conditions: list[exp.Expression] = []
    for index, column in enumerate(columns):
        if column == "id":
            continue
        counts = Counter(row[index] for row in rows if row[index] is not None)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
        for value, count in ranked[:max_values]:
            node = literal(value)
            if node is not None and min_support <= count < len(rows):
                conditions.append(exp.EQ(this=exp.column(column), expression=node))
    return conditions


def guard_edits(shape: AdditiveShape, conditions: Sequence[exp.Expression]) -> list[Edit]:
    """One screenable edit per (condition, CASE): the guard appended to that CASE."""
    edits = []
    for condition in conditions:
        for k in shape.case_indices:
            arm = exp.If(this=condition.copy(), true=shape.leaves[k].copy())
            edits.append(
                Edit(
                    OPERATOR,
                    f"screen `WHEN {condition.sql(SANDBOX_DIALECT)}` in CASE #{k + 1}",
                    _no_apply,
                    arm=(k, arm),
                )
            )
    return edits


def _no_apply(query: exp.Expression) -> exp.Expression:  # screened only, never rendered on its own
    return query.copy()


@dataclass(frozen=True)
class FitResult:
    rules: tuple[Rule, ...] | None  # None: no consistent rule set (or the solver ran out of time)
    status: str
    variables: int
    seconds: float


NODE_LIMIT = 20_000
"""Branch-and-bound nodes the joint fit may search: lockpicking6's fits prove optimality in far fewer."""


def solve_rules(
    shape: AdditiveShape,
    conditions: Sequence[exp.Expression],
    effects: Mapping[tuple[int, int], Mapping[int, float]],
    residual: Sequence[float],
    node_limit: int = NODE_LIMIT,
) -> FitResult:
    """The integer program of the module docstring, searched over at most `node_limit` branch-and-bound nodes: a
    bound in work, not in time, so that the fit is the same at any load on the machine (issue 38; a time limit
    made a loaded machine stop earlier, with another answer or none).

    `effects[(a, k)]` maps row -> change of the output when condition a guards CASE k (rows it leaves alone are
    absent); `residual[r]` is expected minus base output on row r.
    """
    import time

    started = time.perf_counter()
    n_rows = len(residual)
    change: dict[tuple[int, int], float] = {}  # (k, r) -> c_kr
    for (_, k), rows in effects.items():
        for r, delta in rows.items():
            if change.setdefault((k, r), delta) != delta:
                return FitResult(None, "inconsistent effects: the CASE is not a plain OR of guards", 0, 0.0)
    covered = {r for _, r in change}
    if any(abs(residual[r]) > 1e-9 for r in range(n_rows) if r not in covered):
        return FitResult(
            None, "infeasible: a wrong row that no guard can change", 0, time.perf_counter() - started
        )
    edges = sorted(effects)
    edge_index = {edge: i for i, edge in enumerate(edges)}
    candidates: list[tuple[int, tuple[int, ...]]] = [
        (a, subset)
        for a in range(len(conditions))
        for subset in itertools.combinations(shape.case_indices, shape.group_size)
        if any((a, k) in edge_index for k in subset)
    ]
    pairs = sorted(change)
    pair_index = {pair: i for i, pair in enumerate(pairs)}
    n_x, n_z = len(edges), len(candidates)
    z0, y0 = n_x, n_x + n_z
    n = y0 + len(pairs)
    rows_i: list[int] = []
    cols_i: list[int] = []
    values: list[float] = []
    lower: list[float] = []
    upper: list[float] = []

    def constrain(coefficients: Mapping[int, float], lo: float, hi: float) -> None:
        row = len(lower)
        for column, value in coefficients.items():
            rows_i.append(row)
            cols_i.append(column)
            values.append(value)
        lower.append(lo)
        upper.append(hi)

    covering: dict[int, dict[int, float]] = {i: {i: -1.0} for i in range(n_x)}
    by_condition: dict[int, dict[int, float]] = {}
    for j, (a, subset) in enumerate(candidates):
        for k in subset:
            if (a, k) in edge_index:
                covering[edge_index[(a, k)]][z0 + j] = 1.0
        by_condition.setdefault(a, {})[z0 + j] = 1.0
    for coefficients in covering.values():
        constrain(coefficients, 0.0, 0.0)
    for coefficients in by_condition.values():
        constrain(coefficients, 0.0, 1.0)
    active: dict[tuple[int, int], list[int]] = {}
    for (a, k), rows in effects.items():
        for r in rows:
            active.setdefault((k, r), []).append(edge_index[(a, k)])
    for pair, xs in active.items():
        y = y0 + pair_index[pair]
        for x in xs:
            constrain({y: 1.0, x: -1.0}, 0.0, np.inf)
        constrain({y: -1.0, **{x: 1.0 for x in xs}}, 0.0, np.inf)
    per_row: dict[int, dict[int, float]] = {}
    for (k, r), delta in change.items():
        per_row.setdefault(r, {})[y0 + pair_index[(k, r)]] = delta
    for r in sorted(covered):
        constrain(per_row[r], residual[r], residual[r])
    cost = np.zeros(n)
    for j, (a, subset) in enumerate(candidates):
        known = (conditions[a].sql(dialect=SANDBOX_DIALECT), frozenset(subset)) in shape.rules
        cost[z0 + j] = 0.5 if known else 1.0
    from scipy.optimize import Bounds, LinearConstraint, milp  # scipy: ~0.5 s of import, for this step only
    from scipy.sparse import coo_matrix

    matrix = coo_matrix((values, (rows_i, cols_i)), shape=(len(lower), n)).tocsr()
    result = milp(
        cost,
        constraints=LinearConstraint(matrix, lower, upper),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
        options={"node_limit": node_limit},
    )
    seconds = time.perf_counter() - started
    if result.status != 0 or result.x is None:
        return FitResult(None, result.message, n, seconds)
    chosen = tuple(
        Rule(conditions[a], subset) for j, (a, subset) in enumerate(candidates) if result.x[z0 + j] > 0.5
    )
    return FitResult(chosen, "optimal", n, seconds)


def rules_edit(shape: AdditiveShape, rules: Sequence[Rule], base_description: str) -> Edit:
    """The child: the base with every fitted rule's guard appended to its CASEs."""
    ordered = sorted(rules, key=lambda rule: (rule.key, rule.case_indices))

    def apply(query: exp.Expression) -> exp.Expression:
        child = strip_point_guards(query, shape)
        child_cases = cases(child)
        for rule in ordered:
            for k in rule.case_indices:
                case = child_cases[k]
                arm = exp.If(this=rule.condition.copy(), true=shape.leaves[k].copy())
                case.set("ifs", [*(case.args.get("ifs") or []), arm])
        return child

    listed = "; ".join(
        f"{rule.key} -> CASE {','.join(f'#{k + 1}' for k in rule.case_indices)}" for rule in ordered
    )
    return Edit(OPERATOR, f"{base_description}: {listed}", apply)


__all__ = [
    "AdditiveShape",
    "FitResult",
    "Rule",
    "additive_shape",
    "conditions_from_rows",
    "guard_edits",
    "is_point_guard",
    "rules_edit",
    "solve_rules",
    "strip_point_guards",
]
