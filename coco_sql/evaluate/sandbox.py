"""A locked-down DuckDB for running untrusted candidate SQL under a deadline.

Each sandbox is its own in-memory database holding exactly one split's rows as the table `input`: the rows of
other splits are not in it, so no query, however it slips past the validator, can reach them.

Lock-down (see STACK-FACTS): `read_only` alone still lets a query read and write files and read Python variables,
so external access, extension autoload/autoinstall and Python replacement scans are switched off and the
configuration is then locked. DuckDB has no statement timeout: a timer calls `interrupt()` at the deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd

from coco_sql.errors import EvaluationError, EvaluationTimeout

if TYPE_CHECKING:
    from coco_sql.aifuncs.functions import AiFunctions


def register_ai_functions(con: duckdb.DuckDBPyConnection, ai: AiFunctions) -> None:
    from coco_sql.aifuncs.duckdb_udfs import register_ai_functions as register

    register(con, ai)


_LOCKDOWN = (
    "SET enable_progress_bar = false",
    "SET threads = 1",  # deterministic float aggregation order, and fair on a shared machine
    "SET memory_limit = '{memory_limit}'",
    "SET max_temp_directory_size = '0B'",
    "SET enable_external_access = false",
    "SET autoload_known_extensions = false",
    "SET autoinstall_known_extensions = false",
    "SET python_enable_replacements = false",
    "SET lock_configuration = true",
)


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    elapsed_ms: float


class Sandbox:
    """One split's rows, in a private in-memory DuckDB whose configuration is locked.

    `run` executes one query and returns all rows, or raises EvaluationTimeout past the deadline and
    EvaluationError for any other failure. The sandbox stays usable after either.
    """

    def __init__(
        self,
        inputs: pd.DataFrame,
        *,
        relation: str = "input",
        memory_limit: str = "1GB",
        ai: AiFunctions | None = None,
    ) -> None:
        self.relation = relation
        self._lock = threading.Lock()
        self._con = duckdb.connect(":memory:")
        self._con.register("_rows", inputs)
        self._con.execute(f'CREATE TABLE "{relation}" AS SELECT * FROM _rows')
        self._con.unregister("_rows")
        if ai is not None:  # before the lock-down: UDFs are part of the sandbox, not something a query adds
            register_ai_functions(self._con, ai)
        for statement in _LOCKDOWN:
            self._con.execute(statement.format(memory_limit=memory_limit))

    def run(self, sql: str, deadline_s: float, on_timeout: Callable[[], None] | None = None) -> QueryResult:
        """`on_timeout` runs at the deadline too: DuckDB's interrupt cannot stop a Python UDF mid-chunk, so the
        AI functions' own cancel flag is set there."""
        with self._lock:
            con = self._con
            timed_out = threading.Event()

            def _interrupt() -> None:
                timed_out.set()
                if on_timeout is not None:
                    on_timeout()
                con.interrupt()

            timer = threading.Timer(deadline_s, _interrupt)
            start = time.perf_counter()
            timer.start()
            try:
                cursor = con.execute(sql)
                rows = cursor.fetchall()
                columns = tuple(d[0] for d in cursor.description or ())
            except duckdb.Error as error:
                if timed_out.is_set():
                    raise EvaluationTimeout(
                        f"query exceeded its {deadline_s:g} s deadline and was stopped"
                    ) from None
                raise EvaluationError(f"query failed: {_one_line(error)}") from None
            finally:
                timer.cancel()
            if (
                timed_out.is_set()
            ):  # finished in the instant the timer fired: treat as over time for determinism
                raise EvaluationTimeout(f"query exceeded its {deadline_s:g} s deadline and was stopped")
            return QueryResult(columns, rows, (time.perf_counter() - start) * 1000.0)

    def statement_types(self, sql: str) -> list[str]:
        """DuckDB's own reading of the statement types: a cheap second check after the validator."""
        with self._lock:
            return [str(s.type).rsplit(".", 1)[-1] for s in self._con.extract_statements(sql)]

    def close(self) -> None:
        self._con.close()


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:500]
