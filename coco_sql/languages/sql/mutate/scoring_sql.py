"""The SQL half of `languages.sql.mutate.hypothesis_scoring`: the row rules, per contract and output type, under which SQL and
Python provably agree (`_row_rule`, `_text_rule`), and the one aggregate query that scores every hypothesis
against the parent (`_scoring_sql`). A type without a rule returns None, and the caller keeps the Python path."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from coco_sql.errors import EvaluationError
from coco_sql.languages.sql.mutate.edits import cases
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sandbox import QueryResult

INTEGER_TYPES = (
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
)  # fmt: skip
FLOAT_TYPES = ("FLOAT", "DOUBLE")
EXACT_LIMIT = 2**53  # integers below it convert to DOUBLE exactly, in DuckDB as in Python
MISSING = -1e6  # closeness of a missing output for numeric contracts
_PRINTABLE = "'[ -~]*'"  # labels whose strip() and lower() are DuckDB's trim() and lower()

# The output type a program of each contract most likely has: the row rule is written for it first (`_scored`).
_CONTRACT_KINDS = {kind: kind for kind in ("INTEGER", "DOUBLE", "VARCHAR", "BOOLEAN", "VARCHAR[]")}


# -- the SQL -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _RowRule:
    """SQL over `p.o` (the output; `p.n` output rows for the training row, NULL for none) and `l.expected`."""

    closeness: str
    exact: str  # TRUE where this SQL provably equals Python's value (NULL counts as TRUE)
    score: str | None  # the row score (None: not written here for this scorer)


def _scored(
    env: DraftEnvironment,
    make_sql: Callable[[_RowRule], str],
    types_sql: str,
    outputs: slice,
    numeric: bool,
    *,
    run: Callable[[str], QueryResult] | None = None,
    need_score: bool = False,
) -> list[tuple[object, ...]] | None:
    """The scoring query's rows, when its row rule fits the outputs' types and every value was exact; else None.

    The rule is first written for the type the contract suggests (INTEGER outputs for an INTEGER contract...), and
    the query reports the types it really saw (the columns `outputs` of `types_sql`): a query whose types are of
    another family than the rule's is run once more with the right rule, without a separate DESCRIBE."""
    kind = _CONTRACT_KINDS.get(env.output_type.upper())
    run = run or env.probe
    for _ in range(2):
        rule = _row_rule(env, kind, numeric) if kind is not None else None
        if rule is None or (need_score and rule.score is None):
            return None
        try:
            rows: list[tuple[object, ...]] | None = run(make_sql(rule)).rows
        except EvaluationError:  # a rule that does not bind to the real type, or past the memory bound
            rows = None
        if rows:
            seen = [str(t).upper() for t in rows[0][-1]][outputs]  # type: ignore[union-attr]
        else:
            seen = (_column_types(env, types_sql) or [])[outputs]
        families = {_family(t) for t in seen}
        if len(families) != 1:
            return None
        if families == {_family(kind)}:
            return rows if rows and all(row[4] for row in rows) else None
        kind, run = seen[0], env.probe  # a retry is not another draft test
    return None


def _family(kind: str | None) -> str | None:
    """Types the row rules treat alike."""
    return "INTEGER" if kind in INTEGER_TYPES else "DOUBLE" if kind in FLOAT_TYPES else kind


def _column_types(env: DraftEnvironment, sql: str) -> list[str] | None:
    """The DuckDB types of a query's columns, read by binding it (DESCRIBE runs nothing)."""
    try:
        return [str(row[0]).upper() for row in env.probe(f"SELECT column_type FROM (DESCRIBE {sql})").rows]
    except EvaluationError:
        return None


def _same_rows(query: exp.Select) -> bool:
    """Whether every screened hypothesis gives exactly the parent's rows, only with other outputs: all its CASEs
    are in the projection (not in `id`) of a SELECT that neither aggregates, deduplicates, unnests nor limits.
    Then a row the parent gives no single output for is missing under every hypothesis: a zero term of every
    gain."""
    if any(query.args.get(key) for key in ("distinct", "group", "having", "qualify", "limit", "offset")):
        return False
    projected = [node for p in query.expressions for node in p.walk()]
    if any(isinstance(node, exp.AggFunc | exp.Unnest | exp.Explode) for node in projected):
        return False
    outputs = {id(node) for p in query.expressions if p.alias_or_name != "id" for node in p.walk()}
    return all(id(case) in outputs for case in cases(query))


