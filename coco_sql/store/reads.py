"""Every read of a store, written once (`StoreReads`): the typed reads of `base.RunReader`, the named history and
report queries, the AI cache and registered tasks, over the one query an engine runs (`execute`).

An engine (`engines.duckdb.store`, `engines.snowflake.store`) supplies `execute`: one of coco-sql's own read-only
queries, written in DuckDB with `$name` parameters (`reads_sql`, `history_sql`, `report_sql`), run as written or
as its engine's translation, its rows as plain Python values (`values.python_value`: what DuckDB gives, whatever
engine ran it). Records are built here, so both engines return the same records from the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from coco_sql.errors import StoreError
from coco_sql.llm.cache import CachedEmbedding, CachedResponse
from coco_sql.store.base import QueryRows
from coco_sql.store.history_sql import LIST_COLUMNS
from coco_sql.store.history_sql import QUERIES as HISTORY_QUERIES
from coco_sql.store.inputs import check_run_id
from coco_sql.store.named import decode_lists, named_query
from coco_sql.store.reads_sql import QUERIES as READS
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
)
from coco_sql.store.registered import RegisteredTask
from coco_sql.store.report_sql import QUERIES as REPORT_QUERIES
from coco_sql.store.values import plain


class StoreReads:
    """The reads every store shares (`base.RunReader`, `base.NamedQueries` and `TaskRegistry.registered_task`).
    A subclass supplies `execute` and `path` (where the store is, for messages)."""

    path: str

    def execute(self, sql: str, params: Mapping[str, Any]) -> QueryRows:
        """The rows of one read-only query of coco-sql's own, written in DuckDB with `$name` parameters (exactly
        those it mentions), each value as `values.python_value` gives it."""
        raise NotImplementedError

    # -- runs ------------------------------------------------------------------------------------------------
    def get_run(self, run_id: int) -> RunRecord:
        check_run_id(run_id, self.path)
        rows = self._read("run", run_id=run_id)
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

    def latest_run_id(self, task: str | None = None) -> int | None:
        rows = self._read("latest_run") if task is None else self._read("latest_run_of_task", task=task)
        value = rows[0]["run_id"] if rows else None
        return None if value is None else int(value)

    def last_iteration(self, run_id: int) -> int:
        value = self._read("last_iteration", run_id=run_id)[0]["iteration"]
        return -1 if value is None else int(value)

    # -- a run's rows ----------------------------------------------------------------------------------------
    def programs(self, run_id: int) -> list[ProgramRecord]:
        return [_program(r) for r in self._read("programs", run_id=run_id)]

    def program(self, program_id: str) -> ProgramRecord:
        rows = self._read("program", program_id=program_id)
        if not rows:
            raise StoreError(f"no program {program_id!r} in {self.path}")
        return _program(rows[0])

    def program_scores(self, run_id: int, split: str) -> dict[str, ProgramScore]:
        return {
            r["program_id"]: ProgramScore(
                r["program_id"],
                r["split"],
                float(r["score"]),
                int(r["n_rows"]),
                int(r["n_errors"]),
                int(r["model_calls"]),
                int(r["input_tokens"]),
                int(r["output_tokens"]),
                float(r["latency_ms"]),
                int(r["cache_hits"]),
            )
            for r in self._read("program_scores", run_id=run_id, split=split)
        }

    def row_scores(
        self, run_id: int, split: str, program_id: str | None = None
    ) -> dict[str, dict[str, float]]:
        if program_id is None:
            found = self._rows("row_scores", {"run_id": run_id, "split": split})
        else:
            found = self._rows(
                "program_row_scores", {"run_id": run_id, "split": split, "program_id": program_id}
            )
        result: dict[str, dict[str, float]] = {}
        for pid, instance_id, score in found.rows:
            result.setdefault(str(pid), {})[str(instance_id)] = float(score)
        return result

    def archive_entries(self, run_id: int) -> list[ArchiveEntry]:
        return [
            ArchiveEntry(
                int(r["iteration"]), int(r["seq"]), int(r["island"]), r["cell"], r["program_id"], r["reason"]
            )
            for r in self._read("archive_entries", run_id=run_id)
        ]

    def ledger(self, run_id: int) -> list[LedgerEntry]:
        return [LedgerEntry(*row) for row in self._rows("ledger", {"run_id": run_id}).rows]

    def events(self, run_id: int, kind: str) -> list[Event]:
        return [
            Event(int(r["iteration"]), r["kind"], r["program_id"], _json(r["payload"]) or {})
            for r in self._read("events", run_id=run_id, kind=kind)
        ]

    def primitives(self, run_id: int) -> list[Primitive]:
        return [
            Primitive(
                r["name"],
                r["language"],
                r["code"],
                r["signature"],
                r["origin_program"],
                int(r["created_iteration"]),
                r["how"],
            )
            for r in self._read("primitives", run_id=run_id)
        ]

    def primitive_trials(self, run_id: int) -> list[PrimitiveTrial]:
        return [
            PrimitiveTrial(
                int(r["iteration"]),
                r["program_id"],
                r["operator"],
                r["focus"],
                r["parent_score"],
                r["child_score"],
                bool(r["improved"]),
                bool(r["verified"]),
                r["reason"],
            )
            for r in self._read("primitive_trials", run_id=run_id)
        ]

    def deploy_usage(self, run_id: int) -> dict[str, DeployUsage]:
        return deploy_usage_of(self._rows("deploy_usage", {"run_id": run_id}).rows)

    # -- named queries, the shared AI cache --------------------------------------------------------------------
    def history(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        sql, bound = named_query("history", HISTORY_QUERIES, name, params)
        return decode_lists(_plain_dicts(self.execute(sql, bound)), LIST_COLUMNS.get(name, ()))

    def report(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        sql, bound = named_query("report", REPORT_QUERIES, name, params)
        return _plain_dicts(self.execute(sql, bound))

    def ai_cache_entries(self) -> tuple[list[CachedResponse], list[CachedEmbedding]]:
        responses = [
            CachedResponse(key, function, model, response, int(tokens_in), int(tokens_out), float(latency))
            for key, function, model, response, tokens_in, tokens_out, latency in self._rows(
                "ai_cache", {}
            ).rows
        ]
        embeddings = [
            CachedEmbedding(model, digest, np.asarray(_json(vector), dtype=np.float32), int(tokens))
            for model, digest, vector, tokens in self._rows("ai_embeddings", {}).rows
        ]
        return responses, embeddings

    # -- registered tasks ------------------------------------------------------------------------------------
    def registered_task(self, name: str) -> RegisteredTask | None:
        found = self._read("task", name=name)
        if not found:
            return None
        data = self._rows("task_rows", {"name": name}).rows
        task = found[0]
        return RegisteredTask.from_stored(
            task["source"],
            _json(task["options"]),
            _json(task["column_types"]),
            int(task["n_rows"]),
            (_json(row_data) for (row_data,) in data),
        )

    def task_runs(self, name: str) -> list[int]:
        """The runs that used task `name` (a registration must not replace their rows: `registered`)."""
        return [int(run_id) for (run_id,) in self._rows("runs_of_task", {"task": name}).rows]

    # -- helpers ---------------------------------------------------------------------------------------------
    def _rows(self, query: str, params: Mapping[str, Any]) -> QueryRows:
        sql, bound = named_query("store", READS, query, params)
        return self.execute(sql, bound)

    def _read(self, query: str, **params: Any) -> list[dict[str, Any]]:
        found = self._rows(query, params)
        return [dict(zip(found.columns, row, strict=True)) for row in found.rows]


def _plain_dicts(found: QueryRows) -> list[dict[str, Any]]:
    return [{c: plain(v) for c, v in zip(found.columns, row, strict=True)} for row in found.rows]


def _json(value: Any) -> Any:
    """A JSON column read back: text from either engine (a VARIANT, an ARRAY), or already a value (a list)."""
    return json.loads(value) if isinstance(value, str) else value


def _program(r: Mapping[str, Any]) -> ProgramRecord:
    return ProgramRecord(
        program_id=r["program_id"],
        run_id=int(r["run_id"]),
        iteration=int(r["iteration"]),
        parent_id=r["parent_id"],
        donor_id=r["donor_id"],
        code=r["code"],
        language=r["language"],
        dialect=r["dialect"],
        island=int(r["island"]),
        cell=r["cell"],
        approach=r["approach"],
        strategy=r["strategy"],
        valid=bool(r["valid"]),
        error=r["error"],
    )
