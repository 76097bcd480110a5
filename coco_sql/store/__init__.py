"""Warehouse stores: the tables are the source of truth for every run. Exports load on first use
(`coco_sql.lazy`): a module that needs only the records does not load DuckDB's store."""

from coco_sql.lazy import lazy_exports

_WHERE = {
    "Warehouse": ".base",
    "DuckDBStore": ".duckdb_store",
    "AgentTurn": ".records",
    "ArchiveEntry": ".records",
    "EvaluationRow": ".records",
    "Event": ".records",
    "IterationBatch": ".records",
    "LedgerEntry": ".records",
    "ProgramRecord": ".records",
    "ProgramScore": ".records",
    "RunRecord": ".records",
    "SplitEvaluation": ".records",
    "program_id_for": ".records",
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
