"""What every warehouse store shares: the `Warehouse` protocol, the records, the committer, the named history and
report queries and the SQL both engines mean the same way (the stores themselves are engines:
`engines.duckdb.store`, `engines.snowflake.store`). Exports load on first use (`coco_sql.lazy`)."""

from coco_sql.lazy import lazy_exports

_WHERE = {
    "Warehouse": ".base",
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
