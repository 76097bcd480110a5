"""The procedures in DuckDB: `coco_sql.connect(path)` returns a connection on which

    CALL coco_task('reviews', 'reviews', {'label': 'label', 'seed_program': 'SELECT id, ... FROM input'});
    CALL coco_evolve('reviews', 30, {'seed': 1, 'target': 1.0});
    CALL coco_resume(1, 60);   CALL coco_status();   CALL coco_export(1);
    CALL coco_eval('lockpicking6', 'SELECT id, 0 AS label FROM input', 'val');
    CALL coco_report(1);   -- the run's HTML report, one row (run_id, html)
    CALL coco_help();   CALL coco_help('coco_task');   -- the procedures; one procedure's arguments and options

work, as do `FROM coco_status()` and prepared parameters. DuckDB 2.0 has no Python table functions and `CALL`
needs a table function, so each procedure is a table macro (one overload per number of arguments, since macro
parameters with defaults are named-only) around a Python UDF with side effects that returns a list of structs,
unnested into rows (STACK-FACTS). Inside a UDF the calling connection is refused, so the handlers write through a
cursor of it (`DuckDBStore.over`), in their own transaction. An error is the handler's one-line message, which
DuckDB reports as `Invalid Input Error: Python exception occurred while executing the UDF: TaskError: ...`;
nothing is written for a call that fails before its run starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from coco_sql.engines.duckdb.ai.connection import install_ai_functions
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.procedures import handlers
from coco_sql.procedures.help import coco_help

# name -> (the handler, its parameters with DuckDB types, how many of them a call must give)
_SIGNATURES: dict[str, tuple[Callable[..., list[dict]], tuple[tuple[str, str], ...], int]] = {
    "coco_task": (handlers.coco_task, (("name", "VARCHAR"), ("source", "VARCHAR"), ("options", "JSON")), 2),
    "coco_evolve": (
        handlers.coco_evolve,
        (("task", "VARCHAR"), ("budget", "INTEGER"), ("options", "JSON")),
        1,
    ),
    "coco_resume": (
        handlers.coco_resume,
        (("run_id", "BIGINT"), ("budget", "INTEGER"), ("max_spend", "VARCHAR")),
        1,
    ),
    "coco_status": (handlers.coco_status, (("run_id", "BIGINT"),), 0),
    "coco_export": (
        handlers.coco_export,
        (("run_id", "BIGINT"), ("form", "VARCHAR"), ("max_cost", "VARCHAR"), ("source", "VARCHAR")),
        0,
    ),
    "coco_eval": (
        handlers.coco_eval,
        (("task", "VARCHAR"), ("program", "VARCHAR"), ("split", "VARCHAR")),
        2,
    ),
    "coco_report": (handlers.coco_report, (("run_id", "BIGINT"),), 0),
    "coco_help": (coco_help, (("topic", "VARCHAR"),), 0),
}


def connect(path: str | Path = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to `path` (its folder is created) with coco-sql's tables and procedures installed."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    install(con)
    return con


def install(con: duckdb.DuckDBPyConnection) -> None:
    """Create coco-sql's tables (if missing), its procedures (as temporary macros of this connection) and the AI
    functions an exported AI view calls (`engines.duckdb.ai_functions`).

    DuckDB keeps a Python UDF in the database's catalog, which every connection to the same file in this process
    shares, while a temporary macro belongs to its connection. So each connection gets UDFs of its own names
    (`coco_task_py`, then `coco_task_py_2`, ...), each bound to that connection, and macros that call those: a
    second `coco_sql.connect(path)` works, and keeps working after the first is closed."""
    DuckDBStore.over(con).close()  # the schema
    suffix = _free_suffix(con)
    for name, (handler, params, required) in _SIGNATURES.items():
        columns = handlers.COLUMNS[name]
        returns = "STRUCT(" + ", ".join(f'"{c}" {t}' for c, t in columns) + ")[]"
        con.create_function(
            f"{name}_py{suffix}",
            _udf(con, handler, [t for _, t in params], [c for c, _ in columns]),
            [con.sqltype("VARCHAR" if t == "JSON" else t) for _, t in params],
            con.sqltype(returns),
            side_effects=True,
            null_handling="special",
        )
        con.execute(_macro(name, params, required, suffix))
    install_ai_functions(con, suffix)  # an exported AI view runs on this connection


def _free_suffix(con: duckdb.DuckDBPyConnection) -> str:
    """'' when no connection of this process registered the UDFs in this database yet, else the first free
    '_<n>'."""
    taken = {
        name
        for (name,) in con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE starts_with(function_name, 'coco_')"
        ).fetchall()
    }
    n = 1
    while any(f"{name}_py{_suffix(n)}" in taken for name in _SIGNATURES):
        n += 1
    return _suffix(n)


def _suffix(n: int) -> str:
    return "" if n == 1 else f"_{n}"


def _macro(name: str, params: Sequence[tuple[str, str]], required: int, suffix: str = "") -> str:
    """One table-macro overload per accepted number of arguments; missing ones are NULL (the default)."""
    overloads = []
    for given in range(required, len(params) + 1):
        names = [p for p, _ in params[:given]]
        arguments = [
            (f"CAST(to_json({p}) AS VARCHAR)" if t == "JSON" else p) if i < given else "NULL"
            for i, (p, t) in enumerate(params)
        ]
        body = f"SELECT unnest({name}_py{suffix}({', '.join(arguments)}), recursive := true)"
        overloads.append(f"({', '.join(names)}) AS TABLE ({body})")
    return f"CREATE OR REPLACE TEMP MACRO {name}" + ", ".join(overloads)


def _udf(
    con: duckdb.DuckDBPyConnection,
    handler: Callable[..., list[dict]],
    types: Sequence[str],
    columns: Sequence[str],
) -> Callable[..., list[dict[str, Any]]]:
    def call(*arguments: Any) -> list[dict[str, Any]]:
        values = [
            json.loads(a) if t == "JSON" and a is not None else a
            for a, t in zip(arguments, types, strict=True)
        ]
        store = DuckDBStore.over(con)
        try:
            rows = handler(store, *values)
        finally:
            store.close()
        return [{c: handlers.plain_value(row.get(c)) for c in columns} for row in rows]

    fixed: dict[int, Callable[..., list[dict[str, Any]]]] = {  # DuckDB reads the arity off the signature
        1: lambda a: call(a),
        2: lambda a, b: call(a, b),
        3: lambda a, b, c: call(a, b, c),
        4: lambda a, b, c, d: call(a, b, c, d),
    }
    return fixed[len(types)]
