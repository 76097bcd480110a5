"""Screen many guard hypotheses against the training rows in ONE query, the way a warehouse would.

Testing a draft costs a validation and a query, so a mutator can afford a few dozen a turn. Hypotheses that only
append a WHEN arm to a CASE of the parent's outermost SELECT can instead be screened together: the parent is
cross-joined with a table of hypothesis numbers, hypothesis i's arm is appended to its CASE guarded by
`__coco_h.hyp = i`, and one query returns every hypothesis's output for every training row. The mutator then
scores all of them, and only the best few are rendered, validated and tested as real drafts before commit.

Safety: the screening query is built by this module from a parent that passed the validator, and the only nodes it
adds are the hypothesis arms (made of the parent's own columns and literals, checked by `_plain_arm`), one
comparison with the hypothesis number, and a VALUES list. It runs in the training sandbox like any probe.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from coco_sql.mutate.sql_edits import Edit, cases, enclosing_select

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


def screening_sql(query: exp.Select, edits: Sequence[Edit], output_column: str) -> str:
    """One DuckDB query returning (hypothesis number, id, output) for every screenable edit and row.

    Arms that some hypotheses remove stay in place but are switched off for exactly those hypotheses; a swap's new
    arm goes right after the arm it replaces, other new arms after all existing ones.
    """
    screen = query.copy()
    screen_cases = cases(screen)
    number = exp.column("hyp", table=HYPOTHESIS)
    dropped: dict[tuple[int, int], list[int]] = {}
    after: dict[tuple[int, int], list[exp.If]] = {}
    appended: dict[int, list[exp.If]] = {}
    for i, edit in enumerate(edits):
        if edit.drop is not None:
            dropped.setdefault(edit.drop, []).append(i)
        if edit.arm is not None:
            case_index, arm = edit.arm
            guard = exp.and_(
                exp.EQ(this=number.copy(), expression=exp.Literal.number(i)), exp.paren(arm.this.copy())
            )
            new = exp.If(this=guard, true=arm.args["true"].copy())
            if edit.drop is not None:
                after.setdefault(edit.drop, []).append(new)
            else:
                appended.setdefault(case_index, []).append(new)
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
            arms.extend(after.get((case_index, arm_index), []))
        arms.extend(appended.get(case_index, []))
        case.set("ifs", arms)
    screen.select(exp.alias_(number.copy(), "__coco_hyp"), copy=False)
    values = exp.values([(i,) for i in range(len(edits))], alias=HYPOTHESIS, columns=["hyp"])
    screen.join(values, join_type="cross", copy=False)
    output = exp.to_identifier(output_column, quoted=True).sql("duckdb")
    return (
        f"SELECT __coco_hyp, CAST(id AS VARCHAR), {output} FROM ({screen.sql(dialect='duckdb')}) AS screened"
    )


def split_by_hypothesis(rows: Sequence[tuple[object, ...]], count: int) -> list[list[tuple[object, object]]]:
    """(hyp, id, output) rows -> per hypothesis, its (id, output) pairs."""
    grouped: list[list[tuple[object, object]]] = [[] for _ in range(count)]
    for hyp, instance_id, output in rows:
        grouped[int(hyp)].append((instance_id, output))  # type: ignore[call-overload]
    return grouped
