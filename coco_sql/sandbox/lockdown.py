"""A locked-down in-memory DuckDB that holds one split's rows: what runs inside a sandbox worker process.

The database holds exactly one split's rows as the table `input`: the rows of other splits are not in it, so no
query, however it slips past the validator, can reach them. It may hold reference tables beside it (`tables`):
for AI tasks, the training rows with their labels as `examples` (`tasks.references`), which every split's
programs may read; the validation and test rows are never among them. It is only ever used inside the worker process of
`sandbox.Sandbox`, which adds the limits DuckDB itself cannot enforce (memory, hard deadline).

Lock-down (see STACK-FACTS): `read_only` alone still lets a query read and write files and read Python variables,
so external access, extension autoload/autoinstall and Python replacement scans are switched off and the
configuration is then locked. DuckDB adds its temp directory (`.tmp` under the working directory) to the allowed
directories even with external access off, so the temp directory is emptied first. DuckDB has no statement
timeout: a watcher calls `interrupt()` at the deadline.

The deadline is counted in CPU time (issue 38: no decision of the search may depend on how long something took).
A query is stopped once this process has spent `deadline_s` seconds of CPU on it (`time.process_time`, every
thread; DuckDB runs one), which the same query spends at any load on the machine; a CPU hog beside it slows it
down in wall time, not in CPU time. Wall time only backs it up: a query still running after WALL_FACTOR times
its deadline is stopped too (a process starved that badly, or waiting on something that does not answer).
WALL_FACTOR is 20: a 2-core machine gives a runnable process less than a twentieth of a core only past a load
average of 40. Time spent waiting for the parent to answer AI calls costs this process no CPU: the parent bounds
those calls (`evaluate.evaluator`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from coco_sql.errors import EvaluationError, EvaluationMemoryError, EvaluationTimeout

WALL_FACTOR = 20.0
"""Wall time a query may take, as a multiple of its CPU deadline (module docstring)."""
POLL_S = 0.01

# The SETs that lock an in-memory DuckDB down, in order ('{memory_limit}' filled in); also applied by the dbt
# runner's plugin (`languages.dbt.inputs`) to each run's database.
LOCKDOWN = (
    "SET enable_progress_bar = false",
    "SET threads = 1",  # deterministic float aggregation order, and fair on a shared machine
    "SET memory_limit = '{memory_limit}'",
    "SET temp_directory = ''",  # else its folder (./.tmp) stays readable with external access off
    "SET max_temp_directory_size = '0B'",
    "SET enable_external_access = false",
    "SET autoload_known_extensions = false",
    "SET autoinstall_known_extensions = false",
    "SET python_enable_replacements = false",
    "SET lock_configuration = true",
)


if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    elapsed_ms: float
    types: tuple[str, ...] = ()  # each column's DuckDB type, as DuckDB spells it (inside the worker)
    usage: Any = None  # a warehouse's bill for the query's AI calls (`engines.snowflake.meter`); None here

    def without_last(self, count: int) -> QueryResult:
        """The result without its last `count` columns (a metered query's meter columns), its bill kept."""
        keep = len(self.columns) - count
        return QueryResult(self.columns[:keep], [row[:keep] for row in self.rows], self.elapsed_ms,
                           self.types[:keep], self.usage)  # fmt: skip


class LockedDuckDB:
    """One split's rows, in a private in-memory DuckDB whose configuration is locked.

    `run` executes one query and returns all rows, or raises EvaluationTimeout past the deadline,
    EvaluationMemoryError when DuckDB cannot allocate, and EvaluationError for any other failure. The database
    stays usable after each. `register_udfs` (optional) adds the AI functions before the lock-down: they are part
    of the sandbox, not something a query adds.
    """

    def __init__(
        self,
        inputs: pd.DataFrame | pa.Table,
        *,
        relation: str = "input",
        memory_limit: str = "1GB",
        register_udfs: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
        tables: Mapping[str, pd.DataFrame | pa.Table] | None = None,
    ) -> None:
        self.relation = relation
        self._lock = threading.Lock()
        self._con = duckdb.connect(":memory:")
        for name, rows in {relation: inputs, **dict(tables or {})}.items():
            self._con.register("_rows", rows)
            self._con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _rows')
            self._con.unregister("_rows")
        if register_udfs is not None:
            register_udfs(self._con)
        for statement in LOCKDOWN:
            self._con.execute(statement.format(memory_limit=memory_limit))

    def run(self, sql: str, deadline_s: float) -> QueryResult:
        with self._lock:
            con = self._con
            timed_out, done = threading.Event(), threading.Event()
            cpu, wall = time.process_time(), time.monotonic()

            def _watch() -> None:  # the CPU deadline, and the wall-time backstop (module docstring)
                while not done.wait(POLL_S):
                    spent = time.process_time() - cpu
                    if spent > deadline_s or time.monotonic() - wall > deadline_s * WALL_FACTOR:
                        timed_out.set()
                        con.interrupt()
                        return

            timer = threading.Thread(target=_watch, name="coco-query-deadline", daemon=True)
            start = time.perf_counter()
            timer.start()
            try:
                cursor = con.execute(sql)
                rows = cursor.fetchall()
                description = cursor.description or ()
                columns = tuple(d[0] for d in description)
                types = tuple(str(d[1]) for d in description)
            except duckdb.OutOfMemoryException as error:
                raise EvaluationMemoryError(f"query ran out of memory: {one_line(error)}") from None
            except duckdb.Error as error:
                if timed_out.is_set():
                    raise EvaluationTimeout(
                        f"query exceeded its {deadline_s:g} s deadline (CPU time) and was stopped"
                    ) from None
                raise EvaluationError(f"query failed: {one_line(error)}") from None
            finally:
                done.set()
                timer.join()
            if timed_out.is_set():  # finished in the instant the watcher fired: over time, for determinism
                raise EvaluationTimeout(f"query exceeded its {deadline_s:g} s deadline and was stopped")
            return QueryResult(columns, rows, (time.perf_counter() - start) * 1000.0, types)

    def statement_types(self, sql: str) -> list[str]:
        """DuckDB's own reading of the statement types: a cheap second check after the validator."""
        with self._lock:
            return [str(s.type).rsplit(".", 1)[-1] for s in self._con.extract_statements(sql)]

    def close(self) -> None:
        self._con.close()


def one_line(error: BaseException) -> str:
    """The error as one line, without DuckDB's generic tuning advice."""
    text = " ".join(str(error).split()).split(" Possible solutions:")[0]
    return text[:500]
