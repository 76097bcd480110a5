"""The DuckDB warehouse: one database file holds every run. The only module with raw SQL for DuckDB."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from coco_sql.engines.duckdb.writes import DuckDBWrites, _now
from coco_sql.errors import StoreError
from coco_sql.llm.cache import CachedEmbedding, CachedResponse
from coco_sql.store.history_sql import LIST_COLUMNS
from coco_sql.store.history_sql import QUERIES as HISTORY_QUERIES
from coco_sql.store.inputs import check_run_id, checked_source
from coco_sql.store.named import decode_lists, named_query
from coco_sql.store.records import (
    ArchiveEntry,
    DeployUsage,
    Event,
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
from coco_sql.store.schema import schema_expressions, schema_statements
from coco_sql.store.values import plain

_PROGRAM_COLUMNS = (
    "program_id, run_id, iteration, parent_id, donor_id, code, language, dialect, island, cell, "
    "approach, strategy, valid, error, created_at"
)


class DuckDBStore(DuckDBWrites):
    """A coco-sql store in a DuckDB file (or ':memory:').

    One connection, guarded by a lock: DuckDB 2.0 refuses concurrent use of one connection from two threads.
    Raises StoreError when the file is locked by another process or is not a DuckDB database.
    """

    write_behind = True  # one connection behind a lock: the committer's thread may write

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        if read_only and self.path != ":memory:" and not Path(self.path).exists():
            raise StoreError(f"no coco-sql database at {self.path}")
        if not read_only and self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.IOException as error:
            raise StoreError(f"cannot open {self.path}: {_first_line(error)}") from error
        except duckdb.Error as error:
            raise StoreError(f"cannot open {self.path} as a DuckDB database: {_first_line(error)}") from error
        if not read_only:
            self._create_schema()
        else:
            self._missing_views()

    @classmethod
    def over(cls, connection: duckdb.DuckDBPyConnection, *, read_only: bool = False) -> DuckDBStore:
        """A store over an open DuckDB connection (the database a user's session already has open): it works on
        its own cursor, so it may run inside a UDF of that connection (the SQL procedures), and `close()`
        closes only that cursor."""
        store = cls.__new__(cls)
        store.path = "this database"
        store._lock = threading.Lock()
        store._con = connection.cursor()
        if not read_only:
            store._create_schema()
        return store

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _create_schema(self) -> None:
        with self._lock:
            for statement in schema_statements("duckdb"):
                self._con.execute(statement)

    def _missing_views(self) -> None:
        """Read-only, a database an older coco-sql wrote may lack a newer view: it gets it as a temporary view of
        this connection (the only thing a read-only connection may create), so reading it works the same."""
        found = self._con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        have = {name for (name,) in found}
        for expression in schema_expressions():
            if (
                isinstance(expression, exp.Create)
                and expression.kind == "VIEW"
                and expression.this.name not in have
            ):
                view = expression.copy()
                view.comments = None
                view.set("properties", exp.Properties(expressions=[exp.TemporaryProperty()]))
                with contextlib.suppress(duckdb.Error):  # not a coco-sql database: its tables are missing
                    self._con.execute(view.sql(dialect="duckdb"))

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ------------------------------------------------------------------------------------------------
    def next_run_id(self) -> int:
        (value,) = self._fetchone("SELECT COALESCE(MAX(run_id), 0) + 1 FROM runs")
        return int(value)

    def latest_run_id(self, task: str | None = None) -> int | None:
        if task is None:
            (value,) = self._fetchone("SELECT MAX(run_id) FROM runs")
        else:
            (value,) = self._fetchone("SELECT MAX(run_id) FROM runs WHERE task = ?", [task])
        return None if value is None else int(value)

    def create_run(self, run: RunRecord) -> None:
        with self._lock:
            self._insert_run(run)

    def _insert_run(self, run: RunRecord) -> None:
        self._con.execute(
            "INSERT INTO runs (run_id, task, task_fingerprint, seed, budget, config, status, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [run.run_id, run.task, run.task_fingerprint, run.seed, run.budget, to_json(run.config), run.status,
             _now()],
        )  # fmt: skip

    def get_run(self, run_id: int) -> RunRecord:
        check_run_id(run_id, self.path)
        row = self._fetchone(
            "SELECT run_id, task, task_fingerprint, seed, budget, config, status, created_at, finished_at "
            "FROM runs WHERE run_id = ?",
            [run_id],
            allow_none=True,
        )
        if row is None:
            raise StoreError(f"no run {run_id} in {self.path}")
        return RunRecord(
            run_id=int(row[0]),
            task=row[1],
            task_fingerprint=row[2],
            seed=int(row[3]),
            budget=int(row[4]),
            config=json.loads(row[5]),
            status=row[6],
            created_at=row[7],
            finished_at=row[8],
        )

    def set_budget(self, run_id: int, budget: int) -> None:
        """Extend a run's budget (``evolve --resume --budget N`` with a larger N)."""
        with self._lock:
            self._con.execute(
                "UPDATE runs SET budget = ?, status = 'running', finished_at = NULL WHERE run_id = ?",
                [budget, run_id],
            )

    def set_config(self, run_id: int, config: Mapping[str, Any]) -> None:
        """Replace a run's `runs.config` (a resume with a new max_spend or prices)."""
        with self._lock:
            self._con.execute("UPDATE runs SET config = ? WHERE run_id = ?", [to_json(dict(config)), run_id])

    def ai_cache_entries(self) -> tuple[list[CachedResponse], list[CachedEmbedding]]:
        """Everything in the AI cache tables, to warm a run's runtime."""
        with self._lock:
            responses = [
                CachedResponse(*row)
                for row in self._con.execute(
                    "SELECT cache_key, function, model, response, input_tokens, output_tokens, latency_ms "
                    "FROM ai_cache"
                ).fetchall()
            ]
            embeddings = [
                CachedEmbedding(model, digest, np.asarray(vector, dtype=np.float32), int(tokens))
                for model, digest, vector, tokens in self._con.execute(
                    "SELECT model, text_hash, vector, input_tokens FROM ai_embeddings"
                ).fetchall()
            ]
        return responses, embeddings

    def recover(self, run_id: int) -> None:
        """Nothing to do: every iteration was written in one transaction."""

    def candidate_engine(self) -> None:
        """Candidates run in the DuckDB sandbox, not in this database."""
        return None

    def last_iteration(self, run_id: int) -> int:
        (value,) = self._fetchone(
            "SELECT COALESCE(MAX(iteration), -1) FROM programs WHERE run_id = ?", [run_id]
        )
        return int(value)

    # -- reads -----------------------------------------------------------------------------------------------
    def programs(self, run_id: int) -> list[ProgramRecord]:
        rows = self._fetchall(
            f"SELECT {_PROGRAM_COLUMNS} FROM programs WHERE run_id = ? ORDER BY iteration", [run_id]
        )
        return [_program(row) for row in rows]

    def program(self, program_id: str) -> ProgramRecord:
        rows = self._fetchall(f"SELECT {_PROGRAM_COLUMNS} FROM programs WHERE program_id = ?", [program_id])
        if not rows:
            raise StoreError(f"no program {program_id!r} in {self.path}")
        return _program(rows[0])

    def program_scores(self, run_id: int, split: str) -> dict[str, ProgramScore]:
        rows = self._fetchall(
            "SELECT program_id, split, score, n_rows, n_errors, model_calls, input_tokens, output_tokens, "
            "latency_ms FROM program_scores WHERE run_id = ? AND split = ?",
            [run_id, split],
        )
        return {
            row[0]: ProgramScore(
                row[0],
                row[1],
                float(row[2]),
                int(row[3]),
                int(row[4]),
                int(row[5]),
                int(row[6]),
                int(row[7]),
                float(row[8]),
            )
            for row in rows
        }

    def archive_entries(self, run_id: int) -> list[ArchiveEntry]:
        rows = self._fetchall(
            "SELECT iteration, seq, island, cell, program_id, reason FROM archive_entries "
            "WHERE run_id = ? ORDER BY iteration, seq",
            [run_id],
        )
        return [ArchiveEntry(int(r[0]), int(r[1]), int(r[2]), r[3], r[4], r[5]) for r in rows]

    def row_scores(
        self, run_id: int, split: str, program_id: str | None = None
    ) -> dict[str, dict[str, float]]:
        """program_id -> {instance_id: score} for every evaluation of the run on `split` (`program_id`'s only)."""
        one = "" if program_id is None else " AND program_id = ?"
        with self._lock:
            columns = self._con.execute(
                "SELECT program_id, instance_id, score FROM evaluations WHERE run_id = ? AND split = ?" + one,
                [run_id, split] + ([] if program_id is None else [program_id]),
            ).fetchnumpy()
        result: dict[str, dict[str, float]] = {}
        for program_id, instance_id, score in zip(
            columns["program_id"], columns["instance_id"], columns["score"], strict=True
        ):
            result.setdefault(str(program_id), {})[str(instance_id)] = float(score)
        return result

    def deploy_usage(self, run_id: int) -> dict[str, DeployUsage]:
        rows = self._fetchall(
            "SELECT s.program_id, s.n_rows, u.model, u.calls, u.input_tokens, u.output_tokens "
            "FROM program_scores s LEFT JOIN (SELECT program_id, model, SUM(calls) AS calls, "
            "SUM(input_tokens + cached_input_tokens) AS input_tokens, "
            "SUM(output_tokens + cached_output_tokens) AS output_tokens FROM ai_usage "
            "WHERE run_id = ? AND split = 'val' GROUP BY program_id, model) u USING (program_id) "
            "WHERE s.run_id = ? AND s.split = 'val' ORDER BY s.program_id, u.model",
            [run_id, run_id],
        )
        return deploy_usage_of(rows)

    def ledger(self, run_id: int) -> list[LedgerEntry]:
        rows = self._fetchall(
            "SELECT iteration, program_id, strategy, kind, status, parent_score, child_score, score_delta, "
            "paradigm, note FROM ledger WHERE run_id = ? ORDER BY iteration",
            [run_id],
        )
        return [LedgerEntry(*row) for row in rows]

    def events(self, run_id: int, kind: str) -> list[Event]:
        rows = self._fetchall(
            "SELECT iteration, kind, program_id, payload FROM events WHERE run_id = ? AND kind = ? "
            "ORDER BY iteration",
            [run_id, kind],
        )
        return [Event(int(r[0]), r[1], r[2], json.loads(r[3]) if r[3] else {}) for r in rows]

    def primitives(self, run_id: int) -> list[Primitive]:
        rows = self._fetchall(
            "SELECT name, language, code, signature, origin_program, created_iteration, how FROM primitives "
            "WHERE run_id = ? ORDER BY created_iteration, name",
            [run_id],
        )
        return [Primitive(r[0], r[1], r[2], r[3], r[4], int(r[5]), r[6]) for r in rows]

    def primitive_trials(self, run_id: int) -> list[PrimitiveTrial]:
        rows = self._fetchall(
            "SELECT iteration, program_id, operator, focus, parent_score, child_score, improved, verified, reason "
            "FROM primitive_trials WHERE run_id = ? ORDER BY iteration, program_id, operator",
            [run_id],
        )
        return [
            PrimitiveTrial(int(r[0]), r[1], r[2], r[3], r[4], r[5], bool(r[6]), bool(r[7]), r[8])
            for r in rows
        ]

    # -- tasks from warehouse rows ----------------------------------------------------------------------------
    def read_source(self, source: str) -> tuple[pd.DataFrame, dict[str, str]]:
        """The rows of a user's table or query (`coco_task`'s source) and its columns' DuckDB types. The source
        must be one read-only query (`store.inputs.checked_source`), and DuckDB must see one SELECT in it."""
        query = checked_source(source, "duckdb")
        try:
            with self._lock:
                statements = self._con.extract_statements(query)
                if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
                    raise StoreError(f"the source {source!r} is not one SELECT query")
                types = {row[0]: row[1] for row in self._con.execute(f"DESCRIBE {query}").fetchall()}
                rows = self._con.execute(query).df()
        except duckdb.Error as error:
            raise StoreError(f"the source {source!r} fails: {_first_line(error)}") from None
        return rows, types

    def register_task(
        self,
        name: str,
        source: str,
        options: Mapping[str, Any],
        types: Mapping[str, str],
        rows: pd.DataFrame,
        test_rows: pd.DataFrame | None = None,
    ) -> None:
        """Store a task's options and rows, its test rows after them (`store.registered`), replacing an earlier
        registration no run has used."""
        with self._lock:
            used = self._con.execute("SELECT run_id FROM runs WHERE task = ?", [name]).fetchall()
            refuse_reuse(name, [r[0] for r in used])
            self._con.execute("BEGIN TRANSACTION")
            try:
                self._con.execute("DELETE FROM tasks WHERE name = ?", [name])
                self._con.execute("DELETE FROM task_rows WHERE task = ?", [name])
                self._con.execute(
                    "INSERT INTO tasks VALUES (?, ?, ?, ?, ?, now())",
                    [name, source, to_json(options), to_json(dict(types)), len(rows)],
                )
                self._con.register("_coco_task_rows", stored_rows(rows, test_rows))
                self._con.execute(
                    "INSERT INTO task_rows SELECT ?, row_number() OVER () - 1, to_json(r) FROM _coco_task_rows r",
                    [name],
                )
                self._con.unregister("_coco_task_rows")
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def registered_task(self, name: str) -> RegisteredTask | None:
        """What `coco_task` stored under `name`, or None."""
        with self._lock:
            found = self._con.execute(
                "SELECT source, options, column_types, n_rows FROM tasks WHERE name = ?", [name]
            ).fetchone()
            if found is None:
                return None
            data = self._con.execute(
                "SELECT row_data FROM task_rows WHERE task = ? ORDER BY position", [name]
            ).fetchall()
        return RegisteredTask.from_stored(
            found[0], json.loads(found[1]), json.loads(found[2]), int(found[3]), (r[0] for r in data)
        )

    def set_progress(self, row: Mapping[str, Any]) -> None:
        columns = list(row)
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                self._con.execute("DELETE FROM coco_progress WHERE run_id = ?", [row["run_id"]])
                self._con.execute(
                    f"INSERT INTO coco_progress ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    [row[c] for c in columns],
                )
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def append_frames(self, frames: Mapping[str, pd.DataFrame]) -> None:
        """Append each frame's rows to its table, matching columns by name, in one transaction (`mirror`)."""
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                for table, frame in frames.items():
                    if len(frame):
                        self._con.register("_coco_rows", frame)
                        self._con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _coco_rows")
                        self._con.unregister("_coco_rows")
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        with self._lock:
            return self._con.execute(sql, list(params)).df()

    def history(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return decode_lists(self._named("history", HISTORY_QUERIES, name, params), LIST_COLUMNS.get(name, ()))

    def report(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._named("report", REPORT_QUERIES, name, params)

    def _named(
        self, kind: str, queries: Mapping[str, str], name: str, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        sql, bound = named_query(kind, queries, name, params)
        with self._lock:
            cursor = self._con.execute(sql, bound)
            columns = [d[0] for d in cursor.description or ()]
            rows = cursor.fetchall()
        return [{c: plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]

    # -- helpers ---------------------------------------------------------------------------------------------
    def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._con.execute(sql, list(params)).fetchall()

    def _fetchone(self, sql: str, params: Sequence[Any] = (), *, allow_none: bool = False) -> Any:
        with self._lock:
            row = self._con.execute(sql, list(params)).fetchone()
        if row is None and not allow_none:
            raise StoreError(f"query returned no row: {sql}")
        return row


def _program(row: tuple[Any, ...]) -> ProgramRecord:
    return ProgramRecord(
        program_id=row[0],
        run_id=int(row[1]),
        iteration=int(row[2]),
        parent_id=row[3],
        donor_id=row[4],
        code=row[5],
        language=row[6],
        dialect=row[7],
        island=int(row[8]),
        cell=row[9],
        approach=row[10],
        strategy=row[11],
        valid=bool(row[12]),
        error=row[13],
    )


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
