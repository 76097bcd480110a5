"""Edits of a SQL program's AST. Pure functions: each takes a parsed query and returns candidate drafts.

The edits work on guarded branches (the WHEN arms of CASE expressions), the unit in which a SQL program states
a rule. They are the offline mutator's hypothesis space:

- duplicate_guard: copy a WHEN arm into some CASE, re-pointing its column and setting its literals to the
  values that column takes on a target row (a hypothesis that the rule fires there);
- change_leaf: replace a literal in a WHEN condition by a value the compared column takes in the data, or the
  column by another column of the same relation;
- recombine: insert a WHEN arm that a second parent has in the same CASE and this parent lacks;
- drop_guard: remove one WHEN arm.

CASE expressions are addressed by their index in a depth-first walk, so the same index names the same CASE in a
parent and in its descendants (edits add or remove arms, never CASEs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.ai_binding import bind_ai_calls

COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


@dataclass(frozen=True)
class Edit:
    """One hypothesis: a description and how to apply it. Applying copies the query; listing edits does not,
    so a mutator can enumerate thousands of hypotheses and materialise only those it tests."""

    operator: str
    description: str
    apply: Callable[[exp.Expression], exp.Expression]
    donor_id: str | None = None
    arm: tuple[int, exp.If] | None = None  # (CASE index, WHEN arm) the edit appends, if it is that simple
    drop: tuple[int, int] | None = None  # (CASE index, arm index) the edit removes, if it is that simple

    @property
    def approach(self) -> str:
        """How the edit is recorded as a child's approach (and recognised when a parent's child repeats it)."""
        return f"{self.operator}: {self.description}"


@dataclass(frozen=True)
class ScopeData:
    """What one relation looks like on the training rows: its columns, the target row and frequent values."""

    columns: tuple[str, ...]
    target_row: Mapping[str, object] | None
    frequent: Mapping[str, tuple[object, ...]]
    probe: str = ""  # the DuckDB query that produced this profile (see scope_probe)


# Which of these conditions hold on the target row of this scope (evaluated by the live data, not guessed).
Fires = Callable[[ScopeData, list[exp.Expression]], list[bool]]


def cases(query: exp.Expression) -> list[exp.Case]:
    return list(query.find_all(exp.Case, bfs=False))


def enclosing_select(node: exp.Expression) -> exp.Select | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent


def scope_probe(query: exp.Expression, select: exp.Select) -> str | None:
    """A DuckDB query returning every row and column visible to `select`'s projections (its FROM, JOINs, WHERE).

    The root's CTEs are attached so that a CASE over a CTE can be profiled; AI calls among them (a proxy's
    AI_EMBED) are bound to their UDFs as the validator binds them. None when `select` reads nothing.
    """
    source = select.args.get("from_")
    if source is None:
        return None
    probe = exp.Select(expressions=[exp.Star()], from_=source.copy())
    for key in ("joins", "where"):
        if select.args.get(key):
            value = select.args[key]
            probe.set(key, [j.copy() for j in value] if isinstance(value, list) else value.copy())
    ctes = query.args.get("with_")
    if ctes is not None:
        probe.set("with_", ctes.copy())
    return bind_ai_calls(probe).sql(dialect=SANDBOX_DIALECT)


def literal(value: object) -> exp.Expression | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float):
        return exp.Literal.number(value)
    return exp.Literal.string(str(value))


def _compared_column(node: exp.Literal) -> exp.Column | None:
    """The column a literal is compared with (`col = 4`, `col IN (1, 4)`), if any."""
    parent = node.parent
    if isinstance(parent, COMPARISONS):
        other = parent.this if parent.expression is node else parent.expression
        return other if isinstance(other, exp.Column) else None
    if isinstance(parent, exp.In) and isinstance(parent.this, exp.Column):
        return parent.this
    return None


def _insert_arm(case: exp.Case, arm: exp.If) -> None:
    case.set("ifs", [*(case.args.get("ifs") or []), arm])


def _arm_keys(case: exp.Case) -> set[str]:
    return {arm.sql(dialect=SANDBOX_DIALECT) for arm in case.args.get("ifs") or []}


def repoint(
    condition: exp.Expression, column: str, value_of: Callable[[str], object]
) -> exp.Expression | None:
    """Point every column of `condition` at `column` and set the literals compared with it to its value.

    An IN list collapses to the single value. Returns None when a needed value is missing (NULL).
    """
    condition = condition.copy()
    for col in list(condition.find_all(exp.Column)):
        col.replace(exp.column(column))
    value = value_of(column)
    new = literal(value)
    if new is None:
        return None
    for node in list(condition.find_all(exp.In)):
        if isinstance(node.this, exp.Column) and node.expressions:
            node.set("expressions", [new.copy()])
    for lit in list(condition.find_all(exp.Literal)):
        if _compared_column(lit) is not None:
            lit.replace(new.copy())
    return condition


def _value_key(value: object) -> str:
    """The SQL of the literal `repoint` sets for `value` ("" for NULL, which it refuses)."""
    new = literal(value)
    return "" if new is None else new.sql(dialect=SANDBOX_DIALECT)


def _with_arm(case_index: int, arm: exp.If) -> Callable[[exp.Expression], exp.Expression]:
    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        _insert_arm(cases(child)[case_index], arm.copy())
        return child

    return apply


def duplicate_guard(
    query: exp.Expression, scopes: Mapping[int, ScopeData], fires: Fires | None = None
) -> list[Edit]:
    """Every (source arm shape, target CASE, column) hypothesis for the target row, de-duplicated by SQL.

    A hypothesis says "this guard fires on the target row", so when `fires` is given, guards whose condition
    is false on that row (e.g. `NOT p2 IN (9)` fitted to a row where p2 = 9) are dropped before any is tested.
    """
    all_cases = cases(query)
    sources = [
        arm
        for case in all_cases
        for arm in case.args.get("ifs") or []
        if any(True for _ in arm.this.find_all(exp.Column))
    ]
    candidates: dict[int, dict[str, tuple[exp.Expression, exp.Expression]]] = {}
    # The CASEs of a query usually share one target row, so the same (arm, column, value) comes up once per CASE:
    # each is re-pointed and rendered once (a copy and a render per hypothesis were most of a mutation's CPU).
    # The conditions are shared between CASEs, so an arm made from one takes a copy.
    repointed: dict[tuple[int, str, str], tuple[str, exp.Expression] | None] = {}
    for target_index in range(len(all_cases)):
        scope = scopes.get(target_index)
        if scope is None or scope.target_row is None:
            continue
        found = candidates.setdefault(target_index, {})
        values = {column: _value_key(scope.target_row.get(column)) for column in scope.columns}
        for source_index, source in enumerate(sources):
            for column in scope.columns:
                if column == "id":
                    continue
                memo_key = (source_index, column, values[column])
                if memo_key not in repointed:
                    condition = repoint(source.this, column, scope.target_row.get)
                    repointed[memo_key] = (
                        None if condition is None else (condition.sql(dialect=SANDBOX_DIALECT), condition)
                    )
                hit = repointed[memo_key]
                if hit is not None:
                    found.setdefault(hit[0], (hit[1], source.args["true"]))
    holding: dict[str, bool] = {}
    if fires is not None:
        for target_index, found in candidates.items():
            unknown = [key for key in found if key not in holding]
            if unknown:
                verdicts = fires(scopes[target_index], [found[key][0] for key in unknown])
                holding.update(zip(unknown, verdicts, strict=True))
    edits: list[Edit] = []
    for target_index, found in candidates.items():
        existing = _arm_keys(all_cases[target_index])
        for key, (condition, then) in found.items():
            if fires is not None and not holding.get(key, False):
                continue
            arm = exp.If(this=condition.copy(), true=then.copy())
            if arm.sql(dialect=SANDBOX_DIALECT) in existing:
                continue
            edits.append(
                Edit(
                    "duplicate_guard",
                    f"add `WHEN {key} THEN {then.sql(SANDBOX_DIALECT)}` to CASE #{target_index + 1}",
                    _with_arm(target_index, arm),
                    arm=(target_index, arm),
                )
            )
    return edits


def _with_leaf(case_index: int, arm_index: int, leaf_index: int, option: exp.Expression):
    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        arm = (cases(child)[case_index].args.get("ifs") or [])[arm_index]
        list(arm.this.find_all(exp.Literal, exp.Column))[leaf_index].replace(option.copy())
        return child

    return apply


def change_leaf(query: exp.Expression, scopes: Mapping[int, ScopeData]) -> list[Edit]:
    """Replace one literal of a WHEN condition by a frequent or target-row value of its column, or swap a column."""
    edits: dict[tuple[int, int, int, str], Edit] = {}
    for case_index, case in enumerate(cases(query)):
        scope = scopes.get(case_index)
        if scope is None:
            continue
        for arm_index, arm in enumerate(case.args.get("ifs") or []):
            for leaf_index, leaf in enumerate(arm.this.find_all(exp.Literal, exp.Column)):
                if isinstance(leaf, exp.Literal):
                    column = _compared_column(leaf)
                    if column is None:
                        continue
                    values = list(scope.frequent.get(column.name, ()))
                    if scope.target_row is not None:
                        values.insert(0, scope.target_row.get(column.name))
                    options = [v for v in (literal(x) for x in values) if v is not None]
                else:
                    options = [exp.column(c) for c in scope.columns if c not in ("id", leaf.name)]
                for option in options:
                    new, old = option.sql(SANDBOX_DIALECT), leaf.sql(SANDBOX_DIALECT)
                    key = (case_index, arm_index, leaf_index, new)
                    if new == old or key in edits:
                        continue
                    edits[key] = Edit(
                        "change_leaf",
                        f"in CASE #{case_index + 1}, change `{old}` to `{new}` in `WHEN {arm.this.sql(SANDBOX_DIALECT)}`",
                        _with_leaf(case_index, arm_index, leaf_index, option),
                    )
    return list(edits.values())


def recombine(query: exp.Expression, donor: exp.Expression, donor_id: str) -> list[Edit]:
    """Arms the donor has in CASE #k and this program lacks, each inserted into this program's CASE #k."""
    mine, theirs = cases(query), cases(donor)
    edits: list[Edit] = []
    for index in range(min(len(mine), len(theirs))):
        existing = _arm_keys(mine[index])
        for arm in theirs[index].args.get("ifs") or []:
            if arm.sql(dialect=SANDBOX_DIALECT) in existing:
                continue
            edits.append(
                Edit(
                    "recombine",
                    f"take `WHEN {arm.this.sql(SANDBOX_DIALECT)}` of CASE #{index + 1} from {donor_id}",
                    _with_arm(index, arm),
                    donor_id=donor_id,
                    arm=(index, arm),
                )
            )
    return edits


