"""`LocalSql`: the SnowparkStore's raw-SQL executor for Snowpark's local testing mode, which has no `session.sql`.

`default_executor` picks it for a local-testing session (`SessionSql` otherwise). It runs the store's Snowflake
SQL on DuckDB: sqlglot transpiles the statement (Snowflake to DuckDB), the tables it
reads are copied out of the local session (`session.table(name).to_pandas()`), coco-sql's views are defined over
them from `sql/views.sql`, and the query runs in a fresh in-memory DuckDB. Everything else the store does goes
through the real Snowpark DataFrame API. Local development and the test suite use it; an account never does.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import TYPE_CHECKING

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.engines.snowflake.sql import SessionSql, SqlExecutor, SqlResult, is_local
from coco_sql.store.schema import schema_statements

if TYPE_CHECKING:
    from snowflake.snowpark import Session


def default_executor(session: Session) -> SqlExecutor:
    """`SessionSql` on an account; `LocalSql` (DuckDB) in Snowpark's local testing mode, which has no SQL."""
    return LocalSql(session) if is_local(session) else SessionSql(session)


class LocalSql:
    """Snowflake SQL over a local-testing session's tables, run by DuckDB (one read-only SELECT per call)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __call__(self, sql: str, *, timeout_s: float | None = None) -> SqlResult:
        tree = sqlglot.parse_one(sql, read="snowflake")
        if not isinstance(tree, exp.Query):
            raise ValueError(f"local testing runs queries only, not {type(tree).__name__}")
        views = _views()
        tables, needed_views = _read_through(tree, views)
        con = duckdb.connect()
        try:
            for name in sorted(tables):
                frame = self._session.table(name).to_pandas()
                con.register(f"_coco_{name}", frame)
                con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM "_coco_{name}"')
            for name, (statement, _) in views.items():  # in sql/views.sql's order: dependencies first
                if name in needed_views:
                    con.execute(statement)
            timer = threading.Timer(timeout_s, con.interrupt) if timeout_s else None
            if timer is not None:
                timer.start()
            try:
                cursor = con.execute(tree.sql(dialect="duckdb"))
                frame = cursor.df()
                types = {d[0]: str(d[1]) for d in cursor.description or ()}
            finally:
                if timer is not None:
                    timer.cancel()
        finally:
            con.close()
        renamed = {c: c.lower() if c.isupper() else c for c in frame.columns}
        frame = frame.rename(columns=renamed)
        return SqlResult(frame, {renamed[c]: t for c, t in types.items()})


@cache
def _views() -> dict[str, tuple[str, frozenset[str]]]:
    """coco-sql's views: name -> (DuckDB DDL, the tables and views it reads)."""
    views: dict[str, tuple[str, frozenset[str]]] = {}
    for statement in schema_statements():
        create = sqlglot.parse_one(statement, read="duckdb")
        if isinstance(create, exp.Create) and create.kind == "VIEW":
            views[create.this.name.lower()] = (statement, frozenset(_relations(create.expression)))
    return views


def _read_through(
    tree: exp.Expression, views: dict[str, tuple[str, frozenset[str]]]
) -> tuple[set[str], set[str]]:
    """The base tables a query reads and the coco-sql views it reads them through (views are defined in
    DuckDB, not copied)."""
    pending = _relations(tree)
    tables: set[str] = set()
    used: set[str] = set()
    while pending:
        name = pending.pop()
        if name in views:
            used.add(name)
            pending |= views[name][1] - tables - used
        else:
            tables.add(name)
    return tables, used


def _relations(tree: exp.Expression) -> set[str]:
    names: set[str] = set()
    for scope in traverse_scope(tree):
        for source in scope.tables:
            if source.name not in scope.cte_sources:
                names.add(source.name.lower())
    return names
