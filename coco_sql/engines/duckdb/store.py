"""The DuckDB warehouse: one database file holds every run. What a DuckDB store supplies of its own: the
connection, `execute` (coco-sql's read queries run as written; every read itself is `store.reads`'), the writes
(`writes`: an iteration in one transaction; a run's updates, its progress row, a registered task's rows), and the
user's source query."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from coco_sql.engines.duckdb.writes import DuckDBWrites, _now
from coco_sql.errors import StoreError
from coco_sql.store.base import QueryRows
from coco_sql.store.inputs import checked_source
from coco_sql.store.reads import StoreReads
from coco_sql.store.records import (
    RunRecord,
    to_json,
)
from coco_sql.store.registered import refuse_reuse, stored_rows
from coco_sql.store.schema import schema_expressions, schema_statements


class DuckDBStore(StoreReads, DuckDBWrites):
    """A coco-sql store in a DuckDB file (or ':memory:').

    One connection, guarded by a lock: DuckDB 2.0 refuses concurrent use of one connection from two threads.
    Raises StoreError when the file is locked by another process or is not a DuckDB database.
    """

    write_behind = True  # one connection behind a lock: the committer's thread may write

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        if read_only and self.path != ":memory:" and not Path(self.path).exists():
            raise StoreError(f"no coco-sql database at {self.path}")
        if not read_only and self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.IOException as error:
            raise StoreError(f"cannot open {self.path}: {_first_line(error)}") from error
        except duckdb.Error as error:
            raise StoreError(f"cannot open {self.path} as a DuckDB database: {_first_line(error)}") from error
        if not read_only:
            self._create_schema()
        else:
            self._missing_views()

    @classmethod
    def over(cls, connection: duckdb.DuckDBPyConnection, *, read_only: bool = False) -> DuckDBStore:
        """A store over an open DuckDB connection (the database a user's session already has open): it works on
        its own cursor, so it may run inside a UDF of that connection (the SQL procedures), and `close()`
        closes only that cursor."""
        store = cls.__new__(cls)
        store.path = "this database"
        store._lock = threading.Lock()
        store._con = connection.cursor()
        if not read_only:
            store._create_schema()
        return store

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _create_schema(self) -> None:
        with self._lock:
            for statement in schema_statements():
                self._con.execute(statement)

    def _missing_views(self) -> None:
        """Read-only, a database an older coco-sql wrote may lack a newer view: it gets it as a temporary view of
        this connection (the only thing a read-only connection may create), so reading it works the same."""
        found = self._con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        have = {name for (name,) in found}
        for expression in schema_expressions():
            if (
                isinstance(expression, exp.Create)
                and expression.kind == "VIEW"
                and expression.this.name not in have
            ):
                view = expression.copy()
                view.comments = None
                view.set("properties", exp.Properties(expressions=[exp.TemporaryProperty()]))
                with contextlib.suppress(duckdb.Error):  # not a coco-sql database: its tables are missing
                    self._con.execute(view.sql(dialect="duckdb"))

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ------------------------------------------------------------------------------------------------
    def next_run_id(self) -> int:
        latest = self.latest_run_id()
        return 1 if latest is None else latest + 1

    def create_run(self, run: RunRecord) -> None:
        with self._lock:
            self._insert_run(run)

    def _insert_run(self, run: RunRecord) -> None:
        self._con.execute(
            "INSERT INTO runs (run_id, task, task_fingerprint, seed, budget, config, status, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [run.run_id, run.task, run.task_fingerprint, run.seed, run.budget, to_json(run.config), run.status,
             _now()],
        )  # fmt: skip

    def set_budget(self, run_id: int, budget: int) -> None:
        """Extend a run's budget (``evolve --resume --budget N`` with a larger N)."""
        with self._lock:
            self._con.execute(
                "UPDATE runs SET budget = ?, status = 'running', finished_at = NULL WHERE run_id = ?",
                [budget, run_id],
            )

    def set_config(self, run_id: int, config: Mapping[str, Any]) -> None:
        """Replace a run's `runs.config` (a resume with a new max_spend or prices)."""
        with self._lock:
            self._con.execute("UPDATE runs SET config = ? WHERE run_id = ?", [to_json(dict(config)), run_id])

    def recover(self, run_id: int) -> None:
        """Nothing to do: every iteration was written in one transaction."""

    def candidate_engine(self) -> None:
        """Candidates run in the DuckDB sandbox, not in this database."""
        return None

    # -- tasks from warehouse rows ----------------------------------------------------------------------------
    def read_source(self, source: str) -> tuple[pd.DataFrame, dict[str, str]]:
        """The rows of a user's table or query (`coco_task`'s source) and its columns' DuckDB types. The source
        must be one read-only query (`store.inputs.checked_source`), and DuckDB must see one SELECT in it."""
        query = checked_source(source, "duckdb")
        try:
            with self._lock:
                statements = self._con.extract_statements(query)
                if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
                    raise StoreError(f"the source {source!r} is not one SELECT query")
                types = {row[0]: row[1] for row in self._con.execute(f"DESCRIBE {query}").fetchall()}
                rows = self._con.execute(query).df()
        except duckdb.Error as error:
            raise StoreError(f"the source {source!r} fails: {_first_line(error)}") from None
        return rows, types

    def register_task(
        self,
        name: str,
        source: str,
        options: Mapping[str, Any],
        types: Mapping[str, str],
        rows: pd.DataFrame,
        test_rows: pd.DataFrame | None = None,
    ) -> None:
        """Store a task's options and rows, its test rows after them (`store.registered`), replacing an earlier
        registration no run has used."""
        refuse_reuse(name, self.task_runs(name))
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                self._con.execute("DELETE FROM tasks WHERE name = ?", [name])
                self._con.execute("DELETE FROM task_rows WHERE task = ?", [name])
                self._con.execute(
                    "INSERT INTO tasks VALUES (?, ?, ?, ?, ?, now())",
                    [name, source, to_json(options), to_json(dict(types)), len(rows)],
                )
                self._con.register("_coco_task_rows", stored_rows(rows, test_rows))
                self._con.execute(
                    "INSERT INTO task_rows SELECT ?, row_number() OVER () - 1, to_json(r) FROM _coco_task_rows r",
                    [name],
                )
                self._con.unregister("_coco_task_rows")
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def set_progress(self, row: Mapping[str, Any]) -> None:
        columns = list(row)
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                self._con.execute("DELETE FROM coco_progress WHERE run_id = ?", [row["run_id"]])
                self._con.execute(
                    f"INSERT INTO coco_progress ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    [row[c] for c in columns],
                )
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def append_frames(self, frames: Mapping[str, pd.DataFrame]) -> None:
        """Append each frame's rows to its table, matching columns by name, in one transaction (`mirror`)."""
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                for table, frame in frames.items():
                    if len(frame):
                        self._con.register("_coco_rows", frame)
                        self._con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _coco_rows")
                        self._con.unregister("_coco_rows")
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        with self._lock:
            return self._con.execute(sql, list(params)).df()

    def execute(self, sql: str, params: Mapping[str, Any]) -> QueryRows:
        """One of coco-sql's own read queries, as written (DuckDB with `$name` parameters)."""
        with self._lock:
            cursor = self._con.execute(sql, dict(params))
            columns = tuple(d[0] for d in cursor.description or ())
            rows = cursor.fetchall()
        return QueryRows(columns, rows)


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
