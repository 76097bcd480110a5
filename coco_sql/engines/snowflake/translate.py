"""coco-sql's own DuckDB queries as Snowflake SQL: the named reads, history and report queries (`store.reads_sql`,
`history_sql`, `report_sql`) and the store's repair query, written once in DuckDB and run by the Snowflake store
as sqlglot's translation, with what Snowflake's text must differ in (`SNOWFLAKE_REWRITES`). `store.portable`
checks that each query means the same in both."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from coco_sql.store.values import plain

Rewrite = Callable[[exp.Expression], exp.Expression]


def _drop_materialized(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
        node.set("materialized", None)
    return node


#: How the Snowflake text differs from sqlglot's translation: hints Snowflake does not take.
SNOWFLAKE_REWRITES: tuple[Rewrite, ...] = (_drop_materialized,)


def snowflake_query(sql: str, params: Mapping[str, Any] | Sequence[Any] = ()) -> str:
    """A DuckDB query of coco-sql's own in Snowflake SQL, with its `$name` (or `?`) parameters as literals: the
    values become sqlglot literal nodes, so a string from a tool call is quoted, never spliced."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    positional = iter(params) if not isinstance(params, Mapping) else None

    def bind(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter | exp.Placeholder):
            value = params[node.name] if isinstance(params, Mapping) and node.name else next(positional)  # type: ignore[arg-type]
            return exp.convert(plain(value))
        for rewrite in SNOWFLAKE_REWRITES:
            node = rewrite(node)
        return node

    return tree.transform(bind).sql(dialect="snowflake")
