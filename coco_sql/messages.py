"""Every message of every child pipe, in one place: who may send what, with which fields, and how large.

Each pipe has two protocols, one per direction (`wire.Protocol`). What a child sends is hostile data, parsed
against its protocol before anything reads it (`wire`); what the parent sends is checked by the child the same
way. A new kind of child (dbt projects, agent tool SQL) adds its protocols here.

- the DuckDB sandbox (`sandbox.database` <-> `sandbox.worker`): `SQL_PARENT`, `SQL_WORKER`;
- the Python sandbox (`sandbox.python_sandbox` <-> the zygote `sandbox.python_worker` <-> one forked process per
  candidate): `PYTHON_PARENT`, `PYTHON_ZYGOTE`, `PYTHON_CANDIDATE`;
- the dbt sandbox (`languages.dbt.sandbox` <-> `languages.dbt.worker`): `DBT_PARENT`, `DBT_WORKER`;
- the worker templates (`sandbox.fork_server`), which fork the SQL and dbt workers: `FORK_PARENT`, `FORK_SERVER`;
- the local model host (`llm.providers.local_llama`): `LLAMA_PARENT`, `LLAMA_HOST`.

Both sandboxes that run SQL answer AI calls through their pipe with the same three messages (`AI_CHUNK`,
`AI_RESULT`, `AI_ERROR`; `sandbox.ai_pipe`).

Imports only the standard library and `wire`: the Python sandbox's worker loads it.
"""

from __future__ import annotations

from typing import Any

from coco_sql.wire import (
    Check,
    MessageType,
    Protocol,
    WireError,
    anything,
    choice,
    flag,
    integer,
    json_object,
    line,
    list_of,
    nullable,
    number,
    pair,
    record,
    text,
)

MB = 2**20
TRUSTED_MAX_BYTES = 2**32 - 1  # the parent's own messages to a child: bounded by the frame header only
# Decoded, a frame takes several times its size in this process: the limits stay well above what real results
# need (a million rows of id and output are about 30 MB) and well below what would strain the machine.
SQL_RESULT_MAX_BYTES = 256 * MB  # a query result or an AI chunk from the DuckDB sandbox
PYTHON_ANSWER_MAX_BYTES = 64 * MB  # one program's outputs over a split
LLAMA_ANSWER_MAX_BYTES = 16 * MB  # one chat completion
MAX_ROWS = 50_000_000
MAX_COLUMNS = 10_000
MAX_CHUNK_ROWS = 1_000_000  # rows of one AI chunk (DuckDB passes about 2,000)
MAX_AI_ARGUMENTS = 16  # argument columns of one AI chunk (a UDF takes at most 5)
MAX_SQL_CHARS = 10_000_000
MAX_SOURCE_CHARS = 1_000_000
ERROR_CHARS = 2_000

READY = MessageType("ready", {})
TIMING = {"elapsed_ms": number}

# ------------------------------------------------------------------------------------- the DuckDB sandbox


def packed_column(value: Any, where: str) -> list[Any]:
    """An AI chunk's argument column: the list of its values, or `{"n": n, "value": v}` when all n are equal
    (the categories and config of an AI call usually are: a 28-label list repeated on 2,000 rows)."""
    if type(value) is list:
        return list_of(anything, MAX_CHUNK_ROWS)(value, where)
    same = record({"n": integer(0, MAX_CHUNK_ROWS), "value": anything})(value, where)
    return [same["value"]] * same["n"]


def pack_column(values: list[Any]) -> list[Any] | dict[str, Any]:
    """The form `packed_column` reads."""
    first = values[0] if values else None
    if values and all(value == first for value in values):
        return {"n": len(values), "value": first}
    return values


def _chunk(value: Any, where: str) -> list[list[Any]]:
    columns = list_of(packed_column, MAX_AI_ARGUMENTS)(value, where)
    if len({len(column) for column in columns}) > 1:
        raise WireError(f"{where} are not all of one length")
    return columns


# the AI calls of a sandbox's SQL: a chunk for the parent's AI runtime, and its answer
AI_CHUNK = MessageType("ai", {"udf": text(200), "columns": _chunk})
AI_RESULT = MessageType("ai_result", {"values": list_of(anything, MAX_CHUNK_ROWS)})
AI_ERROR = MessageType("ai_error", {"message": line(ERROR_CHARS)})
# rows by column: `data[c]` holds column c's n_rows values (`result_rows` lines them up)
TABLE = {
    "columns": list_of(text(10_000), MAX_COLUMNS),
    "n_rows": integer(0, MAX_ROWS),
    "data": list_of(list_of(anything, MAX_ROWS), MAX_COLUMNS),
}

