"""The sandbox worker: a child process that holds one split's rows in a `LockedDuckDB` and runs queries on it.

Started by `sandbox.Sandbox`, forked from a template that imported this module (`sandbox.fork_server`), or as
`python -m coco_sql.sandbox.worker` where no template can be had (`child.ChildProcess`: its pipes at the
fixed descriptors 3 and 4, a working directory that is an empty temporary folder, an environment that carries
no credentials). Before it reads any rows it lowers its own kernel limits, which it cannot raise again:

- RLIMIT_DATA (the heap and every private writable mapping, Linux >= 4.7) to the sandbox's memory bound, so a
  scalar call that builds a multi-GB string or list fails to allocate instead of taking the machine's memory;
  DuckDB's own `memory_limit` sits below it, so ordinary large queries fail with DuckDB's clear message first;
- RLIMIT_FSIZE to 0: no file can be written (writes fail with EFBIG; Python ignores SIGXFSZ);
- RLIMIT_CORE to 0: a crash leaves no core file.

Messages are `messages.SQL_PARENT` (init, run, types, ai_result, ai_error) and `messages.SQL_WORKER` (ready,
result, types, error, ai): length-prefixed JSON (`wire`). The init message is followed by one frame per table
holding its rows as an Arrow IPC stream (`table_frames`: typed as DuckDB types the parent's frame); nothing
in either direction is unpickled.
A result travels by column: a column whose DuckDB type holds only text,
numbers, booleans and lists of them is written as it is; the others pass through `wire.exact`, so that a
Decimal, a date or a MAP arrives as what DuckDB returned.

The AI functions are registered as proxies: a chunk of arguments goes to the parent (`ai`), whose AI runtime
(providers, cache, cost ledger, deadline) answers it. So the worker holds no model, no cache and no key. The
parent enforces the hard deadline by killing this process; the worker's own DuckDB interrupt is the cheap path
that keeps it alive for the next query.
"""

from __future__ import annotations

import re
import resource
from typing import Any

from coco_sql.messages import SQL_PARENT, SQL_RESULT_MAX_BYTES
from coco_sql.sandbox.ai_pipe import ask_parent
from coco_sql.sandbox.lockdown import LockedDuckDB, QueryResult  # DuckDB, before the limits
from coco_sql.sandbox.table_frames import table_from  # pyarrow, before the limits
from coco_sql.wire import Channel, child_end, dumps, exact

# DuckDB types whose Python values JSON holds as they are (text, integers, floats, booleans; lists of them)
_PLAIN_TYPE = re.compile(
    r"(VARCHAR|JSON|BOOLEAN|U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)|FLOAT|DOUBLE|\"NULL\"|NULL)(\[\])*"
)


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def result_message(result: QueryResult) -> dict[str, Any]:
    """The `result` message of a query's rows, by column (one comprehension per column: `zip(*rows)` would make
    an iterator per row)."""
    rows = result.rows
    data = [[row[k] for row in rows] for k in range(len(result.columns))]
    for k, kind in enumerate(result.types):
        if not _PLAIN_TYPE.fullmatch(kind):
            data[k] = exact(data[k])
    return {
        "type": "result",
        "columns": list(result.columns),
        "n_rows": len(result.rows),
        "data": data,
        "elapsed_ms": result.elapsed_ms,
    }


def preload() -> None:
    """What a worker template imports once for all its forks (`sandbox.fork_server`)."""
    import coco_sql.errors  # noqa: F401
    from coco_sql.plugin_loader import local_ai

    local_ai()  # the sandbox engine's AI UDFs (`EnginePlugin.local_ai`), imported once


def serve(channel: Channel) -> None:
    from coco_sql.errors import EvaluationError, EvaluationMemoryError, EvaluationTimeout
    from coco_sql.plugin_loader import local_ai

    init = channel.receive()
    if init is None or init["type"] != "init":
        raise RuntimeError("the parent must start with init")
    if init["with_ai"]:
        # pyarrow imports pandas when an AI function builds its answer column: import it now, before the limits
        # and outside any query's deadline. A split without AI functions never needs it (0.6 s CPU a worker).
        import pandas  # noqa: F401
    _limit(resource.RLIMIT_DATA, init["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)
    tables = {
        name: table_from(channel.receive_bytes()) for name in init["tables"]
    }  # Arrow IPC, from the parent
    relation = init["tables"][0]

    ask = ask_parent(channel)
    database = LockedDuckDB(
        tables.pop(relation),
        relation=relation,
        memory_limit=init["duckdb_memory_limit"],
        register_udfs=(lambda con: local_ai().register(con, ask)) if init["with_ai"] else None,
        tables=tables,
    )
    del tables
    channel.send({"type": "ready"})
    while True:
        try:
            message = channel.receive()
        except EOFError:  # the parent closed the pipe: the sandbox is closed
            return
        try:
            if message["type"] == "types":
                channel.send({"type": "types", "kinds": database.statement_types(message["sql"])})
                continue
            result = database.run(message["sql"], message["deadline_s"])
            payload = dumps(result_message(result))
            if len(payload) > SQL_RESULT_MAX_BYTES:
                raise EvaluationError(
                    f"query failed: its result is {len(payload) / 2**20:,.0f} MB, over the sandbox's limit of "
                    f"{SQL_RESULT_MAX_BYTES // 2**20} MB (return fewer rows or columns)"
                )
            del result
            channel.send_bytes(payload)
        except EvaluationTimeout as error:
            channel.send({"type": "error", "kind": "timeout", "message": str(error)})
        except EvaluationMemoryError as error:
            channel.send({"type": "error", "kind": "memory", "message": str(error)})
        except MemoryError:  # Python could not hold or encode the result within the bound
            message_text = "the query's result does not fit in the sandbox's memory bound"
            channel.send({"type": "error", "kind": "memory", "message": message_text})
        except EvaluationError as error:
            channel.send({"type": "error", "kind": "error", "message": str(error)})
        except Exception as error:  # every other failure is the candidate's too
            text = f"query failed: {' '.join(str(error).split())[:500]}"
            channel.send({"type": "error", "kind": "error", "message": text})


def main() -> None:
    serve(child_end(SQL_PARENT))


if __name__ == "__main__":
    main()
