"""The joint fit of point guards: shape detection, the integer program on hand-made cases, and the mutator's
stagnation move on the real lockpicking6 pack (real DuckDB, real sqlglot, real HiGHS)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from coco_sql.engine import iteration_rng
from coco_sql.evaluate import REPORT_SPLITS, Evaluator
from coco_sql.languages.sql.mutate.joint_fit import additive_shape, solve_rules, strip_point_guards
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.mutate import MutationRequest, ProgramView
from coco_sql.reflect import DraftEnvironment
from coco_sql.reflect.context import ContextBundle, StrategyNote
from coco_sql.tasks import load_task

ADDITIVE = """
SELECT id,
  (CASE WHEN a NOT IN (1, 2) THEN 0 WHEN b = 3 THEN 0 ELSE 1 END)
  + (CASE WHEN b NOT IN (3, 4) THEN 0 WHEN b = 3 THEN 0 WHEN a = 9 THEN 0 ELSE 1 END)
  + (CASE WHEN c = 5 THEN 0 ELSE 1 END) AS label
FROM t
"""


def parse(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="duckdb")


def test_additive_shape_reads_cases_leaves_and_rule_arity() -> None:
    shape = additive_shape(parse(ADDITIVE), "label")
    assert shape is not None
    assert shape.case_indices == (0, 1, 2)
    assert {k: leaf.sql() for k, leaf in shape.leaves.items()} == {0: "0", 1: "0", 2: "0"}
    # `b = 3` guards two CASEs: rules have arity 2; `a = 9` and `c = 5` are rules of one CASE each.
    assert shape.group_size == 2
    assert shape.rules == {("b = 3", frozenset({0, 1})), ("a = 9", frozenset({1})), ("c = 5", frozenset({2}))}
    # The arity comes from the lineage's first program when it states one.
    root = parse(
        "SELECT id, (CASE WHEN c = 5 THEN 0 ELSE 1 END) + (CASE WHEN b = 1 THEN 0 ELSE 1 END) AS label FROM t"
    )
    assert additive_shape(parse(ADDITIVE), "label", root).group_size == 1


def test_strip_point_guards_keeps_other_arms() -> None:
    query = parse(ADDITIVE)
    base = strip_point_guards(query, additive_shape(query, "label"))
    assert "b = 3" not in base.sql() and "a = 9" not in base.sql() and "c = 5" not in base.sql()
    assert "NOT a IN (1, 2)" in base.sql() and "NOT b IN (3, 4)" in base.sql()
    assert "b = 3" in query.sql()  # the parent is not modified


def test_non_additive_outputs_have_no_shape() -> None:
    assert (
        additive_shape(parse("SELECT id, a * (CASE WHEN a = 1 THEN 0 ELSE 1 END) AS label FROM t"), "label")
        is None
    )
    assert additive_shape(parse("SELECT id, a AS label FROM t"), "label") is None
    assert additive_shape(parse(ADDITIVE), "other") is None


def _two_case_shape():
    sql = (
        "SELECT id, (CASE WHEN x = 1 THEN 0 ELSE 1 END) + (CASE WHEN x = 1 THEN 0 ELSE 1 END) AS label FROM t"
    )
    shape = additive_shape(parse(sql), "label")
    assert shape is not None and shape.group_size == 2
    return shape


def test_solve_rules_finds_the_smallest_consistent_rule_set() -> None:
    """Two CASEs, rules of arity 2 (both CASEs). Rows r0..r3; conditions A fires on r0, r1; B on r1, r2; C on r3.

    A guard zeroing a CASE lowers the output by 1 there. Residuals (expected - base): r0 -2, r1 -2, r2 0, r3 -2.
    B would break r2, so A and C are forced; the unique optimum is {A, C}, two rules.
    """
    shape = _two_case_shape()
    conditions = [parse(f"{name} = 1") for name in ("a", "b", "c")]
    fires = {0: [0, 1], 1: [1, 2], 2: [3]}
    effects = {(a, k): {r: -1.0 for r in rows} for a, rows in fires.items() for k in (0, 1)}
    fit = solve_rules(shape, conditions, effects, [-2.0, -2.0, 0.0, -2.0])
    assert fit.status == "optimal"
    assert sorted(rule.key for rule in fit.rules) == ["a = 1", "c = 1"]
    assert all(rule.case_indices == (0, 1) for rule in fit.rules)


def test_solve_rules_prefers_the_parents_rules_among_equals() -> None:
    shape = _two_case_shape()  # the parent already has `x = 1` on both CASEs
    conditions = [parse("y = 1"), parse("x = 1")]  # both explain the same rows equally well
    effects = {(a, k): {0: -1.0} for a in (0, 1) for k in (0, 1)}
    fit = solve_rules(shape, conditions, effects, [-2.0])
    assert [rule.key for rule in fit.rules] == ["x = 1"]


def test_solve_rules_reports_infeasible_and_inconsistent_data() -> None:
    shape = _two_case_shape()
    conditions = [parse("a = 1")]
    effects = {(0, 0): {0: -1.0}, (0, 1): {0: -1.0}}
    assert solve_rules(shape, conditions, effects, [-1.0]).rules is None  # arity 2 cannot lower by exactly 1
    assert solve_rules(shape, conditions, effects, [0.0, -1.0]).status.startswith(
        "infeasible"
    )  # r1 untouchable
    clash = {(0, 0): {0: -1.0}, (1, 0): {0: -2.0}}
    result = solve_rules(shape, [parse("a = 1"), parse("b = 1")], clash, [-1.0])
    assert result.rules is None and result.status.startswith("inconsistent")


def _stagnant_context(root: ProgramView) -> ContextBundle:
    notes = tuple(StrategyNote(i, "hillclimb", "hillclimb", "neutral", 0.0) for i in range(1, 6))
    return ContextBundle(ledger=notes, root=root)


@pytest.mark.slow
def test_joint_fit_recovers_all_lockpicking_rules_from_a_stalled_parent() -> None:
    """A parent with surrogate guards (a stalled greedy search) gets refit to every training row exactly, and the
    fitted rules generalise to the 2,000 held-out codes (test score read by the test, never by the mutator)."""
    task = load_task("lockpicking6")
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    seed = ProgramView("1-0", task.seed_program, 0.02)
    stalled = task.seed_program.replace(  # surrogate guards a greedy run locked in (see the README's numbers)
        "(0, 5, 8) THEN 0 ELSE", "(0, 5, 8) THEN 0 WHEN p6 = 9 THEN 0 WHEN p1 = 3 THEN 0 ELSE"
    )
    assert stalled != task.seed_program
    request = MutationRequest(7, ProgramView("1-6", stalled, 0.1), env, _stagnant_context(seed))
    proposal = OfflineMutator(max_drafts=4).propose(request, iteration_rng(0, 7, 1))
    assert proposal.strategy == "restructure"
    assert proposal.approach.startswith("joint_fit: 12 rules")
    assert proposal.notes["joint_fit"]["group_size"] == 2
    assert evaluator.evaluate(proposal.code, "train").score == 1.0
    evaluator.close()
    report = Evaluator(task, REPORT_SPLITS)
    assert report.evaluate(proposal.code, "test").score == 1.0
    report.close()


def test_joint_fit_is_not_repeated_from_the_same_parent() -> None:
    task = load_task("lockpicking6")
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    seed = ProgramView("1-0", task.seed_program, 0.02)
    context = _stagnant_context(seed)
    tried = ContextBundle(ledger=context.ledger, root=seed, tried=frozenset({"joint_fit: 12 rules fitted"}))
    proposal = OfflineMutator(max_drafts=2).propose(
        MutationRequest(7, seed, env, tried), iteration_rng(0, 7, 1)
    )
    assert "joint_fit" not in proposal.notes
    assert not proposal.approach.startswith("joint_fit")
    evaluator.close()
