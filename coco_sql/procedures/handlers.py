"""The procedures, engine-neutral: each takes an open store and the SQL call's arguments and returns its rows as
dicts, with the columns `COLUMNS` declares. Thin over `coco_sql.api`; errors are its one-line `CocoError`s.

    coco_task(name, source, options)     register a task over a table or query's rows (tasks.from_rows)
    coco_evolve(task, budget, options)   a new run; options: RunConfig keys plus classify_model, completion_model
                                         (`coco_sql.options`: RUN_OPTIONS and AI_OPTIONS, their types and ranges)
    coco_resume(run_id, budget)          continue a run (to a larger budget)
    coco_status(run_id)                  one row per run (or the one run)
    coco_export(run_id, form, max_cost, source)  the champion (or the best program within a deploy cost per
                                         1,000 rows): sql (as written), duckdb_view, snowflake_view or dbt,
                                         reading `source`; a form that runs in Snowflake also lists why it
                                         would not (`findings`)
    coco_eval(task, program, split)      score one program on one split
    coco_report(run_id)                  the run's report (the latest run's by default): one HTML document
    coco_help(topic)                     the procedures; one procedure's arguments and options (`help`)

`coco_evolve` and `coco_resume` report their progress in the table `coco_progress` (`procedures.progress`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from coco_sql import api
from coco_sql.llm import AiConfig
from coco_sql.options import AI_OPTIONS, RUN_OPTIONS, as_object
from coco_sql.procedures.help import COLUMNS as HELP_COLUMNS
from coco_sql.procedures.progress import ProgressBoard
from coco_sql.store import Warehouse

SUMMARY = (
    ("run_id", "BIGINT"),
    ("task", "VARCHAR"),
    ("iterations", "BIGINT"),
    ("champion_id", "VARCHAR"),
    ("seed_val_score", "DOUBLE"),
    ("champion_val_score", "DOUBLE"),
    ("seed_test_score", "DOUBLE"),
    ("champion_test_score", "DOUBLE"),
    ("best_id", "VARCHAR"),  # the best validation score's program: the champion is the cheapest within one SE
    ("best_val_score", "DOUBLE"),
    ("stopped", "VARCHAR"),  # why the run paused before its end (its max_spend), else NULL
    ("warnings", "VARCHAR"),  # api.champion_warnings, one per line, else NULL
)
COLUMNS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "coco_task": (
        ("task", "VARCHAR"),
        ("rows", "BIGINT"),
        ("train", "BIGINT"),
        ("val", "BIGINT"),
        ("test", "BIGINT"),
    ),
    "coco_evolve": SUMMARY,
    "coco_resume": SUMMARY,
    "coco_status": (
        ("run_id", "BIGINT"),
        ("task", "VARCHAR"),
        ("seed", "BIGINT"),
        ("budget", "BIGINT"),
        ("status", "VARCHAR"),
        ("iterations", "BIGINT"),
        ("best_val", "DOUBLE"),
        ("best_id", "VARCHAR"),
        ("champion_id", "VARCHAR"),  # the cheapest program within one SE of the best (option `champion`)
        ("champion_val", "DOUBLE"),
    ),
    "coco_export": (
        ("run_id", "BIGINT"),
        ("program_id", "VARCHAR"),
        ("val_score", "DOUBLE"),
        ("form", "VARCHAR"),
        ("code", "VARCHAR"),
        (
            "findings",
            "VARCHAR",
        ),  # why it would not run in Snowflake, one per line; NULL when none or not Snowflake
    ),
    "coco_eval": (
        ("task", "VARCHAR"),
        ("split", "VARCHAR"),
        ("score", "DOUBLE"),
        ("rows", "BIGINT"),
        ("failing_rows", "BIGINT"),
        ("error", "VARCHAR"),
    ),
    "coco_report": (
        ("run_id", "BIGINT"),
        ("html", "VARCHAR"),
    ),
    "coco_help": HELP_COLUMNS,
}


def coco_task(store: Warehouse, name: str, source: str, options: Mapping[str, Any] | None) -> list[dict]:
    """Name, source and options are checked before anything runs or is written (`api.register_task`)."""
    return [api.register_task(name, source, options, db=store)]


def coco_evolve(
    store: Warehouse,
    task: str,
    budget: int | None,
    options: Mapping[str, Any] | None,
    *,
    ai: AiConfig | None = None,
) -> list[dict]:
    """`ai` is the engine's base model configuration (Snowflake: Cortex through the procedure's session). The
    run reports its progress in `coco_progress` and on stderr (`procedures.progress`)."""
    run_options, ai = split_options(options, ai)
    budget = RUN_OPTIONS.default("budget") if budget is None else budget
    board = ProgressBoard(store, store.next_run_id(), str(task), budget)
    return _reported(board, partial(api.evolve, task, db=store, budget=budget, options=run_options), ai)


def coco_resume(
    store: Warehouse,
    run_id: int,
    budget: int | None,
    max_spend: str | None = None,
    *,
    ai: AiConfig | None = None,
) -> list[dict]:
    """Continue run `run_id`, to a larger `budget` and under a new spend limit ('200000 tokens', '$5') if given;
    its progress as `coco_evolve`'s."""
    run = store.get_run(api.resolve_run(store, run_id))
    board = ProgressBoard(store, run.run_id, run.task, budget if budget is not None else run.budget)
    return _reported(board, partial(api.resume, run.run_id, db=store, budget=budget, max_spend=max_spend), ai)


