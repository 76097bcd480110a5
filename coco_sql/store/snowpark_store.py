"""The Snowflake warehouse, through Snowpark: the same tables as DuckDB (`sql/schema.sql`), written and read with
the DataFrame API (`save_as_table`, `Table.update`, `Table.merge`, `Table.delete`, filters and joins).

Raw SQL goes through one injected `SqlExecutor` and nothing else: the named history and report queries
(written in DuckDB, transpiled here with sqlglot) and a task's source query. On an account the executor is
`SessionSql` (`session.sql`); Snowpark's local testing mode has no `session.sql`, so there the executor is
`snowpark_local.LocalSql`, which runs the same Snowflake SQL on DuckDB over the session's tables
(`default_executor`). Candidates, probes and Python programs run through the candidate engine
(`candidate_engine`, `snowpark_candidates`).

Atomicity. Snowpark writes are one statement per table and there is no transaction around them here (a write of
more than a few hundred local rows creates a temporary table, and DDL would commit an open transaction). So an
iteration's tables are written in `rows.WRITE_ORDER`, where a later row vouches for the earlier ones (a program
row for its iteration, a program_scores row for its evaluations), and `recover` deletes what an interrupted
write left before a run resumes. Readers during a run see a prefix, as with DuckDB.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp

from coco_sql.errors import StoreError
from coco_sql.llm.cache import CachedEmbedding, CachedResponse
from coco_sql.store.history_sql import QUERIES as HISTORY_QUERIES
from coco_sql.store.inputs import check_run_id, checked_source
from coco_sql.store.named import named_query
from coco_sql.store.records import (
    DEPLOY_COST_EVENT,
    ArchiveEntry,
    Event,
    IterationBatch,
    LedgerEntry,
    Primitive,
    PrimitiveTrial,
    ProgramRecord,
    ProgramScore,
    RunRecord,
    to_json,
)
from coco_sql.store.report_sql import QUERIES as REPORT_QUERIES
from coco_sql.store.rows import WRITE_ORDER, Row, evaluation_chunks, table_rows
from coco_sql.store.table_schema import Column, table_columns
from coco_sql.store.values import plain

if TYPE_CHECKING:
    from snowflake.snowpark import DataFrame, Session
    from snowflake.snowpark.types import DataType, StructType

    from coco_sql.store.snowpark_candidates import CandidateSql, WarehouseCandidates

_ITERATION_TABLES = {  # per-iteration tables, with the column that holds the iteration (`recover`)
    "archive_entries": "iteration",
    "ledger": "iteration",
    "events": "iteration",
    "ai_usage": "iteration",
    "ai_calls": "iteration",
    "agent_turns": "iteration",
    "primitives": "created_iteration",
    "primitive_trials": "iteration",
}


class SqlResult(NamedTuple):
    frame: pd.DataFrame  # lower-case column names for Snowflake's unquoted (upper-case) ones
    types: dict[str, str]  # column -> DuckDB type name


class SqlExecutor(Protocol):
    """Runs one Snowflake-dialect statement (literals inlined) and returns its rows. `timeout_s` bounds it."""

    def __call__(self, sql: str, *, timeout_s: float | None = None) -> SqlResult: ...


class SessionSql:
    """The executor of a real account: `session.sql`, with Snowflake's own statement timeout."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __call__(self, sql: str, *, timeout_s: float | None = None) -> SqlResult:
        frame = self._session.sql(sql)
        params = {"STATEMENT_TIMEOUT_IN_SECONDS": max(1, round(timeout_s))} if timeout_s else None
        types = {_column_name(f.name): duckdb_type(f.datatype) for f in frame.schema.fields}
        data = frame.to_pandas(statement_params=params)
        data.columns = [_column_name(c) for c in data.columns]
        return SqlResult(data, types)


