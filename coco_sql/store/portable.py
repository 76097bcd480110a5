"""Engine-neutral SQL: what the store's named queries (`history_sql`, `report_sql`) and views (`sql/views.sql`) may
use, checked on the text each engine runs.

The queries are written once, in DuckDB; Snowflake gets sqlglot's translation (`engines.snowflake.translate`). sqlglot
translates syntax, not meaning, and the local tests run the Snowflake text back on DuckDB (`LocalSql`), so a
construct that means something else in Snowflake passes every local test. So the queries keep to constructs that
mean the same in both engines, and `portability_problems` checks a query's DuckDB text and its Snowflake text
against these rules (`tests/test_named_queries.py` runs it over every named query and view):

    functions   only those in CHECKED, whose meaning was compared between the engines; REFUSED says why the
                usual suspects are out:
                ARG_MAX / MAX_BY     over a STRUCT key DuckDB compares field by field in the order written;
                                     Snowflake compares OBJECTs by their keys in sorted order (or refuses)
                GREATEST / LEAST     DuckDB skips NULL arguments; Snowflake returns NULL
                structured values    STRUCT, LIST, MAP and their constructors and aggregates (LIST, ARRAY_AGG):
                                     no common comparison, and Snowflake returns them as JSON text
    division    of two integers is a DOUBLE in DuckDB and a NUMBER rounded to 6 decimals in Snowflake: one
                operand must be a DOUBLE (a CAST, or a column that is DOUBLE in every table)
    AVG         of integers is a DOUBLE in DuckDB and a NUMBER in Snowflake: only of a DOUBLE
    rowid       DuckDB's row-number pseudo-column; Snowflake has none
    ORDER BY    a descending key sorts NULLs last in DuckDB and first in Snowflake: each key of the Snowflake
                text must sort them where the DuckDB text does (`null_order_differences`; sqlglot writes NULLS
                LAST where it translates a DuckDB default)
    MATERIALIZED  a CTE hint DuckDB takes and Snowflake's parser refuses (`SqlRules.materialized_ctes`): the
                  Snowflake translation drops it

A list a query returns travels as text (`STRING_AGG` / `LISTAGG`, comma-separated) and is decoded by the store
(`named.decode_lists`), so both engines return the same Python list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT
from coco_sql.store.table_schema import table_columns

if TYPE_CHECKING:
    from coco_sql.engines import SqlRules

# Functions whose meaning was compared between DuckDB and Snowflake (sqlglot node types of either parse).
CHECKED: dict[type[exp.Expression], str] = {
    exp.And: "a connector",
    exp.Or: "a connector",
    exp.Not: "a connector",
    exp.Case: "CASE WHEN ... END",
    exp.If: "a CASE arm; IFF in Snowflake",
    exp.Coalesce: "the first non-NULL argument",
    exp.Cast: "to a scalar type",
    exp.Exists: "EXISTS (subquery)",
    exp.Count: "COUNT(x) skips NULLs, COUNT(*) counts rows",
    exp.CountIf: "COUNT(*) FILTER (WHERE c) in DuckDB, COUNT_IF(c) in Snowflake",
    exp.Sum: "of integers an integer, of DOUBLEs a DOUBLE, NULLs skipped",
    exp.Max: "of scalars, NULLs skipped",
    exp.Min: "of scalars, NULLs skipped",
    exp.Avg: "of DOUBLEs (checked below)",
    exp.RowNumber: "over an explicit ORDER BY",
    exp.Rank: "over an explicit ORDER BY",
    exp.Lag: "over an explicit ORDER BY",
    exp.GroupConcat: "STRING_AGG(x, ',' ORDER BY k) in DuckDB, LISTAGG(x, ',') WITHIN GROUP (ORDER BY k) in Snowflake",
}
REFUSED: dict[type[exp.Expression], str] = {
    exp.ArgMax: "MAX_BY compares a structured key differently in Snowflake (sorted OBJECT keys): rank with "
    "ROW_NUMBER() OVER (... ORDER BY ...) instead",
    exp.ArgMin: "MIN_BY compares a structured key differently in Snowflake: rank with ROW_NUMBER() instead",
    exp.Greatest: "GREATEST returns NULL in Snowflake when an argument is NULL (DuckDB skips it): use CASE",
    exp.Least: "LEAST returns NULL in Snowflake when an argument is NULL (DuckDB skips it): use CASE",
    exp.Struct: "a structured value: no common comparison or result type",
    exp.Array: "a structured value: no common comparison or result type",
    exp.Map: "a structured value: no common comparison or result type",
    exp.ArrayAgg: "a list comes back as JSON text from Snowflake: aggregate with STRING_AGG",
}
_DOUBLE = (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)


def portability_problems(
    sql: str, rules: SqlRules, double_columns: frozenset[str] = frozenset()
) -> list[str]:
    """What in `sql` (one query or view, in the dialect of the engine whose `rules` are given) breaks the rules of
    the module docstring; empty when nothing does. `double_columns`: the columns that are DOUBLE in every table
    (`double_columns()`)."""
    dialect = rules.dialect
    tree = sqlglot.parse_one(sql, read=dialect)
    problems = []
    for node in tree.walk():
        kind = type(node)
        if kind in REFUSED:
            problems.append(f"{_head(node, dialect)}: {REFUSED[kind]}")
        elif isinstance(node, exp.Func) and kind not in CHECKED:
            problems.append(
                f"{_head(node, dialect)}: not among the functions checked to mean the same in both"
            )
        elif isinstance(node, exp.Div) and not (
            _is_double(node.this, double_columns) or _is_double(node.expression, double_columns)
        ):
            problems.append(f"{node.sql(dialect)}: integer division differs (CAST an operand AS DOUBLE)")
        elif isinstance(node, exp.Avg) and not _is_double(node.this, double_columns):
            problems.append(f"{node.sql(dialect)}: AVG of integers differs (CAST its argument AS DOUBLE)")
        elif isinstance(node, exp.Column) and node.name.lower() == "rowid":
            problems.append("rowid: DuckDB's pseudo-column; Snowflake has none (order by a real column)")
        elif (
            isinstance(node, exp.CTE)
            and node.args.get("materialized") is not None
            and not rules.materialized_ctes
        ):
            problems.append(f"CTE {node.alias} AS MATERIALIZED: Snowflake's parser refuses the hint")
    return problems


def double_columns() -> frozenset[str]:
    """The column names that are DOUBLE in every table of the schema that has them."""
    types: dict[str, set[str]] = {}
    for columns in table_columns().values():
        for column in columns:
            types.setdefault(column.name, set()).add(column.type.upper())
    return frozenset(name for name, kinds in types.items() if kinds == {"DOUBLE"})


def null_order_differences(duckdb_sql: str, snowflake_sql: str) -> list[str]:
    """The ORDER BY keys (in queries and windows, in order) where the Snowflake text sorts NULLs elsewhere than
    the DuckDB text: each parse resolves its dialect's default (DuckDB: last; Snowflake: last ascending, first
    descending), so an implicit default that differs shows up as a difference."""
    duckdb_keys = list(sqlglot.parse_one(duckdb_sql, read=SANDBOX_DIALECT).find_all(exp.Ordered))
    snowflake_keys = list(sqlglot.parse_one(snowflake_sql, read=DEPLOY_DIALECT).find_all(exp.Ordered))
    if len(duckdb_keys) != len(snowflake_keys):
        return [f"{len(duckdb_keys)} ORDER BY keys in DuckDB, {len(snowflake_keys)} in Snowflake"]
    return [
        f"ORDER BY {s.sql(DEPLOY_DIALECT)}: NULLs sort {_nulls(s)} in Snowflake, {_nulls(d)} in DuckDB"
        for d, s in zip(duckdb_keys, snowflake_keys, strict=True)
        if bool(d.args.get("nulls_first")) != bool(s.args.get("nulls_first"))
    ]


def _nulls(key: exp.Ordered) -> str:
    return "first" if key.args.get("nulls_first") else "last"


def _is_double(node: exp.Expression, double_columns: frozenset[str]) -> bool:
    """Whether `node` is a DOUBLE whatever the engine: a CAST to DOUBLE, a DOUBLE column, or arithmetic,
    COALESCE or an aggregate over one."""
    if isinstance(node, exp.Cast):
        return node.to.this in _DOUBLE
    if isinstance(node, exp.Column):
        return node.name in double_columns
    if isinstance(node, exp.Paren | exp.Neg | exp.Max | exp.Min | exp.Sum):
        return _is_double(node.this, double_columns)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        return _is_double(node.this, double_columns) or _is_double(node.expression, double_columns)
    if isinstance(node, exp.Coalesce):
        return any(_is_double(e, double_columns) for e in [node.this, *node.expressions])
    return False


def _head(node: exp.Expression, dialect: str) -> str:
    text = node.sql(dialect)
    return text if len(text) <= 60 else text[:57] + "..."
