"""How the DuckDB warehouse writes an iteration: one transaction, one statement per table, rows as multi-row
VALUES, unnested column lists or Arrow tables by size (why: DuckDB's fixed cost is per statement and per converted
value)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from coco_sql.store.records import (
    IterationBatch,
)
from coco_sql.store.rows import WRITE_ORDER, evaluation_chunks, table_rows

_SCORE_TYPES = (
    "BIGINT",
    "VARCHAR",
    "VARCHAR",
    "DOUBLE",
    "BIGINT",
    "BIGINT",
    "BIGINT",
    "BIGINT",
    "BIGINT",
    "DOUBLE",
    "TIMESTAMP",
    "BIGINT",
)


_EVALUATION_TYPES = (
    "BIGINT",
    "VARCHAR",
    "VARCHAR",
    "VARCHAR",
    "DOUBLE",
    "VARCHAR",
    "VARCHAR",
    "VARCHAR",
    "JSON",
    "BIGINT",
    "BIGINT",
    "BIGINT",
    "DOUBLE",
)


_AI_USAGE_TYPES = ("BIGINT", "BIGINT", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "BIGINT", "BIGINT", "BIGINT",
                   "BIGINT", "BIGINT", "BIGINT", "BIGINT", "DOUBLE", "TIMESTAMP")  # fmt: skip


_AI_CALL_TYPES = ("BIGINT", "BIGINT", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "BIGINT", "BIGINT",
                  "BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMP")  # fmt: skip


_COLUMN_TYPES = {  # tables whose rows travel as unnested columns, with their column types
    "program_scores": _SCORE_TYPES,
    "ai_usage": _AI_USAGE_TYPES,
    "ai_calls": _AI_CALL_TYPES,
}


_ARROW_TYPES = {"BIGINT": pa.int64(), "VARCHAR": pa.string(), "DOUBLE": pa.float64(), "JSON": pa.string()}


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class DuckDBWrites:
    """Writing an iteration, mixed into :class:`coco_sql.engines.duckdb.store.DuckDBStore`, which supplies the
    connection (`_con`), its lock (`_lock`) and `_insert_run`."""

    # -- iterations ------------------------------------------------------------------------------------------
    def write_iteration(self, batch: IterationBatch) -> None:
        with self._lock:
            con = self._con
            con.execute("BEGIN TRANSACTION")
            try:
                self._insert_batch(batch)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def _insert_batch(self, batch: IterationBatch) -> None:
        """One statement per table. DuckDB's fixed cost is per statement, not per row, so rows travel as
        multi-row VALUES (small tables) or as one list per column, unnested (the larger ones). Evaluations, up to
        millions of rows, travel as Arrow tables of `EVALUATION_CHUNK_ROWS` rows (`_insert_evaluations`)."""
        now = _now()
        if batch.new_run is not None:
            self._insert_run(batch.new_run)
        rows = table_rows(batch, now)
        for table in WRITE_ORDER:
            if table == "evaluations":
                for columns in evaluation_chunks(batch):
                    self._insert_evaluations(columns)
            elif table in _COLUMN_TYPES:
                self._insert_columns(table, _COLUMN_TYPES[table], rows[table])
            else:
                self._insert_values(table, rows[table])
        self._insert_cache(batch, now)
        if batch.finish_run:
            self._con.execute(
                "UPDATE runs SET status = 'finished', finished_at = ? WHERE run_id = ?", [now, batch.run_id]
            )

    def _insert_cache(self, batch: IterationBatch, now: datetime) -> None:
        """New AI cache entries of one iteration (shared by every run: an entry already there stays)."""
        if batch.ai_cache:
            self._con.execute(
                "INSERT INTO ai_cache SELECT * FROM (SELECT unnest(?::VARCHAR[]) AS k, unnest(?::VARCHAR[]), "
                "unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::BIGINT[]), "
                "unnest(?::DOUBLE[]), ?::TIMESTAMP) ON CONFLICT DO NOTHING",
                [
                    [e.key for e in batch.ai_cache],
                    [e.function for e in batch.ai_cache],
                    [e.model for e in batch.ai_cache],
                    [e.response for e in batch.ai_cache],
                    [e.input_tokens for e in batch.ai_cache],
                    [e.output_tokens for e in batch.ai_cache],
                    [e.latency_ms for e in batch.ai_cache],
                    now,
                ],
            )
        if batch.ai_embeddings:
            self._con.execute(
                "INSERT INTO ai_embeddings SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
                "unnest(?::FLOAT[][]), unnest(?::BIGINT[]), ?::TIMESTAMP ON CONFLICT DO NOTHING",
                [
                    [e.model for e in batch.ai_embeddings],
                    [e.text_hash for e in batch.ai_embeddings],
                    [e.vector.tolist() for e in batch.ai_embeddings],
                    [e.input_tokens for e in batch.ai_embeddings],
                    now,
                ],
            )

    def _insert_values(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        placeholders = "(" + ", ".join("?" * len(rows[0])) + ")"
        self._con.execute(
            f"INSERT INTO {table} VALUES {', '.join([placeholders] * len(rows))}",
            [value for row in rows for value in row],
        )

    def _insert_columns(self, table: str, types: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        columns = [list(column) for column in zip(*rows, strict=True)]
        selects = ", ".join(f"unnest(?::{t}[])::JSON" if t == "JSON" else f"unnest(?::{t}[])" for t in types)
        self._con.execute(f"INSERT INTO {table} SELECT {selects}", columns)

    def _insert_evaluations(self, columns: list[list[Any]]) -> None:
        """One chunk of evaluation rows (`rows.evaluation_chunks`), scanned by DuckDB as an Arrow table.

        Why not unnested lists, as the smaller tables: DuckDB converts a list parameter value by value, which
        took 3 s per 200,000 evaluation rows; an Arrow table of the same columns is built in C and scanned in
        about 0.15 s. The observation column is JSON text cast to JSON, as the lists were."""
        table = pa.table(
            {
                f"c{k}": pa.array(column, type=_ARROW_TYPES[kind])
                for k, (column, kind) in enumerate(zip(columns, _EVALUATION_TYPES, strict=True))
            }
        )
        selects = ", ".join(
            f"c{k}::JSON" if kind == "JSON" else f"c{k}" for k, kind in enumerate(_EVALUATION_TYPES)
        )
        self._con.register("_coco_evaluations", table)
        try:
            self._con.execute(f"INSERT INTO evaluations SELECT {selects} FROM _coco_evaluations")
        finally:
            self._con.unregister("_coco_evaluations")