def default_executor(session: Session) -> SqlExecutor:
    """`SessionSql` on an account; `LocalSql` (DuckDB) in Snowpark's local testing mode, which has no SQL."""
    from snowflake.snowpark.mock._connection import MockServerConnection

    if isinstance(getattr(session, "_conn", None), MockServerConnection):
        from coco_sql.store.snowpark_local import LocalSql

        return LocalSql(session)
    return SessionSql(session)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class SnowparkStore:
    """A coco-sql store in the current database and schema of a Snowpark session (a stored procedure's, or one
    opened from connections.toml). Tables are created if missing; the views come from `coco-sql deploy`."""

    engine = "snowflake"
    write_behind = False  # a stored procedure's session is held by the thread that called it

    def __init__(
        self,
        session: Session,
        *,
        sql: SqlExecutor | None = None,
        read_only: bool = False,
        queries: CandidateSql | None = None,
    ) -> None:
        """`sql`: the executor of the store's own queries; `queries`: of the candidates' (`snowpark_candidates`);
        by default the session's (or local testing's)."""
        self.path = "the Snowflake schema"
        self._session = session
        self._sql = sql if sql is not None else default_executor(session)
        self._queries = queries
        self._lock = threading.RLock()
        self._schemas = {name: snowpark_schema([(c.name, c.type) for c in cols], cols)
                         for name, cols in table_columns().items()}  # fmt: skip
        if not read_only:
            for name, schema in self._schemas.items():
                session.create_dataframe([], schema=schema).write.save_as_table(name, mode="ignore")

    def close(self) -> None:
        """The session belongs to the caller; nothing to release."""

    def __enter__(self) -> SnowparkStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ------------------------------------------------------------------------------------------------
    def next_run_id(self) -> int:
        latest = self.latest_run_id()
        return 1 if latest is None else latest + 1

    def latest_run_id(self, task: str | None = None) -> int | None:
        from snowflake.snowpark.functions import col
        from snowflake.snowpark.functions import max as max_

        runs = self._table("runs")
        if task is not None:
            runs = runs.filter(col("task") == task)
        (value,) = runs.select(max_(col("run_id"))).collect()[0]
        return None if value is None else int(value)

    def create_run(self, run: RunRecord) -> None:
        self._append("runs", [self._run_row(run)])

    @staticmethod
    def _run_row(run: RunRecord) -> tuple[Any, ...]:
        return (run.run_id, run.task, run.task_fingerprint, run.seed, run.budget, to_json(run.config), run.status,
               _now(), None)  # fmt: skip

    def get_run(self, run_id: int) -> RunRecord:
        check_run_id(run_id, self.path)
        rows = self._select("runs", run_id=run_id)
        if not rows:
            raise StoreError(f"no run {run_id} in {self.path}")
        r = rows[0]
        return RunRecord(
            run_id=int(r["run_id"]),
            task=r["task"],
            task_fingerprint=r["task_fingerprint"],
            seed=int(r["seed"]),
            budget=int(r["budget"]),
            config=_json(r["config"]),
            status=r["status"],
            created_at=r["created_at"],
            finished_at=r["finished_at"],
        )

    def set_budget(self, run_id: int, budget: int) -> None:
        from snowflake.snowpark.functions import col, lit
        from snowflake.snowpark.types import TimestampType

        with self._lock:
            self._table("runs").update(
                {
                    "budget": lit(budget),
                    "status": lit("running"),
                    "finished_at": lit(None).cast(TimestampType()),
                },
                col("run_id") == run_id,
            )

    def set_config(self, run_id: int, config: Mapping[str, Any]) -> None:
        from snowflake.snowpark.functions import col, lit, parse_json

        with self._lock:
            self._table("runs").update(
                {"config": parse_json(lit(to_json(dict(config))))}, col("run_id") == run_id
            )

    def recover(self, run_id: int) -> None:
        """Repair what an interrupted `write_iteration` of run `run_id` left (see the module docstring): delete
        rows of iterations past the last program row, program_scores of programs that have no row, and
        evaluations without their program_scores row; and mark finished a run whose run_finished event (its
        finish batch's last row but the status) was written. Called before a run resumes."""
        from snowflake.snowpark.functions import col, lit

        with self._lock:
            committed = self.last_iteration(run_id)
            mine = col("run_id") == run_id
            for name, iteration in _ITERATION_TABLES.items():
                self._table(name).delete(mine & (col(iteration) > committed))
            programs = {r["program_id"] for r in self._select("programs", ["program_id"], run_id=run_id)}
            scores = self._select("program_scores", ["program_id", "split"], run_id=run_id)
            for orphan in {r["program_id"] for r in scores} - programs:
                self._table("program_scores").delete(mine & (col("program_id") == orphan))
            scored = {(r["program_id"], r["split"]) for r in scores if r["program_id"] in programs}
            evaluated = self._select("evaluations", ["program_id", "split"], run_id=run_id, distinct=True)
            for pid, split in {(r["program_id"], r["split"]) for r in evaluated} - scored:
                self._table("evaluations").delete(mine & (col("program_id") == pid) & (col("split") == split))
            finished = self._select("events", ["iteration"], run_id=run_id, kind="run_finished")
            if self.get_run(run_id).status != "finished" and any(
                r["iteration"] == committed for r in finished
            ):
                self._table("runs").update({"status": lit("finished"), "finished_at": lit(_now())}, mine)

    # -- iterations ------------------------------------------------------------------------------------------
    def write_iteration(self, batch: IterationBatch) -> None:
        from snowflake.snowpark.functions import col, lit

        now = _now()
        with self._lock:
            if batch.new_run is not None:  # first: a batch cut short is repaired by `recover` on resume
                self._append("runs", [self._run_row(batch.new_run)])
            rows = table_rows(batch, now)
            for table in WRITE_ORDER:
                if table == "evaluations":  # one append per chunk: the rows of a large table stay bounded
                    for columns in evaluation_chunks(batch):
                        self._append(table, list(zip(*columns, strict=True)))
                else:
                    self._append(table, rows[table])
            if batch.finish_run:
                self._table("runs").update(
                    {"status": lit("finished"), "finished_at": lit(now)}, col("run_id") == batch.run_id
                )
            cache = [(e.key, e.function, e.model, e.response, e.input_tokens, e.output_tokens, e.latency_ms, now)
                     for e in batch.ai_cache]  # fmt: skip
            self._merge_new("ai_cache", cache, ("cache_key",))
            embeddings = [
                (e.model, e.text_hash, e.vector.tolist(), e.input_tokens, now) for e in batch.ai_embeddings
            ]
            self._merge_new("ai_embeddings", embeddings, ("model", "text_hash"))

    def ai_cache_entries(self) -> tuple[list[CachedResponse], list[CachedEmbedding]]:
        responses = [
            CachedResponse(r["cache_key"], r["function"], r["model"], r["response"], int(r["input_tokens"]),
                           int(r["output_tokens"]), float(r["latency_ms"]))
            for r in self._select("ai_cache")
        ]  # fmt: skip
        embeddings = [
            CachedEmbedding(r["model"], r["text_hash"], np.asarray(_json(r["vector"]), dtype=np.float32),
                            int(r["input_tokens"]))
            for r in self._select("ai_embeddings")
        ]  # fmt: skip
        return responses, embeddings

    def last_iteration(self, run_id: int) -> int:
        from snowflake.snowpark.functions import col
        from snowflake.snowpark.functions import max as max_

        (value,) = (
            self._table("programs")
            .filter(col("run_id") == run_id)
            .select(max_(col("iteration")))
            .collect()[0]
        )
        return -1 if value is None else int(value)

    # -- reads -----------------------------------------------------------------------------------------------
    def programs(self, run_id: int) -> list[ProgramRecord]:
        return [_program(r) for r in self._select("programs", run_id=run_id, order=("iteration",))]

    def program(self, program_id: str) -> ProgramRecord:
        rows = self._select("programs", program_id=program_id)
        if not rows:
            raise StoreError(f"no program {program_id!r} in {self.path}")
        return _program(rows[0])

    def program_scores(self, run_id: int, split: str) -> dict[str, ProgramScore]:
        return {
            r["program_id"]: ProgramScore(r["program_id"], r["split"], float(r["score"]), int(r["n_rows"]),
                                          int(r["n_errors"]), int(r["model_calls"]), int(r["input_tokens"]),
                                          int(r["output_tokens"]), float(r["latency_ms"]), int(r["cache_hits"]))
            for r in self._select("program_scores", run_id=run_id, split=split)
        }  # fmt: skip

    def archive_entries(self, run_id: int) -> list[ArchiveEntry]:
        rows = self._select("archive_entries", run_id=run_id, order=("iteration", "seq"))
        return [ArchiveEntry(int(r["iteration"]), int(r["seq"]), int(r["island"]), r["cell"], r["program_id"],
                             r["reason"]) for r in rows]  # fmt: skip

    def row_scores(self, run_id: int, split: str) -> dict[str, dict[str, float]]:
        frame = self._frame("evaluations", ["program_id", "instance_id", "score"], run_id=run_id, split=split)
        result: dict[str, dict[str, float]] = {}
        for program_id, instance_id, score in frame.itertuples(index=False, name=None):
            result.setdefault(str(program_id), {})[str(instance_id)] = float(score)
        return result

    def ledger(self, run_id: int) -> list[LedgerEntry]:
        fields = ["iteration", "program_id", "strategy", "kind", "status", "parent_score", "child_score",
                  "score_delta", "paradigm", "note"]  # fmt: skip
        rows = self._select("ledger", fields, run_id=run_id, order=("iteration",))
        return [LedgerEntry(*(plain(r[f]) for f in fields)) for r in rows]

    def events(self, run_id: int, kind: str) -> list[Event]:
        rows = self._select("events", run_id=run_id, kind=kind, order=("iteration",))
        return [
            Event(int(r["iteration"]), r["kind"], r["program_id"], _json(r["payload"]) or {}) for r in rows
        ]

    def primitives(self, run_id: int) -> list[Primitive]:
        fields = ["name", "language", "code", "signature", "origin_program", "created_iteration", "how"]
        rows = self._select("primitives", fields, run_id=run_id, order=("created_iteration", "name"))
        return [Primitive(r["name"], r["language"], r["code"], r["signature"], r["origin_program"],
                          int(r["created_iteration"]), r["how"]) for r in rows]  # fmt: skip

    def primitive_trials(self, run_id: int) -> list[PrimitiveTrial]:
        fields = ["iteration", "program_id", "operator", "focus", "parent_score", "child_score", "improved",
                  "verified", "reason"]  # fmt: skip
        rows = self._select(
            "primitive_trials", fields, run_id=run_id, order=("iteration", "program_id", "operator")
        )
        return [PrimitiveTrial(int(r["iteration"]), r["program_id"], r["operator"], r["focus"],
                               plain(r["parent_score"]), plain(r["child_score"]), bool(r["improved"]),
                               bool(r["verified"]), r["reason"]) for r in rows]  # fmt: skip

    def champion(self, run_id: int) -> tuple[ProgramRecord, float] | None:
        """The valid program with the best validation score (ties: earliest), with that score; a child over its
        run's deploy-cost limit (a `deploy_cost` event with `within` false) is never the champion."""
        from snowflake.snowpark.functions import col

        programs = self._table("programs").filter((col("run_id") == run_id) & col("valid"))
        over = [
            e.program_id for e in self.events(run_id, DEPLOY_COST_EVENT) if not e.payload.get("within", True)
        ]
        if over:
            programs = programs.filter(~col("program_id").isin(over))
        scores = self._table("program_scores").filter((col("run_id") == run_id) & (col("split") == "val"))
        full = scores.agg({"n_rows": "max"}).collect()  # a child a minibatch gate stopped has fewer rows
        if full and full[0][0] is not None:
            scores = scores.filter(col("n_rows") == int(full[0][0]))
        joined = programs.join(scores, programs["program_id"] == scores["program_id"]).select(
            programs["program_id"].alias("pid"),
            programs["iteration"].alias("it"),
            scores["score"].alias("sc"),
        )
        best = joined.sort(col("sc").desc(), col("it")).limit(1).collect()
        return (self.program(best[0]["PID"]), float(best[0]["SC"])) if best else None

    # -- tasks from warehouse rows ----------------------------------------------------------------------------
    def read_source(self, source: str) -> tuple[pd.DataFrame, dict[str, str]]:
        """A user's table (by name) or query, in Snowflake SQL: the one place the user's own SQL runs. It must be
        one read-only query (`store.inputs.checked_source`)."""
        stripped = checked_source(source, "snowflake")
        try:
            result = self._sql(stripped)
        except Exception as error:  # the engine's own error type differs between executors
            raise StoreError(f"the source {source!r} fails: {_first_line(error)}") from None
        return result.frame, result.types

    def register_task(
        self, name: str, source: str, options: Mapping[str, Any], types: Mapping[str, str], rows: pd.DataFrame
    ) -> None:
        from snowflake.snowpark.functions import col

        with self._lock:
            if self._select("runs", ["run_id"], task=name):
                raise StoreError(f"task {name!r} already has runs; register the new rows under another name")
            self._table("tasks").delete(col("name") == name)
            self._table("task_rows").delete(col("task") == name)
            records = json.loads(rows.to_json(orient="records", date_format="iso"))
            self._append("task_rows", [(name, i, json.dumps(r)) for i, r in enumerate(records)])
            self._append("tasks", [(name, source, to_json(options), to_json(dict(types)), len(rows), _now())])

    def registered_task(self, name: str) -> tuple[str, dict[str, Any], dict[str, str], pd.DataFrame] | None:
        found = self._select("tasks", name=name)
        if not found:
            return None
        types = _json(found[0]["column_types"])
        data = self._select("task_rows", ["row_data"], task=name, order=("position",))
        rows = pd.DataFrame([_json(r["row_data"]) for r in data], columns=list(types))
        return found[0]["source"], _json(found[0]["options"]), types, rows

    # -- raw SQL: named queries, candidates --------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        """A trusted read-only query of coco-sql's own, written in DuckDB with `?` parameters."""
        return self._sql(_snowflake(sql, list(params))).frame

    def history(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._named("history", HISTORY_QUERIES, name, params)

    def report(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._named("report", REPORT_QUERIES, name, params)

    def candidate_engine(self) -> WarehouseCandidates:
        """The warehouse runs candidates, probes and Python programs itself (`snowpark_candidates`)."""
        from coco_sql.store.snowpark_candidates import WarehouseCandidates

        return WarehouseCandidates(self._session, self._queries)

    def _named(
        self, kind: str, queries: Mapping[str, str], name: str, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        sql, bound = named_query(kind, queries, name, params)
        frame = self._sql(_snowflake(sql, bound)).frame
        return [{c: plain(v) for c, v in zip(frame.columns, row, strict=True)}
                for row in frame.itertuples(index=False, name=None)]  # fmt: skip

    # -- DataFrame helpers -------------------------------------------------------------------------------------
    def _table(self, name: str) -> Any:
        return self._session.table(name)

    def _filtered(self, table: str, conditions: Mapping[str, Any]) -> DataFrame:
        from snowflake.snowpark.functions import col

        frame = self._table(table)
        for column, value in conditions.items():
            frame = frame.filter(col(column) == value)
        return frame

    def _select(
        self,
        table: str,
        fields: Sequence[str] | None = None,
        *,
        order: Sequence[str] = (),
        distinct: bool = False,
        **conditions: Any,
    ) -> list[dict[str, Any]]:
        """Rows of `table` where each `conditions` column equals its value, as dicts with lower-case keys."""
        frame = self._filtered(table, conditions)
        if order:
            frame = frame.sort(*order)
        if fields:
            frame = frame.select(*fields)
        if distinct:
            frame = frame.distinct()
        return [{k.lower(): v for k, v in row.as_dict().items()} for row in frame.collect()]

    def _frame(self, table: str, fields: Sequence[str], **conditions: Any) -> pd.DataFrame:
        frame = self._filtered(table, conditions).select(*fields).to_pandas()
        frame.columns = [c.lower() for c in frame.columns]
        return frame

    def table_frame(self, table: str, **conditions: Any) -> pd.DataFrame:
        """Every column of `table`'s rows where each `conditions` column equals its value (`mirror`)."""
        return self._frame(table, [c.name for c in table_columns()[table]], **conditions)

    def _append(self, table: str, rows: list[Row]) -> None:
        if not rows:
            return
        columns = table_columns()[table]
        data = [[_cell(value, column) for value, column in zip(row, columns, strict=True)] for row in rows]
        self._session.create_dataframe(data, schema=self._schemas[table]).write.save_as_table(
            table, mode="append"
        )

    def _merge_new(self, table: str, rows: list[Row], key: tuple[str, ...]) -> None:
        """Insert the rows whose key is not in `table` yet (the shared, content-addressed AI cache)."""
        if not rows:
            return
        from snowflake.snowpark.functions import when_not_matched

        columns = table_columns()[table]
        data = [[_cell(value, column) for value, column in zip(row, columns, strict=True)] for row in rows]
        source = self._session.create_dataframe(data, schema=self._schemas[table])
        target = self._table(table)
        condition = None
        for name in key:
            equal = target[name] == source[name]
            condition = equal if condition is None else condition & equal
        target.merge(
            source, condition, [when_not_matched().insert({c.name: source[c.name] for c in columns})]
        )


# -- type mapping ----------------------------------------------------------------------------------------------
def snowpark_type(duckdb: str) -> DataType:
    """The Snowpark type of a DuckDB column type of the schema (or of a procedure's result)."""
    from snowflake.snowpark import types as t

    upper = duckdb.upper()
    if upper.endswith("[]"):
        return t.ArrayType(snowpark_type(upper[:-2]))
    simple: dict[str, DataType] = {
        "BIGINT": t.LongType(), "INTEGER": t.LongType(), "TEXT": t.StringType(), "VARCHAR": t.StringType(),
        "DOUBLE": t.DoubleType(), "REAL": t.FloatType(), "FLOAT": t.FloatType(), "BOOLEAN": t.BooleanType(),
        "TIMESTAMP": t.TimestampType(t.TimestampTimeZone.NTZ), "JSON": t.VariantType(),
    }  # fmt: skip
    if upper not in simple:
        raise StoreError(f"no Snowpark type for the schema type {duckdb!r}")
    return simple[upper]


def snowpark_schema(
    columns: Sequence[tuple[str, str]], nullability: Sequence[Column] | None = None
) -> StructType:
    from snowflake.snowpark.types import StructField, StructType

    nullable = [c.nullable for c in nullability] if nullability is not None else [True] * len(columns)
    return StructType(
        [
            StructField(name, snowpark_type(kind), nullable=ok)
            for (name, kind), ok in zip(columns, nullable, strict=True)
        ]
    )


def duckdb_type(datatype: Any) -> str:
    """The DuckDB type name coco-sql's tasks use for a Snowpark column type."""
    from snowflake.snowpark import types as t

    if isinstance(datatype, t.DecimalType):
        return "BIGINT" if datatype.scale == 0 else "DOUBLE"
    if isinstance(datatype, t.ArrayType):
        inner = datatype.element_type
        return (
            f"{duckdb_type(inner)}[]"
            if inner is not None and not isinstance(inner, t.VariantType)
            else "JSON"
        )
    names = {t.LongType: "BIGINT", t.IntegerType: "BIGINT", t.ShortType: "BIGINT", t.ByteType: "BIGINT",
             t.StringType: "VARCHAR", t.DoubleType: "DOUBLE", t.FloatType: "DOUBLE", t.BooleanType: "BOOLEAN",
             t.TimestampType: "TIMESTAMP", t.DateType: "DATE", t.VariantType: "JSON", t.MapType: "JSON",
             t.StructType: "JSON"}  # fmt: skip
    for kind, name in names.items():
        if isinstance(datatype, kind):
            return name
    return "VARCHAR"


# -- values ------------------------------------------------------------------------------------------------------
def _cell(value: Any, column: Column) -> Any:
    """A row value as Snowpark takes it for `column`: JSON text becomes the object (VARIANT)."""
    if column.type == "JSON" and isinstance(value, str):
        return json.loads(value)
    return value.item() if isinstance(value, np.generic) else value


def _json(value: Any) -> Any:
    """A VARIANT or ARRAY read back (Snowpark returns JSON text)."""
    return json.loads(value) if isinstance(value, str) else value


def _program(r: Mapping[str, Any]) -> ProgramRecord:
    return ProgramRecord(
        program_id=r["program_id"], run_id=int(r["run_id"]), iteration=int(r["iteration"]),
        parent_id=r["parent_id"], donor_id=r["donor_id"], code=r["code"], language=r["language"],
        dialect=r["dialect"], island=int(r["island"]), cell=r["cell"], approach=r["approach"],
        strategy=r["strategy"], valid=bool(r["valid"]), error=r["error"],
    )  # fmt: skip


def _column_name(name: str) -> str:
    """Snowflake reports unquoted identifiers in upper case; coco-sql's columns are lower case."""
    unquoted = name.strip('"')
    return unquoted.lower() if unquoted.isupper() or not name.startswith('"') else unquoted


def _snowflake(sql: str, params: Mapping[str, Any] | Sequence[Any]) -> str:
    """A DuckDB query of coco-sql's own in Snowflake SQL, with its `$name` (or `?`) parameters as literals: the
    values become sqlglot literal nodes, so a string from a tool call is quoted, never spliced."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    positional = iter(params) if not isinstance(params, Mapping) else None

    def bind(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter | exp.Placeholder):
            value = params[node.name] if isinstance(params, Mapping) and node.name else next(positional)  # type: ignore[arg-type]
            return exp.convert(plain(value))
        return node

    return tree.transform(bind).sql(dialect="snowflake")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