SQL_PARENT = Protocol.of(
    "coco-sql",
    TRUSTED_MAX_BYTES,
    # followed by one frame per table, in this order: its rows as an Arrow IPC stream
    MessageType(
        "init",
        {
            "tables": list_of(text(1000), 1000),  # the relation first
            "memory_bytes": integer(1, 2**50),
            "duckdb_memory_limit": text(100),
            "with_ai": flag,
        },
    ),
    MessageType("run", {"sql": text(MAX_SQL_CHARS), "deadline_s": number}),
    MessageType("types", {"sql": text(MAX_SQL_CHARS)}),
    AI_RESULT,
    AI_ERROR,
)

SQL_WORKER = Protocol.of(
    "the sandbox process",
    SQL_RESULT_MAX_BYTES,
    READY,
    MessageType("result", {**TABLE, **TIMING}),
    MessageType("types", {"kinds": list_of(text(100), 100_000)}),
    MessageType("error", {"kind": choice("error", "timeout", "memory"), "message": line(ERROR_CHARS)}),
    AI_CHUNK,
)


def result_rows(message: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows of a checked `result` message (or of any checked `TABLE`); WireError when its columns and
    values do not line up."""
    columns, data, n = message["columns"], message["data"], message["n_rows"]
    if len(data) != len(columns) or any(len(values) != n for values in data) or (n and not columns):
        raise WireError(
            f"the sandbox process sent a result whose {len(columns)} columns do not hold {n} rows"
        )
    return list(zip(*data, strict=True))


# ------------------------------------------------------------------------------------- the Python sandbox

_INSTANCE = pair(text(1000), json_object)

PYTHON_PARENT = Protocol.of(
    "coco-sql",
    TRUSTED_MAX_BYTES,
    MessageType(
        "init",
        {
            "instances": list_of(_INSTANCE, MAX_ROWS),
            "harness": text(MAX_SOURCE_CHARS),
            "entry": text(200),
            "modules": list_of(text(200), 1000),
            "memory_bytes": integer(1, 2**50),
            "max_open_files": integer(4, 2**20),
            "cpu_cap_s": integer(1, 2**31),
            "namespaces": flag,
            "seccomp": flag,
            "max_answer_bytes": integer(1, PYTHON_ANSWER_MAX_BYTES),
            "kill_grace_s": number,
        },
    ),
    MessageType("run", {"source": text(MAX_SOURCE_CHARS), "deadline_s": number}),
)

_OUTPUTS = {
    "outputs": list_of(pair(text(1000), anything), MAX_ROWS),  # (instance id, what the harness returned)
    "failures": list_of(pair(text(1000), line(ERROR_CHARS)), MAX_ROWS),  # (instance id, one-line reason)
    **TIMING,
}


def _error(*kinds: str) -> MessageType:
    return MessageType("error", {"kind": choice(*kinds), "message": line(ERROR_CHARS)})


# what the process that ran one candidate sends the zygote, once, before it exits
PYTHON_CANDIDATE = Protocol.of(
    "the program's process",
    PYTHON_ANSWER_MAX_BYTES,
    MessageType("result", _OUTPUTS),
    _error("error", "timeout", "memory"),
)

# what the zygote sends the parent; `restarted`: the candidate's process ended abnormally (killed at the
# deadline, out of memory, crashed, or sent a malformed answer)
PYTHON_ZYGOTE = Protocol.of(
    "the Python sandbox process",
    PYTHON_ANSWER_MAX_BYTES,
    MessageType("ready", {"layers": record({"namespaces": flag, "chroot": flag, "seccomp": flag})}),
    MessageType("result", _OUTPUTS),
    _error("error", "timeout", "memory", "killed", "crashed", "crashed_memory", "malformed"),
)

# ------------------------------------------------------------------------------------------ the dbt sandbox

MAX_PROJECT_CHARS = 4_000_000  # a project's text (its own limit is 1 MB of files: `languages.dbt.project`)
_NAME = text(1000)
_ENGINE = text(100)
_FILES = list_of(pair(_NAME, text(MAX_PROJECT_CHARS)), 10_000)  # (path, content)
_DBT_LAYERS = record({"namespaces": flag, "jail": flag, "landlock": flag, "seccomp": flag})
_DBT_SPEC = record(
    {
        "dialect": _ENGINE,  # a registered engine's name: the worker loads it by name (`plugin_loader`)
        "allowed_functions": list_of(text(200), 1000),
        "sources": nullable(
            list_of(
                record(
                    {"source": _NAME, "table": _NAME, "columns": list_of(pair(_NAME, _NAME), MAX_COLUMNS)}
                ),
                1000,
            )
        ),
        "targets": list_of(pair(_NAME, list_of(_NAME, MAX_COLUMNS)), 1000),
        "render_deadline_s": number,
    }
)
_TEST_OUTCOME = record(
    {
        "name": _NAME,
        "attached_to": nullable(_NAME),
        "column": nullable(_NAME),
        "status": choice("pass", "fail", "warn", "error", "skipped"),
        "failures": nullable(integer(0, 2**62)),
        "message": line(ERROR_CHARS),
    }
)

DBT_PARENT = Protocol.of(
    "coco-sql",
    TRUSTED_MAX_BYTES,
    # followed by one frame per source table ('source.table', in this order): its rows as an Arrow IPC stream (`sandbox.table_frames`)
    MessageType(
        "init",
        {
            "tables": list_of(_NAME, 1000),
            "memory_bytes": integer(1, 2**50),
            "duckdb_memory_limit": text(100),
            "work_bytes": integer(2**20, 2**40),
            "max_file_bytes": integer(2**20, 2**40),
            "max_open_files": integer(64, 2**20),
            "with_ai": flag,
            "layers": _DBT_LAYERS,  # the layers to apply (each is on unless a test turns it off)
        },
    ),
    # render and check a project (`languages.dbt.validate`) under the deadline; answered by validated/rejected
    MessageType("validate", {"project": text(MAX_PROJECT_CHARS), "spec": _DBT_SPEC, "deadline_s": number}),
    # run a validated project's run form and read the targets back; answered by result/error
    MessageType(
        "run", {"files": _FILES, "targets": list_of(_NAME, 1000), "tests": flag, "deadline_s": number}
    ),
    AI_RESULT,
    AI_ERROR,
)

DBT_WORKER = Protocol.of(
    "the dbt sandbox process",
    SQL_RESULT_MAX_BYTES,
    MessageType("ready", {"layers": _DBT_LAYERS}),  # the layers it got
    MessageType("validated", {"files": _FILES}),  # the run form
    MessageType("rejected", {"message": line(ERROR_CHARS)}),
    MessageType(
        "result",
        {
            "models": list_of(pair(_NAME, record(TABLE)), 1000),  # each target that ran: its rows
            "tests": list_of(_TEST_OUTCOME, 100_000),
            "errors": list_of(pair(_NAME, line(ERROR_CHARS)), 10_000),  # (model, one line)
            "timings": list_of(pair(text(100), number), 100),  # (step, seconds)
        },
    ),
    _error("error", "timeout", "memory"),
    AI_CHUNK,
)

# ------------------------------------------------------------------------------------ the worker templates

# `sandbox.fork_server`: the parent asks a template process for a fresh worker (its pipes follow the `fork`
# message as SCM_RIGHTS descriptors) and for the exit of one it forked (which only the template can reap)
FORK_PARENT = Protocol.of(
    "coco-sql",
    TRUSTED_MAX_BYTES,
    MessageType("fork", {"folder": text(4096)}),
    MessageType("reap", {"pid": integer(1, 2**22)}),
)

FORK_SERVER = Protocol.of(
    "the worker template process",
    64 * 1024,
    READY,
    MessageType("forked", {"pid": integer(1, 2**22)}),
    MessageType(
        "reaped",
        {
            "pid": integer(1, 2**22),
            "code": nullable(integer(-64, 255)),
            "peak_rss": nullable(integer(0, 2**50)),
        },
    ),
    MessageType("refused", {"message": line(ERROR_CHARS)}),
)

# ---------------------------------------------------------------------------------------- the model host

LLAMA_PARENT = Protocol.of("coco-sql", TRUSTED_MAX_BYTES, MessageType("complete", {"options": json_object}))

LLAMA_HOST = Protocol.of(
    "the local model process",
    LLAMA_ANSWER_MAX_BYTES,
    READY,
    MessageType("ok", {"completion": json_object}),
    MessageType("error", {"message": line(300)}),
)

__all__ = [
    "AI_CHUNK",
    "AI_ERROR",
    "AI_RESULT",
    "DBT_PARENT",
    "DBT_WORKER",
    "FORK_PARENT",
    "FORK_SERVER",
    "LLAMA_HOST",
    "LLAMA_PARENT",
    "PYTHON_CANDIDATE",
    "PYTHON_PARENT",
    "PYTHON_ZYGOTE",
    "SQL_PARENT",
    "SQL_WORKER",
    "Check",
    "pack_column",
    "packed_column",
    "result_rows",
]
