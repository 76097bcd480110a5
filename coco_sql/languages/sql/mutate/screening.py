"""Screen many guard hypotheses against the training rows in ONE query, the way a warehouse would.

Testing a draft costs a validation and a query, so a mutator can afford a few dozen a turn. Hypotheses that only
append a WHEN arm to a CASE of the parent's outermost SELECT can instead be screened together: the parent is
cross-joined with a table of hypothesis numbers, hypothesis i's arm is appended to its CASE guarded by
`__coco_h.hyp = i`, and one query returns every hypothesis's output for every training row. The mutator scores
all of them inside the engine (`hypothesis_scoring`), and only the best few are rendered, validated and tested as
real drafts before commit.

Safety: the screening query is built by this module from a parent that passed the validator, and the only nodes it
adds are the hypothesis arms (made of the parent's own columns and literals, checked by `_plain_arm`), one
comparison with the hypothesis number, and a VALUES list. It runs in the training sandbox like any probe.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from coco_sql.languages.sql.mutate.edits import Edit, cases, enclosing_select
from coco_sql.plugin_loader import SANDBOX_DIALECT

HYPOTHESIS = "__coco_h"
ALLOWED_ARM_NODES = (
    exp.If, exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Not, exp.And, exp.Or,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Is, exp.Neg,
)  # fmt: skip


def screenable(query: exp.Expression, edits: Sequence[Edit]) -> list[Edit]:
    """The edits screening can evaluate: appending a plain arm and/or removing an arm, in CASEs of the outermost
    SELECT."""
    if not isinstance(query, exp.Select) or not all(enclosing_select(c) is query for c in cases(query)):
        return []
    return [
        e
        for e in edits
        if (e.arm is not None or e.drop is not None) and (e.arm is None or _plain_arm(e.arm[1]))
    ]


def _plain_arm(arm: exp.If) -> bool:
    return all(isinstance(node, ALLOWED_ARM_NODES) for node in arm.walk())


def screening_sql(
    query: exp.Select, edits: Sequence[Edit], output_column: str, *, baseline: bool = False
) -> str:
    """One DuckDB query returning (hypothesis number, id, output) for every screenable edit and row.

    Arms that some hypotheses remove stay in place but are switched off for exactly those hypotheses; a swap's new
    arm goes right after the arm it replaces, other new arms after all existing ones. With `baseline`, one more
    hypothesis, number len(edits), changes nothing: its rows are the parent's own outputs.
    """
    screen = query.copy()
    screen_cases = cases(screen)
    number = exp.column("hyp", table=HYPOTHESIS)
    dropped: dict[tuple[int, int], list[int]] = {}
    after: dict[tuple[int, int], list[tuple[int, exp.If]]] = {}
    appended: dict[int, list[tuple[int, exp.If]]] = {}
    for i, edit in enumerate(edits):
        if edit.drop is not None:
            dropped.setdefault(edit.drop, []).append(i)
        if edit.arm is not None:
            case_index, arm = edit.arm
            if edit.drop is not None:
                after.setdefault(edit.drop, []).append((i, arm))
            else:
                appended.setdefault(case_index, []).append((i, arm))
    for case_index, case in enumerate(screen_cases):
        arms: list[exp.If] = []
        for arm_index, arm in enumerate(case.args.get("ifs") or []):
            numbers = dropped.get((case_index, arm_index))
            if numbers:
                off = exp.Not(
                    this=exp.In(this=number.copy(), expressions=[exp.Literal.number(n) for n in numbers])
                )
                arm.set("this", exp.and_(off, exp.paren(arm.this.copy())))
            arms.append(arm)
            arms.extend(_guarded(number, after.get((case_index, arm_index), [])))
        arms.extend(_guarded(number, appended.get(case_index, [])))
        case.set("ifs", arms)
    screen.select(exp.alias_(number.copy(), "__coco_hyp"), copy=False)
    count = len(edits) + (1 if baseline else 0)
    values = exp.values([(i,) for i in range(count)], alias=HYPOTHESIS, columns=["hyp"])
    screen.join(values, join_type="cross", copy=False)
    output = exp.to_identifier(output_column, quoted=True).sql(SANDBOX_DIALECT)
    return f"SELECT __coco_hyp, CAST(id AS VARCHAR), {output} FROM ({screen.sql(dialect=SANDBOX_DIALECT)}) AS screened"


def _guarded(number: exp.Column, arms: list[tuple[int, exp.If]]) -> list[exp.If]:
    """Consecutive new arms, each firing for its own hypothesis only, as at most one WHEN.

    One arm is `WHEN hyp = i AND (condition) THEN leaf`. Several become one arm whose condition and leaf are picked
    by the hypothesis number through a balanced CASE tree (`_by_hypothesis`): at most one of them can fire on a
    row, so that is the same CASE, and DuckDB, which tries a CASE's WHENs one after the other, compares a row with
    log2(n) numbers instead of n (at 50,000 rows and 160 hypotheses: 8 M rows times 160 comparisons)."""
    if not arms:
        return []
    if len(arms) == 1:
        i, arm = arms[0]
        guard = exp.and_(
            exp.EQ(this=number.copy(), expression=exp.Literal.number(i)), exp.paren(arm.this.copy())
        )
        return [exp.If(this=guard, true=arm.args["true"].copy())]
    conditions = [(i, exp.paren(arm.this.copy())) for i, arm in arms]
    leaves = [(i, arm.args["true"].copy()) for i, arm in arms]
    same_leaf = len({leaf.sql(dialect=SANDBOX_DIALECT) for _, leaf in leaves}) == 1
    return [
        exp.If(
            this=_by_hypothesis(number, conditions, exp.false()),
            true=leaves[0][1] if same_leaf else _by_hypothesis(number, leaves, exp.null()),
        )
    ]


def _by_hypothesis(
    number: exp.Column, branches: list[tuple[int, exp.Expression]], default: exp.Expression
) -> exp.Expression:
    """`value` on the rows of hypothesis `i` for each (i, value) of `branches` (sorted by i), else `default`."""
    if len(branches) == 1:
        i, value = branches[0]
        hit = exp.EQ(this=number.copy(), expression=exp.Literal.number(i))
        return exp.Case(ifs=[exp.If(this=hit, true=value)], default=default.copy())
    middle = len(branches) // 2
    lower = exp.LT(this=number.copy(), expression=exp.Literal.number(branches[middle][0]))
    return exp.Case(
        ifs=[exp.If(this=lower, true=_by_hypothesis(number, branches[:middle], default))],
        default=_by_hypothesis(number, branches[middle:], default),
    )


def split_by_hypothesis(rows: Sequence[tuple[object, ...]], count: int) -> list[list[tuple[object, object]]]:
    """(hyp, id, output) rows -> per hypothesis, its (id, output) pairs."""
    grouped: list[list[tuple[object, object]]] = [[] for _ in range(count)]
    for hyp, instance_id, output in rows:
        grouped[int(hyp)].append((instance_id, output))  # type: ignore[call-overload]
    return grouped