def _without_arm(case_index: int, arm_index: int) -> Callable[[exp.Expression], exp.Expression]:
    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        case = cases(child)[case_index]
        arms = list(case.args.get("ifs") or [])
        del arms[arm_index]
        case.set("ifs", arms)
        return child

    return apply


def drop_guard(query: exp.Expression) -> list[Edit]:
    edits: list[Edit] = []
    for case_index, case in enumerate(cases(query)):
        arms = case.args.get("ifs") or []
        if len(arms) < 2:
            continue
        for arm_index, arm in enumerate(arms):
            edits.append(
                Edit(
                    "drop_guard",
                    f"drop `WHEN {arm.this.sql(SANDBOX_DIALECT)}` from CASE #{case_index + 1}",
                    _without_arm(case_index, arm_index),
                    drop=(case_index, arm_index),
                )
            )
    return edits


def swap_guard(query: exp.Expression, additions: list[Edit]) -> list[Edit]:
    """Replace an existing arm by a new one in the same CASE: a drop and an append as one edit.

    Greedy addition can lock in a surrogate guard that later blocks the true one (both explain the same rows);
    swapping it out is a move neither a drop nor an append makes on its own.
    """
    edits: list[Edit] = []
    all_cases = cases(query)
    for addition in additions:
        if addition.arm is None:
            continue
        case_index, new_arm = addition.arm
        for arm_index, old in enumerate(all_cases[case_index].args.get("ifs") or []):
            if not any(True for _ in old.this.find_all(exp.Column)):
                continue

            def apply(
                q: exp.Expression, k: int = case_index, j: int = arm_index, arm: exp.If = new_arm
            ) -> exp.Expression:
                child = q.copy()
                case = cases(child)[k]
                arms = list(case.args.get("ifs") or [])
                arms[j] = arm.copy()
                case.set("ifs", arms)
                return child

            edits.append(
                Edit(
                    "swap_guard",
                    f"in CASE #{case_index + 1}, replace `WHEN {old.this.sql(SANDBOX_DIALECT)}` by "
                    f"`WHEN {new_arm.this.sql(SANDBOX_DIALECT)}`",
                    apply,
                    donor_id=addition.donor_id,
                    arm=addition.arm,
                    drop=(case_index, arm_index),
                )
            )
    return edits