def _scoring_sql(
    labels: str,
    screen: str,
    count: int,
    rule: _RowRule,
    penalty: float,
    types_sql: str,
    *,
    same_rows: bool,
    scores: bool = False,
) -> str:
    """Per hypothesis h < count: (h, gain, fixed, broken, exact, rows, [non-zero row scores in row order] or NULL
    without `scores`, [the column types of `types_sql`]) from `screen`'s (hypothesis, id, output) rows,
    hypothesis `count` being the parent.

    With `same_rows` the screening streams through the join and the aggregate (the parent's rows are the same
    query filtered to its number, not materialised); otherwise every (hypothesis, row) is counted first."""
    score = ("c" if rule.score == rule.closeness else rule.score) if scores else "NULL"
    if same_rows:  # the parent's output count per row stands for every hypothesis's
        rows = f"""
__coco_rows AS NOT MATERIALIZED (
  SELECT p.hyp, l.pos, {rule.closeness} AS c, {score} AS s, COALESCE({rule.exact}, TRUE) AS exact
  FROM (SELECT hyp, id, o, 1 AS n FROM __coco_screened) AS p JOIN __coco_labels AS l ON l.id = p.id
),
__coco_parent AS (
  SELECT pos, any_value(c) AS c, bool_and(exact) AS exact FROM __coco_rows WHERE hyp = {count}
  GROUP BY pos HAVING count(*) = 1
)"""
    else:
        rows = f"""
__coco_produced AS (
  SELECT s.hyp, l.pos, count(*) AS n, first(s.o) AS o
  FROM __coco_screened AS s JOIN __coco_labels AS l ON l.id = s.id GROUP BY s.hyp, l.pos
),
__coco_rows AS MATERIALIZED (
  SELECT h.hyp, l.pos, {rule.closeness} AS c, {score} AS s, COALESCE({rule.exact}, TRUE) AS exact
  FROM __coco_labels AS l CROSS JOIN range({count + 1}) AS h(hyp)
  LEFT JOIN __coco_produced AS p ON p.hyp = h.hyp AND p.pos = l.pos
),
__coco_parent AS (SELECT pos, c, exact FROM __coco_rows WHERE hyp = {count})"""
    scored = "list(s ORDER BY pos) FILTER (WHERE s <> 0)" if scores else "NULL"
    return f"""
WITH __coco_labels AS {labels},
__coco_screened AS NOT MATERIALIZED (
  SELECT hyp, COALESCE(id, 'None') AS id, o FROM ({screen}) AS s(hyp, id, o)
),{rows},
__coco_deltas AS (
  SELECT r.hyp, r.pos, r.c - b.c AS d, r.s, r.exact AND b.exact AS exact
  FROM __coco_rows AS r JOIN __coco_parent AS b ON b.pos = r.pos WHERE r.hyp < {count}
)
SELECT hyp,
  COALESCE(list_reduce(list(CASE WHEN d > 0 THEN d ELSE {_double(penalty)} * d END ORDER BY pos)
    FILTER (WHERE d <> 0), lambda a, x: a + x), {_double(0.0)}) AS gain,
  count(*) FILTER (WHERE d > 0) AS fixed,
  count(*) FILTER (WHERE d < 0) AS broken,
  bool_and(exact AND isfinite(d)) AS exact,
  count(*) AS n_rows,
  {scored} AS scores,
  (SELECT list(column_type) FROM (DESCRIBE {types_sql})) AS types
FROM __coco_deltas GROUP BY hyp ORDER BY hyp"""


def _double(value: float) -> str:
    return f"CAST('{value!r}' AS DOUBLE)"


