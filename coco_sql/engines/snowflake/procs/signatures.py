"""The stored procedures' signatures: the same names and arguments as the DuckDB procedures, for
`CREATE PROCEDURE` (`deploy`) and for `session.sproc.register` (local testing). No Snowpark import here, so that
`coco-sql deploy --print` works without it."""

from __future__ import annotations

from dataclasses import dataclass

from coco_sql.procedures import handlers as neutral

_HANDLERS = "coco_sql.engines.snowflake.procs.handlers"


@dataclass(frozen=True)
class Procedure:
    """One stored procedure: its arguments as (name, Snowflake type, default SQL or None when required), the
    columns of the table it returns (`procedures.handlers.COLUMNS`) and its handler's import path."""

    name: str
    arguments: tuple[tuple[str, str, str | None], ...]

    @property
    def handler(self) -> str:
        return f"{_HANDLERS}.{self.name}"

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        return neutral.COLUMNS[self.name]


PROCEDURES: dict[str, Procedure] = {
    p.name: p
    for p in (
        Procedure("coco_task", (("name", "VARCHAR", None), ("source", "VARCHAR", None), ("options", "VARIANT", "NULL"))),
        Procedure("coco_evolve", (("task", "VARCHAR", None), ("budget", "NUMBER", "60"), ("options", "VARIANT", "NULL"))),
        Procedure(
            "coco_resume",
            (("run_id", "NUMBER", None), ("budget", "NUMBER", "NULL"), ("max_spend", "VARCHAR", "NULL")),
        ),
        Procedure("coco_status", (("run_id", "NUMBER", "NULL"),)),
        Procedure(
            "coco_export",
            (("run_id", "NUMBER", "NULL"), ("form", "VARCHAR", "'sql'"), ("max_cost", "VARCHAR", "NULL"),
             ("source", "VARCHAR", "NULL")),
        ),
        Procedure("coco_eval", (("task", "VARCHAR", None), ("program", "VARCHAR", None), ("split", "VARCHAR", "'val'"))),
        Procedure("coco_report", (("run_id", "NUMBER", "NULL"),)),
        Procedure("coco_help", (("topic", "VARCHAR", "NULL"),)),
    )
}  # fmt: skip