def frequent_values(
    rows: Sequence[Sequence[object]], columns: Sequence[str], top: int = 10
) -> dict[str, tuple]:
    """The `top` most frequent non-NULL values of each column (ties broken by value, for determinism)."""
    from collections import Counter

    result: dict[str, tuple] = {}
    for index, column in enumerate(columns):
        counts = Counter(row[index] for row in rows if row[index] is not None)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
        result[column] = tuple(value for value, _ in ranked[:top])
    return result


def static_scopes(query: exp.Expression, rng: np.random.Generator) -> dict[int, ScopeData]:
    """Scopes built from the program text alone, for mutation without live probing (the static ablation).

    The columns are those the CASE conditions of the same SELECT mention; the values are the literals the
    program compares with any column; the 'target row' is a random assignment of those values.
    """
    pool = sorted(
        {lit.to_py() for lit in query.find_all(exp.Literal) if _compared_column(lit) is not None}, key=str
    )
    scopes: dict[int, ScopeData] = {}
    for index, case in enumerate(cases(query)):
        select = enclosing_select(case)
        if select is None or not pool:
            continue
        columns = tuple(
            sorted(
                {c.name for other in select.find_all(exp.Case) for c in other.find_all(exp.Column)} - {"id"}
            )
        )
        target_row = {column: pool[int(rng.integers(len(pool)))] for column in columns}
        scopes[index] = ScopeData(
            columns=columns, target_row=target_row, frequent={c: tuple(pool) for c in columns}
        )
    return scopes
