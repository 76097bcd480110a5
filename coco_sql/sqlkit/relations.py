"""A query read over another relation: every reference to a table name replaced (a split's staged table, a
dbt model's source), its CTEs of the same name left alone."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope


def over_source(
    query: exp.Expression, source: str | exp.Table | exp.Subquery, relation: str = "input"
) -> exp.Expression:
    """`query` with every reference to the table `relation` (not a CTE of that name) replaced by `source` (a
    table, or a subquery: `_projection`)."""
    query = query.copy()
    for scope in traverse_scope(query):
        for table in scope.tables:
            if table.name.lower() == relation and not table.db and table.name not in scope.cte_sources:
                replacement = (
                    source.copy() if isinstance(source, exp.Table | exp.Subquery) else exp.to_table(source)
                )
                replacement.set(
                    "alias", table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(relation))
                )
                table.replace(replacement)
    return query
