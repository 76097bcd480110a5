"""Pull a run from Snowflake down into a DuckDB file, for local inspection with every coco-sql tool.

    coco-sql mirror --from snowflake --connection NAME --run ID --db local.duckdb

Copies the run's rows of every per-run table (runs, programs, evaluations, program_scores, archive_entries,
ledger, events, ai_usage, ai_calls, agent_turns) and, for a task registered from warehouse rows, its `tasks` and
`task_rows` rows, so that `coco-sql resume` can continue the run locally. The shared AI cache stays in Snowflake (it is not
part of a run). The copy is one DuckDB transaction: all of the run or none of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.engines.snowflake.store import SnowparkStore
from coco_sql.errors import StoreError
from coco_sql.progress import Progress

RUN_TABLES = ("runs", "programs", "evaluations", "program_scores", "archive_entries", "ledger", "events",
              "ai_usage", "ai_calls", "agent_turns", "primitives", "primitive_trials")  # fmt: skip


@dataclass(frozen=True)
class Mirrored:
    run_id: int
    task: str
    rows: dict[str, int]  # table -> rows copied


def mirror_run(
    source: SnowparkStore, target: DuckDBStore, run_id: int, progress: Progress | None = None
) -> Mirrored:
    """Copy run `run_id` of `source` into `target`; StoreError when `target` already holds a run of that id.
    `progress` is told each table read from Snowflake."""
    run = source.get_run(run_id)
    if target.latest_run_id() is not None and _has_run(target, run_id):
        raise StoreError(f"run {run_id} is already in {target.path}; mirror it into another database")
    reads = [(table, {"run_id": run_id}) for table in RUN_TABLES]
    if target.registered_task(run.task) is None:
        reads += [("tasks", {"name": run.task}), ("task_rows", {"task": run.task})]
    frames = {}
    for done, (table, where) in enumerate(reads, 1):
        frames[table] = source.table_frame(table, **where)
        if progress is not None:
            progress("mirror (tables read)", done, len(reads))
    target.append_frames(frames)
    return Mirrored(run_id, run.task, {table: len(frame) for table, frame in frames.items()})


def _has_run(store: DuckDBStore, run_id: int) -> bool:
    try:
        store.get_run(run_id)
    except StoreError:
        return False
    return True
