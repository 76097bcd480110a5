"""An iteration's rows in Snowflake in a bounded number of statements: staged, then one multi-table INSERT.

Each round trip to an account costs 50-300 ms, so an iteration's write must not cost one statement per table
(plus a `SHOW TABLES` per append, as `save_as_table` does). Here every row of the batch, whatever its table,
becomes one row `(tbl, data)` of a temporary staging table, `data` being the row as a JSON object of text values;
then one `INSERT ALL` reads the staging table and sends each row to its table:

    INSERT ALL
      WHEN tbl = 'programs' THEN INTO programs (program_id, ...) VALUES (program_id, ...)
      WHEN tbl = 'ai_cache' AND cached IS NULL THEN INTO ai_cache (...) VALUES (...)   -- new entries only
      ...
    SELECT b.*, c.cache_key AS cached, ... FROM (SELECT tbl, JSON_EXTRACT_PATH_TEXT(data, 'program_id') AS
      program_id, CAST(JSON_EXTRACT_PATH_TEXT(data, 'iteration') AS BIGINT) AS iteration, ... FROM stage) AS b
      LEFT JOIN (SELECT DISTINCT cache_key FROM ai_cache) AS c ON ...

One statement, so an iteration is written whole or not at all (Snowflake runs a DML statement atomically), where
one append per table needed a write order and a repair on resume. Statements per iteration: the staging table
(one `CREATE TEMPORARY TABLE ... AS SELECT` for a small batch; Snowpark adds three for a batch past its bind
threshold: a table, a bound insert, a drop), the INSERT ALL, and at a run's end the status update.

Values travel as text: numbers as Python writes them (`repr` of a float round-trips exactly), timestamps as ISO
text, JSON columns as their JSON text (PARSE_JSON'd in the INSERT), so no value passes through a JSON number
whose precision Snowflake might change. A missing value is a missing key (SQL NULL, never a JSON null). A chunk of
the staging table holds at most `CHUNK_ROWS` rows, and a chunk small enough for Snowpark to inline as literals at
most `LITERAL_BYTES` of text (Snowflake's 1 MB statement guideline).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from coco_sql.engines.snowflake.sql import is_local
from coco_sql.store.records import IterationBatch, to_json
from coco_sql.store.rows import WRITE_ORDER, evaluation_chunks, table_rows
from coco_sql.store.table_schema import Column, table_columns

if TYPE_CHECKING:
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.sql import SqlExecutor

CHUNK_ROWS = 200_000
LITERAL_BYTES = 512 * 1024
# Snowpark inlines a DataFrame of fewer values than this as literals (`analyzer.ARRAY_BIND_THRESHOLD`), 2 per row
_INLINED_ROWS = 256
CACHE_KEYS = {"ai_cache": ("cache_key",), "ai_embeddings": ("model", "text_hash")}
_SQL_TYPES = {"BIGINT": "BIGINT", "INTEGER": "BIGINT", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN",
              "TIMESTAMP": "TIMESTAMP_NTZ"}  # fmt: skip

Staged = tuple[str, str]  # (table, the row as JSON text)


class SqlWriter(Protocol):
    """Runs one Snowflake-dialect DML statement (the store's INSERT ALL); nothing comes back."""

    def __call__(self, statement: str) -> None: ...


class SessionWrites:
    """The writer of a real account: `session.sql(statement).collect()`, one round trip."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __call__(self, statement: str) -> None:
        self._session.sql(statement).collect()


def default_writer(session: Session, sql: SqlExecutor) -> SqlWriter:
    """`SessionWrites` on an account; `LocalWrites` in local testing, reading through `sql`."""
    if is_local(session):
        from coco_sql.engines.snowflake.local_writes import LocalWrites

        return LocalWrites(session, sql)
    return SessionWrites(session)


def write_batch(
    session: Session, writes: SqlWriter, stage: str, batch: IterationBatch, now: datetime
) -> None:
    """Stage `batch` in the temporary table `stage` (chunk by chunk) and move it with one INSERT ALL."""
    tables: dict[str, None] = {}
    for k, chunk in enumerate(chunks(staged_rows(batch, now))):
        tables.update(dict.fromkeys(table for table, _ in chunk))
        frame = session.create_dataframe(chunk, schema=stage_schema())
        frame.write.save_as_table(
            stage,
            mode="overwrite" if k == 0 else "append",
            table_type="temporary",
            table_exists=True if k else None,
        )
    if tables:
        writes(insert_all(stage, list(tables)))


def staged_rows(batch: IterationBatch, now: datetime) -> Iterator[Staged]:
    """Every row `batch` writes, as (table, JSON text): the new run, the WRITE_ORDER tables, the AI cache."""
    columns = table_columns()
    if batch.new_run is not None:
        run = batch.new_run
        yield _staged("runs", columns["runs"], (run.run_id, run.task, run.task_fingerprint, run.seed, run.budget,
                                                to_json(run.config), run.status, now, None))  # fmt: skip
    rows = table_rows(batch, now)
    for table in WRITE_ORDER:
        if table == "evaluations":
            for chunk in evaluation_chunks(batch):
                for row in zip(*chunk, strict=True):
                    yield _staged(table, columns[table], row)
        else:
            for row in rows[table]:
                yield _staged(table, columns[table], row)
    for e in batch.ai_cache:
        row = (e.key, e.function, e.model, e.response, e.input_tokens, e.output_tokens, e.latency_ms, now)
        yield _staged("ai_cache", columns["ai_cache"], row)
    for e in batch.ai_embeddings:
        row = (e.model, e.text_hash, json.dumps(e.vector.tolist()), e.input_tokens, now)
        yield _staged("ai_embeddings", columns["ai_embeddings"], row)


def _staged(table: str, columns: Sequence[Column], row: Sequence[Any]) -> Staged:
    data = {c.name: _text(value) for c, value in zip(columns, row, strict=True) if value is not None}
    return table, json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _text(value: Any) -> str:
    """A cell as the text its column's CAST reads back exactly."""
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("NaN" if math.isnan(value) else str(value))
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


def chunks(rows: Iterator[Staged]) -> Iterator[list[Staged]]:
    """`rows` in chunks of at most `CHUNK_ROWS` rows; a chunk Snowpark would inline as literals (under
    `_INLINED_ROWS` rows) holds at most `LITERAL_BYTES` of text, a single larger row travelling alone."""
    chunk: list[Staged] = []
    size = 0
    for row in rows:
        grown = size + len(row[1])
        if chunk and (len(chunk) >= CHUNK_ROWS or (len(chunk) < _INLINED_ROWS and grown > LITERAL_BYTES)):
            yield chunk
            chunk, grown = [], len(row[1])
        chunk.append(row)
        size = grown
    if chunk:
        yield chunk


def insert_all(stage: str, tables: Sequence[str]) -> str:
    """The INSERT ALL (Snowflake SQL) that moves the staged rows of `tables` into them (module docstring)."""
    schema = table_columns()
    projected: dict[str, str] = {}  # source column -> its expression
    branches = []
    for table in tables:
        names = []
        for column in schema[table]:
            name = _source_name(column)
            projected.setdefault(name, _extract(column))
            names.append(name)
        condition = f"tbl = '{table}'" + (" AND cached_" + table + " IS NULL" if table in CACHE_KEYS else "")
        branches.append(
            f"WHEN {condition} THEN INTO {table} ({', '.join(c.name for c in schema[table])}) "
            f"VALUES ({', '.join(names)})"
        )
    select = ",\n  ".join(f"{expression} AS {name}" for name, expression in projected.items())
    source = f"(SELECT tbl,\n  {select}\nFROM {stage}) AS b"
    cached = ""
    for table, keys in CACHE_KEYS.items():
        if table in tables:
            on = " AND ".join(f"k_{table}.{k} = b.{k}" for k in keys)
            staged = (
                f"SELECT 1 FROM {stage} AS s WHERE s.tbl = '{table}'"
                f" AND JSON_EXTRACT_PATH_TEXT(s.data, '{keys[-1]}') = c.{keys[-1]}"
            )
            source += (  # the entries already there, among the batch's keys only (not the whole cache)
                f"\nLEFT JOIN (SELECT DISTINCT {', '.join(f'c.{k}' for k in keys)} FROM {table} AS c"
                f" WHERE EXISTS ({staged})) AS k_{table} ON b.tbl = '{table}' AND {on}"
            )
            cached += f", k_{table}.{keys[0]} AS cached_{table}"
    return "INSERT ALL\n" + "\n".join(branches) + f"\nSELECT b.*{cached}\nFROM {source}"


def _source_name(column: Column) -> str:
    """The source column of `column`: its name, or `name__type` where tables disagree on the name's type."""
    types = {c.type for columns in table_columns().values() for c in columns if c.name == column.name}
    return column.name if len(types) == 1 else f"{column.name}__{column.type.replace('[]', '_list').lower()}"


def _extract(column: Column) -> str:
    text = f"JSON_EXTRACT_PATH_TEXT(data, '{column.name}')"
    kind = column.type.upper()
    if kind == "JSON":
        return f"PARSE_JSON({text})"
    if kind.endswith("[]"):
        return f"CAST(PARSE_JSON({text}) AS ARRAY)"
    if kind in _SQL_TYPES:
        return f"CAST({text} AS {_SQL_TYPES[kind]})"
    return text


def stage_schema() -> Any:
    """The staging table's columns: the row's table and the row as JSON text."""
    from snowflake.snowpark.types import StringType, StructField, StructType

    return StructType([StructField("tbl", StringType(), nullable=False), StructField("data", StringType())])


#: What `SnowparkStore.recover` must repair in a run (DuckDB dialect, run through `translate.snowflake_query`):
#: per table, the rows to delete; for `runs`, 1 when the run_finished event is there but not the status.
RECOVER_SQL = """
WITH committed AS (SELECT COALESCE(MAX(iteration), -1) AS last FROM programs WHERE run_id = $run_id),
live AS (SELECT program_id FROM programs WHERE run_id = $run_id)
SELECT 'archive_entries' AS tbl, COUNT(*) AS n FROM archive_entries
WHERE run_id = $run_id AND iteration > (SELECT last FROM committed)
UNION ALL SELECT 'ledger', COUNT(*) FROM ledger WHERE run_id = $run_id AND iteration > (SELECT last FROM committed)
UNION ALL SELECT 'events', COUNT(*) FROM events WHERE run_id = $run_id AND iteration > (SELECT last FROM committed)
UNION ALL SELECT 'ai_usage', COUNT(*) FROM ai_usage WHERE run_id = $run_id AND iteration > (SELECT last FROM committed)
UNION ALL SELECT 'ai_calls', COUNT(*) FROM ai_calls WHERE run_id = $run_id AND iteration > (SELECT last FROM committed)
UNION ALL SELECT 'agent_turns', COUNT(*) FROM agent_turns
WHERE run_id = $run_id AND iteration > (SELECT last FROM committed)
UNION ALL SELECT 'primitives', COUNT(*) FROM primitives
WHERE run_id = $run_id AND created_iteration > (SELECT last FROM committed)
UNION ALL SELECT 'primitive_trials', COUNT(*) FROM primitive_trials
WHERE run_id = $run_id AND iteration > (SELECT last FROM committed)
UNION ALL SELECT 'program_scores', COUNT(*) FROM program_scores AS s
WHERE s.run_id = $run_id AND NOT EXISTS (SELECT 1 FROM live AS l WHERE l.program_id = s.program_id)
UNION ALL SELECT 'evaluations', COUNT(*) FROM evaluations AS e
WHERE e.run_id = $run_id AND NOT EXISTS (
    SELECT 1 FROM program_scores AS s JOIN live AS l ON l.program_id = s.program_id
    WHERE s.run_id = $run_id AND s.program_id = e.program_id AND s.split = e.split
)
UNION ALL SELECT 'runs', COUNT(*) FROM runs AS r
WHERE r.run_id = $run_id AND r.status <> 'finished' AND EXISTS (
    SELECT 1 FROM events AS v
    WHERE v.run_id = $run_id AND v.kind = 'run_finished' AND v.iteration = (SELECT last FROM committed)
)
"""
