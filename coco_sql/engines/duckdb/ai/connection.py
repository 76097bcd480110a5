"""The AI functions on a `coco_sql.connect` connection, so an exported AI view runs where it was exported.

The DuckDB export of an AI program is the query the run evaluated, its AI calls bound to UDFs of fixed arity with
JSON arguments (`languages.sql.export.ai`). This installs those names on the connection, answered in this
process by an `AiRuntime` (models from the environment, as `coco-sql eval`), reading the store's shared cache
and writing what it adds back to it (`store.shared_cache`): a view over the rows a run embedded makes no model
call, and what it embeds the next run reads.

DuckDB keeps a Python UDF in the database's catalog, shared by every connection to the file in this process, and
a UDF of a closed connection stops working; a temporary macro belongs to its connection. So each connection
registers the UDFs under names of its own (`coco_ai_<name>_py`, then `..._py_2`, with the procedures' suffix) and
gets temporary macros with the bound names (`AI_CLASSIFY(a, b, c)`) that call them (`engines.duckdb.procedures`).

The runtime is built, and the cache read, on the first AI call; entries a later run adds to the store are not
read again by this connection (it computes them once more, and the answers are the same).
"""

from __future__ import annotations

import threading
from typing import Any

import duckdb

from coco_sql.engines.duckdb.ai.functions import AiFunctions
from coco_sql.engines.duckdb.ai.udfs import implementations, register_udfs
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.sqlkit.ai_catalogue import bound_udfs
from coco_sql.store.shared_cache import load_cache, save_cache


class ConnectionAi:
    """Answers the AI UDFs of one connection (module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._lock = threading.Lock()
        self._runtime: AiRuntime | None = None
        self._table: dict[str, Any] = {}

    def answer(self, udf: str, columns: list[list[Any]]) -> list[Any]:
        """One chunk of `udf`'s calls; a run-level failure (a dead endpoint) is the query's error."""
        with self._lock:
            store = DuckDBStore.over(self._con)  # a cursor: the calling connection is busy with the query
            try:
                runtime = self._ready(store)
                with runtime.evaluation():
                    values = self._table[udf](*columns)
                if runtime.fatal is not None:
                    raise runtime.fatal
                save_cache(store, runtime.cache)
            finally:
                store.close()
        return values

    def _ready(self, store: DuckDBStore) -> AiRuntime:
        if self._runtime is None:
            self._runtime = AiRuntime(AiConfig.from_environment(), load_cache(store))
            self._table = implementations(AiFunctions(self._runtime))
        return self._runtime


def install_ai_functions(con: duckdb.DuckDBPyConnection, suffix: str) -> ConnectionAi:
    """Register the AI UDFs as `coco_ai_<name>_py<suffix>` and the temporary macros `<name>(...)` over them."""
    ai = ConnectionAi(con)
    register_udfs(con, ai.answer, name=lambda udf: _udf_name(udf, suffix))
    for udf, arity in bound_udfs():
        params = ", ".join(f"a{i}" for i in range(arity))
        con.execute(
            f'CREATE OR REPLACE TEMP MACRO "{udf.name}"({params}) AS {_udf_name(udf.name, suffix)}({params})'
        )
    return ai


def _udf_name(name: str, suffix: str) -> str:
    return f"coco_ai_{name.lower()}_py{suffix}"
