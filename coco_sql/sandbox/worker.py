"""The sandbox worker: a child process that holds one split's rows in a `LockedDuckDB` and runs queries on it.

Started by `sandbox.Sandbox` as `python -m coco_sql.sandbox.worker FD_IN FD_OUT`, with a working
directory that is an empty temporary folder and an environment that carries no credentials. Before it reads any
candidate it lowers its own kernel limits, which it cannot raise again:

- RLIMIT_DATA (the heap and every private writable mapping, Linux >= 4.7) to the sandbox's memory bound, so a
  scalar call that builds a multi-GB string or list fails to allocate instead of taking the machine's memory;
  DuckDB's own `memory_limit` sits below it, so ordinary large queries fail with DuckDB's clear message first;
- RLIMIT_FSIZE to 0: no file can be written (writes fail with EFBIG; Python ignores SIGXFSZ);
- RLIMIT_CORE to 0: a crash leaves no core file.

Messages are pickled tuples over two pipes (`multiprocessing.connection.Connection`):

    parent -> worker   ("init", inputs: DataFrame, relation, duckdb_memory_limit, with_ai: bool, tables: {name: DataFrame})
                       ("run", sql, deadline_s) | ("types", sql) | ("ai_result", values) | ("ai_error", message)
    worker -> parent   ("ready",) | ("result", columns, rows, elapsed_ms) | ("types", kinds)
                       ("error", kind, message) with kind in {"error", "timeout", "memory"}
                       ("ai", udf_name, columns)   while a query runs: one chunk for the parent's AI runtime

The AI functions are registered as proxies: a chunk of arguments goes to the parent, whose AI runtime (providers,
cache, cost ledger, deadline) answers it. So the worker holds no model, no cache and no key. The parent enforces
the hard deadline by killing this process; the worker's own DuckDB interrupt is the cheap path that keeps it
alive for the next query.
"""

from __future__ import annotations

import resource
import sys
from multiprocessing.connection import Connection
from typing import Any


def pack_column(values: list[Any]) -> list[Any] | tuple[int, Any]:
    """A chunk's argument column for the pipe: `(n, value)` when all n values are equal (the categories and
    config of an AI call usually are: a 28-label list repeated on 2,000 rows), else the list itself."""
    first = values[0] if values else None
    if values and all(value == first for value in values):
        return (len(values), first)
    return values


def unpack_column(packed: list[Any] | tuple[int, Any]) -> list[Any]:
    if isinstance(packed, tuple):
        n, value = packed
        return [value] * n
    return packed


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def serve(inbox: Connection, outbox: Connection, memory_bytes: int) -> None:
    import duckdb  # noqa: F401  (imported before the limit: its shared libraries are not what we bound)
    import pandas  # noqa: F401

    from coco_sql.aifuncs.duckdb_udfs import register_udfs
    from coco_sql.errors import EvaluationError, EvaluationMemoryError, EvaluationTimeout
    from coco_sql.sandbox.lockdown import LockedDuckDB

    _limit(resource.RLIMIT_DATA, memory_bytes)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)

    _, inputs, relation, duckdb_memory_limit, with_ai, tables = inbox.recv()

    def ask_parent(udf: str, columns: list[list[Any]]) -> list[Any]:
        outbox.send(("ai", udf, [pack_column(column) for column in columns]))
        kind, payload = inbox.recv()
        if kind == "ai_error":
            raise RuntimeError(payload)
        return payload

    database = LockedDuckDB(
        inputs,
        relation=relation,
        memory_limit=duckdb_memory_limit,
        register_udfs=(lambda con: register_udfs(con, ask_parent)) if with_ai else None,
        tables=tables,
    )
    del inputs, tables
    outbox.send(("ready",))
    while True:
        try:
            message = inbox.recv()
        except EOFError:  # the parent closed the pipe: the sandbox is closed
            return
        try:
            if message[0] == "types":
                outbox.send(("types", database.statement_types(message[1])))
                continue
            _, sql, deadline_s = message
            result = database.run(sql, deadline_s)
            outbox.send(("result", result.columns, result.rows, result.elapsed_ms))
        except EvaluationTimeout as error:
            outbox.send(("error", "timeout", str(error)))
        except EvaluationMemoryError as error:
            outbox.send(("error", "memory", str(error)))
        except MemoryError:  # Python could not hold or pickle the result within the bound
            outbox.send(("error", "memory", "the query's result does not fit in the sandbox's memory bound"))
        except EvaluationError as error:
            outbox.send(("error", "error", str(error)))
        except Exception as error:  # every other failure is the candidate's too
            outbox.send(("error", "error", f"query failed: {' '.join(str(error).split())[:500]}"))


def main(argv: list[str]) -> None:
    fd_in, fd_out, memory_bytes = (int(value) for value in argv[1:4])
    serve(Connection(fd_in), Connection(fd_out), memory_bytes)


if __name__ == "__main__":
    main(sys.argv)
