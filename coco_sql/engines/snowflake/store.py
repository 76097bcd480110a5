"""The Snowflake warehouse, through Snowpark: the same tables as DuckDB (`sql/schema.sql`), written and read with
the DataFrame API (`save_as_table`, `Table.update`, `Table.merge`, `Table.delete`, filters and joins).

Raw SQL goes through one injected `SqlExecutor` and nothing else: the named history and report queries
(written in DuckDB, transpiled here with sqlglot) and a task's source query. On an account the executor is
`SessionSql` (`session.sql`); Snowpark's local testing mode has no `session.sql`, so there the executor is
`local.LocalSql`, which runs the same Snowflake SQL on DuckDB over the session's tables
(`default_executor`). Candidates, probes and Python programs run through the candidate engine
(`candidate_engine`, `candidates`).

Round trips. Each statement costs an account 50-300 ms, so the store keeps them few: the tables are created once,
by `coco-sql deploy` (or `create_tables`, in local testing), never per call; an iteration is written as one
staged batch and one multi-table INSERT ALL (`batch`), through the one injected `SqlWriter`
(`SessionWrites` on an account, `local_writes.LocalWrites` in local testing); `recover` reads once and
deletes only what an interrupted write of an older version left, one statement per table. The README gives the
statements per iteration, counted in local testing (`counting`).

Atomicity. The INSERT ALL is one statement: an iteration's rows land together or not at all. A run's end is a
second statement (the status update after the run_finished event), which `recover` completes if it was lost.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from coco_sql.engines.snowflake.batch import RECOVER_SQL, SqlWriter, default_writer, write_batch
from coco_sql.engines.snowflake.sql import (
    SqlExecutor,
    default_executor,
    snowpark_schema,
)
from coco_sql.errors import StoreError
from coco_sql.llm.cache import CachedEmbedding, CachedResponse
from coco_sql.store.history_sql import LIST_COLUMNS
from coco_sql.store.history_sql import QUERIES as HISTORY_QUERIES
from coco_sql.store.inputs import check_run_id, checked_source
from coco_sql.store.named import decode_lists, named_query
from coco_sql.store.portable import snowflake_query
from coco_sql.store.records import (
    ArchiveEntry,
    DeployUsage,
    Event,
    IterationBatch,
    LedgerEntry,
    Primitive,
    PrimitiveTrial,
    ProgramRecord,
    ProgramScore,
    RunRecord,
    deploy_usage_of,
    to_json,
)
from coco_sql.store.registered import RegisteredTask, refuse_reuse, stored_rows
from coco_sql.store.report_sql import QUERIES as REPORT_QUERIES
from coco_sql.store.rows import Row
from coco_sql.store.table_schema import Column, table_columns
from coco_sql.store.values import plain

if TYPE_CHECKING:
    from snowflake.snowpark import DataFrame, Session

    from coco_sql.engines.snowflake.candidates import CandidateSql, WarehouseCandidates

_ITERATION_TABLES = {  # per-iteration tables, with the column that holds the iteration (`recover`)
    "archive_entries": "iteration",
    "ledger": "iteration",
    "events": "iteration",
    "ai_usage": "iteration",
    "ai_calls": "iteration",
    "agent_turns": "iteration",
    "primitives": "created_iteration",
    "primitive_trials": "iteration",
    "label_errors": "iteration",
}


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class SnowparkStore:
    """A coco-sql store in the current database and schema of a Snowpark session (a stored procedure's, or one
    opened from connections.toml). Its tables and views come from `coco-sql deploy` (`create_tables` in local
    testing); opening a store runs no statement."""

    engine = "snowflake"
    write_behind = False  # a stored procedure's session is held by the thread that called it

    def __init__(
        self,
        session: Session,
        *,
        sql: SqlExecutor | None = None,
        writes: SqlWriter | None = None,
        read_only: bool = False,
        queries: CandidateSql | None = None,
    ) -> None:
        """`sql`: the executor of the store's own queries; `writes`: of its batch writes (`batch`);
        `queries`: of the candidates' (`candidates`); by default the session's (or local testing's)."""
        self.path = "the Snowflake schema"
        self.read_only = read_only  # kept for callers that open a store only to read (mirror)
        self._session = session
        self._sql = sql if sql is not None else default_executor(session)
        self._queries = queries
        self._writes = writes if writes is not None else default_writer(session, self._sql)
        self._stage = f"COCO_BATCH_{uuid.uuid4().hex[:12].upper()}"  # this store's staging table (temporary)
        self._lock = threading.RLock()
        self._schemas = {name: snowpark_schema([(c.name, c.type) for c in cols], cols)
                         for name, cols in table_columns().items()}  # fmt: skip

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
        """Repair what an interrupted write of run `run_id` left before it resumes: rows of iterations past the
        last program row, program_scores of programs that have no row, evaluations without their program_scores
        row (a store an older coco-sql wrote table by table), and a run whose run_finished event (its last
        batch) was written but not its status. One query finds what needs it; then one statement per table that
        does (none for a clean run)."""
        from snowflake.snowpark.functions import col, concat, lit

        with self._lock:
            found = self._sql(snowflake_query(RECOVER_SQL, {"run_id": run_id})).frame
            needed = {str(t): int(n) for t, n in zip(found["tbl"], found["n"], strict=True) if int(n) > 0}
            if not needed:
                return
            committed = self.last_iteration(run_id)
            mine = col("run_id") == run_id
            for name, iteration in _ITERATION_TABLES.items():
                if name in needed:
                    self._table(name).delete(mine & (col(iteration) > committed))
            programs = self._table("programs").filter(mine).select("program_id")
            if "program_scores" in needed:
                self._table("program_scores").delete(mine & ~col("program_id").isin(programs))
            if "evaluations" in needed:
                scored = (
                    self._table("program_scores")
                    .filter(mine & col("program_id").isin(programs))
                    .select(concat(col("program_id"), lit("|"), col("split")))
                )
                key = concat(col("program_id"), lit("|"), col("split"))
                self._table("evaluations").delete(mine & ~key.isin(scored))
            if "runs" in needed:
                self._table("runs").update({"status": lit("finished"), "finished_at": lit(_now())}, mine)

    # -- iterations ------------------------------------------------------------------------------------------
    def write_iteration(self, batch: IterationBatch) -> None:
        """The batch staged and moved by one INSERT ALL (`batch`); a run's end updates its status."""
        from snowflake.snowpark.functions import col, lit

        now = _now()
        with self._lock:
            write_batch(self._session, self._writes, self._stage, batch, now)
            if batch.finish_run:
                self._table("runs").update(
                    {"status": lit("finished"), "finished_at": lit(now)}, col("run_id") == batch.run_id
                )

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

    def row_scores(
        self, run_id: int, split: str, program_id: str | None = None
    ) -> dict[str, dict[str, float]]:
        one = {} if program_id is None else {"program_id": program_id}
        fields = ["program_id", "instance_id", "score"]
        frame = self._frame("evaluations", fields, run_id=run_id, split=split, **one)
        result: dict[str, dict[str, float]] = {}
        for program_id, instance_id, score in frame.itertuples(index=False, name=None):
            result.setdefault(str(program_id), {})[str(instance_id)] = float(score)
        return result

    def deploy_usage(self, run_id: int) -> dict[str, DeployUsage]:
        n_rows = {pid: score.n_rows for pid, score in self.program_scores(run_id, "val").items()}
        fields = ["program_id", "model", "calls", "input_tokens", "cached_input_tokens", "output_tokens",
                  "cached_output_tokens"]  # fmt: skip
        spent: dict[tuple[str, str], tuple[int, int, int]] = {}
        for r in self._select("ai_usage", fields, run_id=run_id, split="val"):
            key = (str(r["program_id"]), str(r["model"]))
            was = spent.get(key, (0, 0, 0))
            spent[key] = (
                was[0] + int(r["calls"]),
                was[1] + int(r["input_tokens"]) + int(r["cached_input_tokens"]),
                was[2] + int(r["output_tokens"]) + int(r["cached_output_tokens"]),
            )
        rows = [(pid, n_rows[pid], model, *totals) for (pid, model), totals in spent.items() if pid in n_rows]
        rows += [(pid, n, None, 0, 0, 0) for pid, n in n_rows.items()]  # programs without AI usage too
        return deploy_usage_of(rows)

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

    # -- tasks from warehouse rows ----------------------------------------------------------------------------
    def read_source(self, source: str) -> tuple[pd.DataFrame, dict[str, str]]:
        """A user's table (by name) or query, in Snowflake SQL: the one place the user's own SQL runs. It must be
        one read-only query (`store.inputs.checked_source`)."""
        stripped = checked_source(source, "snowflake")
        try:
            result = self._sql(stripped)
        except Exception as error:  # the engine's own error type differs between executors
            raise StoreError(f"the source {source!r} fails: {_first_line(error)}") from None
        frame = result.frame
        for column, kind in result.types.items():  # an ARRAY arrives as JSON text; DuckDB gives a list
            if kind.endswith("[]") and column in frame:
                frame[column] = [_json(v) for v in frame[column]]
        return frame, result.types

    def register_task(
        self,
        name: str,
        source: str,
        options: Mapping[str, Any],
        types: Mapping[str, str],
        rows: pd.DataFrame,
        test_rows: pd.DataFrame | None = None,
    ) -> None:
        from snowflake.snowpark.functions import col

        with self._lock:
            refuse_reuse(name, [r["run_id"] for r in self._select("runs", ["run_id"], task=name)])
            self._table("tasks").delete(col("name") == name)
            self._table("task_rows").delete(col("task") == name)
            stored = stored_rows(rows, test_rows)
            records = json.loads(stored.to_json(orient="records", date_format="iso"))
            self._append("task_rows", [(name, i, json.dumps(r)) for i, r in enumerate(records)])
            self._append("tasks", [(name, source, to_json(options), to_json(dict(types)), len(rows), _now())])

    def registered_task(self, name: str) -> RegisteredTask | None:
        found = self._select("tasks", name=name)
        if not found:
            return None
        data = self._select("task_rows", ["row_data"], task=name, order=("position",))
        return RegisteredTask.from_stored(
            found[0]["source"],
            _json(found[0]["options"]),
            _json(found[0]["column_types"]),
            int(found[0]["n_rows"]),
            (_json(r["row_data"]) for r in data),
        )

    def set_progress(self, row: Mapping[str, Any]) -> None:
        from snowflake.snowpark.functions import col

        columns = [c.name for c in table_columns()["coco_progress"]]
        with self._lock:
            self._table("coco_progress").delete(col("run_id") == row["run_id"])
            self._append("coco_progress", [tuple(row.get(c) for c in columns)])

    # -- raw SQL: named queries, candidates --------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        """A trusted read-only query of coco-sql's own, written in DuckDB with `?` parameters."""
        return self._sql(snowflake_query(sql, list(params))).frame

    def history(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return decode_lists(self._named("history", HISTORY_QUERIES, name, params), LIST_COLUMNS.get(name, ()))

    def report(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._named("report", REPORT_QUERIES, name, params)

    def candidate_engine(self) -> WarehouseCandidates:
        """The warehouse runs candidates, probes and Python programs itself (`candidates`)."""
        from coco_sql.engines.snowflake.candidates import WarehouseCandidates

        return WarehouseCandidates(self._session, self._queries)

    def _named(
        self, kind: str, queries: Mapping[str, str], name: str, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        sql, bound = named_query(kind, queries, name, params)
        frame = self._sql(snowflake_query(sql, bound)).frame
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
            table,
            mode="append",
            table_exists=True,  # deployed: no SHOW TABLES before each append
        )


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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
