"""What one dbt run's DuckDB is given: the split's source tables, the AI UDFs, and the lock-down.

dbt-duckdb opens the in-memory database itself, from the profile, and calls each plugin's
``configure_connection(conn)`` once, right after it connects (`plugin.Plugin`). A profile is YAML, so it cannot
carry a DataFrame or a callable: the runner opens a `RunInputs` under a token (`opened`), writes that token
into the plugin's config, and the plugin claims the inputs with it. The token stays the same for every run of a
`runner.DbtSession` (a changed profile would make dbt re-parse the whole project), and only one run's inputs
are open under it at a time.

Preparing the connection: each source table becomes ``<source>.<table>`` (dbt's relation for
``source('<source>', '<table>')`` when the YAML gives no schema), the AI UDFs are registered, and then the
same SETs as the SQL sandbox (`sandbox.lockdown`): external access off, no extension autoload, no Python
replacement scans, a memory limit, one thread, configuration locked. So a model that slipped past the
validator still cannot read or write a file.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb

from coco_sql.sandbox.lockdown import LOCKDOWN

RegisterUdfs = Callable[[duckdb.DuckDBPyConnection], None]


@dataclass
class RunInputs:
    """One run's source tables, keyed ``(source, table)``, and how to add the AI UDFs (None: no AI)."""

    tables: Mapping[tuple[str, str], Any]
    register_udfs: RegisterUdfs | None = None
    memory_limit: str = "1GB"
    connection: duckdb.DuckDBPyConnection | None = field(default=None, repr=False)
    cursors: list[duckdb.DuckDBPyConnection] = field(default_factory=list, repr=False)

    def prepare(self, con: duckdb.DuckDBPyConnection) -> None:
        """Load the tables, add the UDFs, lock the configuration; keep `con` to read the models back."""
        if self.connection is not None:
            raise RuntimeError("a run's inputs were claimed twice: dbt opened a second database in one run")
        for source in sorted({source for source, _ in self.tables}):
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{source}"')
        for (source, table), rows in sorted(self.tables.items()):
            con.register("_coco_rows", rows)
            con.execute(f'CREATE TABLE "{source}"."{table}" AS SELECT * FROM _coco_rows')
            con.unregister("_coco_rows")
        if self.register_udfs is not None:
            self.register_udfs(con)
        for statement in LOCKDOWN:
            con.execute(statement.format(memory_limit=self.memory_limit))
        self.connection = con

    def track(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """A cursor dbt-duckdb opened on the connection (it runs each model on one): `interrupt` reaches it."""
        self.cursors.append(cursor)

    def interrupt(self) -> None:
        """Interrupt whatever the run's connection and its cursors execute (each cursor has a context of its
        own: interrupting the connection alone does not stop a model)."""
        for con in [self.connection, *self.cursors]:
            if con is not None:
                with contextlib.suppress(duckdb.Error):
                    con.interrupt()


_OPEN: dict[str, RunInputs] = {}
_GUARD = threading.Lock()


def new_token() -> str:
    return uuid.uuid4().hex


@contextmanager
def opened(token: str, inputs: RunInputs) -> Iterator[RunInputs]:
    """Make `inputs` claimable under `token` for the duration of one run."""
    with _GUARD:
        if token in _OPEN:
            raise RuntimeError(f"a dbt run is already open under token {token}")
        _OPEN[token] = inputs
    try:
        yield inputs
    finally:
        with _GUARD:
            _OPEN.pop(token, None)


def claim(token: str) -> RunInputs:
    """The inputs open under `token` (the plugin's side)."""
    with _GUARD:
        inputs = _OPEN.get(token)
    if inputs is None:
        raise RuntimeError(f"no dbt run is open under token {token}: run projects through runner.DbtSession")
    return inputs
