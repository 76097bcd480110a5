"""Warehouse stores: the tables are the source of truth for every run."""

from coco_sql.store.base import Warehouse
from coco_sql.store.duckdb_store import DuckDBStore
from coco_sql.store.records import (
    AgentTurn,
    ArchiveEntry,
    EvaluationRow,
    Event,
    IterationBatch,
    LedgerEntry,
    ProgramRecord,
    ProgramScore,
    RunRecord,
    SplitEvaluation,
    program_id_for,
)

__all__ = [
    "AgentTurn",
    "ArchiveEntry",
    "DuckDBStore",
    "EvaluationRow",
    "Event",
    "IterationBatch",
    "LedgerEntry",
    "ProgramRecord",
    "ProgramScore",
    "RunRecord",
    "SplitEvaluation",
    "Warehouse",
    "program_id_for",
]