def _row_rule(env: DraftEnvironment, column_type: str, numeric: bool) -> _RowRule | None:
    """The closeness of a row (and its score, for numeric contracts) in SQL for outputs of `column_type`, following
    `coerce_output` and the task's scorer; None when that type or scorer is not written here."""
    contract, kind, scorer = env.output_type.upper(), column_type.upper(), env.task.scorer
    present, hit, miss = "p.n = 1", _double(1.0), _double(0.0)
    if numeric:
        expected = "CAST(l.expected AS DOUBLE)"
        expected_exact = (
            "isfinite(l.expected)" if contract == "DOUBLE" else f"abs(l.expected) < {EXACT_LIMIT}"
        )
        if kind in INTEGER_TYPES:
            value, exact = "CAST(p.o AS DOUBLE)", f"abs(p.o) < {EXACT_LIMIT}"
        elif kind in FLOAT_TYPES and contract == "INTEGER":  # non-integral, NaN, infinite: missing
            value, exact = "CASE WHEN isfinite(p.o) AND p.o = trunc(p.o) THEN CAST(p.o AS DOUBLE) END", "TRUE"
        elif kind in FLOAT_TYPES:
            value, exact = "CASE WHEN NOT isnan(p.o) THEN CAST(p.o AS DOUBLE) END", "NOT isinf(p.o)"
        elif kind == "BOOLEAN":
            value, exact = "CAST(NULL AS DOUBLE)", "TRUE"
        else:
            return None
        found = f"{present} AND ({value}) IS NOT NULL"
        if scorer.kind == "exact":
            score: str | None = f"CASE WHEN {found} AND ({value}) = {expected} THEN {hit} ELSE {miss} END"
        elif scorer.kind == "numeric":
            tolerances = (getattr(scorer, "abs_tol", 0.0), getattr(scorer, "rel_tol", 0.0))
            tolerance = f"{_double(tolerances[0])} + {_double(tolerances[1])} * abs({expected})"
            score = (
                f"CASE WHEN {found} AND abs(({value}) - {expected}) <= {tolerance} THEN {hit} ELSE {miss} END"
            )
        else:
            score = None
        return _RowRule(
            f"CASE WHEN {found} THEN -abs(({value}) - {expected}) ELSE {_double(MISSING)} END",
            f"({exact}) AND ({expected_exact})",
            score,
        )
    text = _text_rule(contract, kind, scorer.kind)
    return _RowRule(text[0], text[1], text[0]) if text is not None else None  # the closeness is the score


def _text_rule(contract: str, kind: str, scorer: str) -> tuple[str, str] | None:
    """(row score, exact) for non-numeric contracts: equality of texts, booleans and lists; example F1."""
    present, hit, miss = "p.n = 1", _double(1.0), _double(0.0)
    if (
        scorer == "exact"
        and contract == "VARCHAR"
        and (kind in ("VARCHAR", "BOOLEAN") or kind in INTEGER_TYPES)
    ):
        return f"CASE WHEN {present} AND CAST(p.o AS VARCHAR) = l.expected THEN {hit} ELSE {miss} END", "TRUE"
    if scorer == "exact" and contract == "BOOLEAN" and (kind == "BOOLEAN" or kind in INTEGER_TYPES):
        value = "p.o" if kind == "BOOLEAN" else "CASE WHEN p.o = 0 THEN FALSE WHEN p.o = 1 THEN TRUE END"
        return f"CASE WHEN {present} AND ({value}) = l.expected THEN {hit} ELSE {miss} END", "TRUE"
    if contract != "VARCHAR[]" or kind != "VARCHAR[]" or scorer not in ("exact", "multilabel_f1"):
        return None
    if scorer == "exact":
        items = "list_filter(p.o, lambda x: x IS NOT NULL)"
        return f"CASE WHEN {present} AND {items} = l.expected THEN {hit} ELSE {miss} END", "TRUE"

    def label_set(column: str) -> str:
        return f"list_distinct(list_filter(list_transform({column}, lambda x: lower(trim(x))), lambda x: x <> ''))"

    def printable(column: str) -> str:
        return f"len(list_filter({column}, lambda x: NOT regexp_full_match(x, {_PRINTABLE}))) = 0"

    predicted, gold = label_set("p.o"), label_set("l.expected")
    f1 = (
        f"CASE WHEN len({predicted}) = 0 AND len({gold}) = 0 THEN {hit} ELSE "
        f"{_double(2.0)} * len(list_intersect({predicted}, {gold})) / (len({predicted}) + len({gold})) END"
    )
    return (
        f"CASE WHEN {present} AND p.o IS NOT NULL THEN {f1} ELSE {miss} END",
        f"({printable('p.o')} OR p.o IS NULL) AND {printable('l.expected')}",
    )
