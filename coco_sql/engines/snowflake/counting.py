"""Counting the statements a SnowparkStore would send to an account, measured in Snowpark's local testing mode.

Local testing runs no SQL, so the count follows what Snowpark 1.56 sends for each call it executes (read from its
source: `DataFrameWriter.save_as_table`, `SnowflakePlanBuilder.large_local_relation_plan`):

    action        every plan the session executes (collect, to_pandas, save_as_table, Table.update / delete /
                  merge): one statement
    show_tables   a `save_as_table` in append or truncate mode that is not told `table_exists`: Snowpark first
                  runs SHOW TABLES LIKE (local testing skips it)
    bind_stage    a DataFrame of local rows past Snowpark's bind threshold (rows x columns >= 512): a temporary
                  table, a bound INSERT and a DROP around the statement that reads it: three more
    sql           a statement of the store's own SQL (its `SqlExecutor` or `SqlWriter`): one, whatever the
                  local emulation does to answer it (its own reads and appends are not counted)

Not counted: the schema queries Snowpark may run to resolve a DataFrame's columns on an account (so the
DataFrame-API paths are undercounted, never the raw SQL), and the connector's own traffic (login, PUT of bound
rows to a stage). `phase` tags the statements of a stretch of work (`write`, `read`, `candidates`, ...).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.batch import SqlWriter
    from coco_sql.engines.snowflake.sql import SqlExecutor

_BIND_STAGE = 3  # CREATE TEMPORARY TABLE, the bound INSERT, DROP TABLE


class StatementCounter:
    """Counts, per (phase, kind), the statements sent through a local-testing `session` (module docstring).
    Install it before the store is opened, and wrap the store's executor and writer with `executor` / `writer`."""

    def __init__(self, session: Session) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self._session = session
        self._phase = "other"
        self._quiet = 0
        self._execute = session._conn.execute
        session._conn.execute = self._counted_execute  # type: ignore[method-assign]

    def close(self) -> None:
        """Restore the session's own methods."""
        self._session._conn.execute = self._execute  # type: ignore[method-assign]

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Tag the statements sent inside the block with `name`."""
        before, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = before

    def total(self, phase: str | None = None) -> int:
        return sum(n for (p, _), n in self.counts.items() if phase is None or p == phase)

    def executor(self, inner: SqlExecutor) -> SqlExecutor:
        def run(sql: str, *, timeout_s: float | None = None) -> Any:
            with self._one_statement():
                return inner(sql, timeout_s=timeout_s)

        return run

    def writer(self, inner: SqlWriter) -> SqlWriter:
        def run(statement: str) -> None:
            with self._one_statement():
                inner(statement)

        return run

    @contextlib.contextmanager
    def _one_statement(self) -> Iterator[None]:
        if not self._quiet:
            self.counts[(self._phase, "sql")] += 1
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _counted_execute(self, plan: Any, *args: Any, **kwargs: Any) -> Any:
        if not self._quiet:
            self.counts[(self._phase, "action")] += 1
            source = getattr(plan, "source_plan", None)
            told = type(source).__name__ != "SnowflakeCreateTable" or source.table_exists is not None
            if not told and source.mode.name in ("APPEND", "TRUNCATE"):
                self.counts[(self._phase, "show_tables")] += 1
            large = _large_local_relations(plan)
            if large:
                self.counts[(self._phase, "bind_stage")] += _BIND_STAGE * large
        return self._execute(plan, *args, **kwargs)


def _large_local_relations(node: Any, seen: set[int] | None = None) -> int:
    """The local-row relations past the bind threshold in a (mock) plan tree."""
    seen = set() if seen is None else seen
    if node is None or id(node) in seen or not hasattr(node, "__dict__"):
        return 0
    seen.add(id(node))
    found = 1 if type(node).__name__ == "SnowflakeValues" and node.is_large_local_data else 0
    for attribute in ("source_plan", "from_", "children", "query", "child", "_execution_plan"):
        value = getattr(node, attribute, None)
        for child in value if isinstance(value, list) else [value]:
            found += _large_local_relations(child, seen)
    return found