def _reported(board: ProgressBoard, run: Callable[..., Any], ai: AiConfig | None) -> list[dict]:
    """`run(ai=..., progress=...)` (api.evolve or api.resume) with its progress on `board`: each iteration, each
    step of a cold embedding, and how it ended; its summary row, with the champion's warnings (a cheaper program
    as good, a champion over 8 KB: `api.champion_warnings`, what `coco-sql evolve` prints after a run)."""
    ai = replace(ai or AiConfig.from_environment(), progress=board.long_operation)
    try:
        summary = run(ai=ai, progress=board.iteration)
    except BaseException as error:
        board.failed(error)
        raise
    board.finished(summary)
    warnings = api.champion_warnings(summary.run_id, db=board.store)
    return [{**summary.as_dict(), "warnings": "\n".join(warnings) or None}]


def coco_status(store: Warehouse, run_id: int | None) -> list[dict]:
    rows = api.status(db=store)
    if run_id is not None:
        api.resolve_run(store, run_id)
        rows = [row for row in rows if row["run_id"] == run_id]
    return rows


def coco_export(
    store: Warehouse,
    run_id: int | None,
    form: str | None,
    max_cost: str | None = None,
    source: str | None = None,
) -> list[dict]:
    """The champion in `form`, reading the table `source` (default: the table the task was registered from);
    with `max_cost` ('500 calls', '20000 tokens', '$0.05'), the best program whose deploy cost per 1,000 rows is
    within it. Its `findings` are check-deploy's, on the program as the run holds it."""
    form = form or "sql"
    champion = api.export(run_id, db=store, form=form, max_cost=max_cost, source=source)
    findings = api.export_findings(champion, form, db=store)
    return [
        {
            "run_id": champion.run_id,
            "program_id": champion.program_id,
            "val_score": champion.val_score,
            "form": form,
            "code": champion.code,
            "findings": "\n".join(f.line() for f in findings) or None,
            "files": dict(champion.files),  # not a column: what ships with the code (Snowflake stages it)
        }
    ]


def coco_eval(store: Warehouse, task: str, program: str, split: str | None) -> list[dict]:
    return [api.evaluate(task, program, split or "val", db=store).as_dict()]


def coco_report(store: Warehouse, run_id: int | None) -> list[dict]:
    report = api.report(run_id, db=store)
    return [{"run_id": report.run_id, "html": report.html}]


def split_options(
    options: Mapping[str, Any] | None, base: AiConfig | None = None
) -> tuple[dict[str, Any], AiConfig | None]:
    """RunConfig keys apart from the AI model choices (which configure the AI functions, not the run), the
    choices applied over `base`. The options must be an object, and the model choices text."""
    options = as_object(options, "coco_evolve's options")
    run_options = {k: v for k, v in options.items() if k not in AI_OPTIONS.names}
    chosen = AI_OPTIONS.check({k: v for k, v in options.items() if k in AI_OPTIONS.names})
    models = {k: v for k, v in chosen.items() if v is not None}
    if not models:
        return run_options, base
    return run_options, (replace(base, **models) if base is not None else AiConfig.from_environment(**models))


def plain_value(value: Any) -> Any:
    """Numpy and Decimal scalars as Python numbers: DuckDB's struct conversion and Snowpark's rows take plain
    values only."""
    if hasattr(value, "item"):
        return value.item()
    if value is not None and type(value).__name__ == "Decimal":
        return float(value)
    return value
