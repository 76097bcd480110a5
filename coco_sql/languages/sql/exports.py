"""The SQL kind's export forms and deploy check, behind `languages.base.Exporter` (what `api.export`,
`api.export_findings` and the report ask of a kind).

The forms are `languages.sql.export.forms`'s; a DuckDB form of a program that calls AI functions exports the query the
run evaluated (`export.ai`); a program that reads the training rows as `examples` ships them
(`export.references`), from the run's task pack, which must be the pack the run evolved on; a form that runs
in Snowflake says so at its top when the program's learned proxy was fitted on another embedding model than
Cortex's (`export.forms.proxy_note`). The deploy check is the deploy engine's (`plugins.deploy_engine`,
`engines/snowflake/deploy_check.py`): why a program would not run in
Snowflake.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from coco_sql.errors import TaskError
from coco_sql.languages.base import Exported, ExportRequest
from coco_sql.languages.sql.export.ai import DUCKDB_FORMS, bound_program
from coco_sql.languages.sql.export.ai_function import (
    EXPERIMENT_FORM,
    ai_function_export,
    check_statement,
    experiment_export,
    is_statement,
)
from coco_sql.languages.sql.export.ai_function import FORM as AI_FUNCTION
from coco_sql.languages.sql.export.forms import FORMS, OTHER_FORMS, export_bundle, proxy_note
from coco_sql.languages.sql.export.references import reads_table
from coco_sql.languages.sql.linear_head import (
    EXAMPLE_VECTORS,
    LINEAR_HEAD,
    head_columns,
    reference_rows,
    runtime_embed,
)
from coco_sql.plugins import deploy_engine
from coco_sql.tasks.references import EXAMPLES, reference_columns, reference_tables

if TYPE_CHECKING:
    import pandas as pd

    from coco_sql.engines import Finding
    from coco_sql.tasks import TaskPack

SNOWFLAKE_FORMS = frozenset({"snowflake_view", "snowflake_function", "dbt", AI_FUNCTION, EXPERIMENT_FORM})
"""Export forms that run in Snowflake: each export in one of them is checked (`check_deploy`)."""


class SqlExports:
    """`Exporter` for SQL programs."""

    forms = frozenset(FORMS + OTHER_FORMS) - {"sql"}

    def export(self, request: ExportRequest) -> Exported:
        form, code, dialect = request.form, request.code, request.dialect
        if form == AI_FUNCTION:  # its signature is the task's: the pack must be there
            return Exported(ai_function_export(code, dialect, request.task(), request.name))
        if form == EXPERIMENT_FORM:
            return Exported(experiment_export(code, dialect, request.task(), request.name))
        columns: dict[str, str] | None = None
        source_types: dict[str, str] | None = None
        source_columns: dict[str, str] | None = None
        with contextlib.suppress(TaskError):  # the user's names for input's columns (`export.forms`)
            task = request.task()
            source_columns = {"id": task.id_column, **{c: c for c in task.input_columns}}
        if form == "snowflake_function":
            with contextlib.suppress(TaskError):
                pack = request.task()
                columns = {pack.contract.output: pack.contract.type}
                # the source's own column types: a registered task's table, else the pack's columns
                source_types = (
                    dict(request.source_types)
                    if request.source_types is not None
                    else {"id": "VARCHAR", **pack.input_columns}
                )
        references = _references(request)
        bound = None
        if form in DUCKDB_FORMS:  # AI calls as the sandbox ran them
            with contextlib.suppress(TaskError):
                bound = bound_program(code, dialect, form, request.task())
        written, written_dialect, header = bound or (code, dialect, "")
        exported = export_bundle(
            written,
            written_dialect,
            form,
            name=request.name,
            source=request.source,
            columns=columns,
            references=references,
            source_types=source_types,
            note=proxy_note(code, dialect, request.aliases) if form in SNOWFLAKE_FORMS else None,
            source_columns=source_columns,
        )
        return Exported(header + exported.code, exported.files)

    def deploy_checked(self, form: str, dialect: str) -> bool:
        """A form that runs in Snowflake, or the program as written in Snowflake's dialect."""
        return form in SNOWFLAKE_FORMS or (form == "sql" and dialect == deploy_engine().dialect)

    def check_deploy(self, code: str, dialect: str, task: TaskPack | None, where: str) -> list[Finding]:
        target = deploy_engine()
        if is_statement(code):  # an exported AI function (`export.ai_function`): its body over its arguments
            return check_statement(
                code,
                where,
                lambda query, columns: target.check_deploy(
                    query, target.dialect, where=where, input_columns=columns, output_column="answer",
                    allowed_functions=frozenset(task.allowed_functions) if task is not None else frozenset(),
                ),
            )  # fmt: skip
        if task is None:  # the task is gone: functions, names and types are still checked
            return target.check_deploy(code, dialect, where=where)
        return target.check_deploy(
            code,
            dialect,
            where=where,
            input_columns=dict(task.input_columns),
            output_column=task.contract.output,
            allowed_functions=frozenset(task.allowed_functions),
            references={**reference_columns(task), **head_columns(task)},
        )


def _references(request: ExportRequest) -> dict[str, tuple[pd.DataFrame, dict[str, str]]]:
    """The task's reference tables (`tasks.references`, the learned linear head's `linear_head` and the training
    rows' vectors `example_vectors`), with
    their rows, when the exported program reads one: the export creates them next to it. The head's weights are
    fitted again from the pack's training rows on the embedding model the run used (the embedded one: the fit
    is deterministic, so they are the weights the run read). A one-line TaskError when the pack is gone or is
    not the run's."""
    wanted = [
        t for t in (EXAMPLES, LINEAR_HEAD, EXAMPLE_VECTORS) if reads_table(request.code, request.dialect, t)
    ]
    if not wanted:
        return {}
    pack = request.task()
    if pack.fingerprint() != request.fingerprint:
        raise TaskError(
            f"task pack {pack.name!r} at {pack.root} is not the one run {request.run_id} evolved on (its files "
            "differ), and the program reads its training rows as `examples`: pass that pack's directory as the task"
        )
    tables, columns = dict(reference_tables(pack)), {**reference_columns(pack), **head_columns(pack)}
    if LINEAR_HEAD in wanted or EXAMPLE_VECTORS in wanted:
        from coco_sql.llm.routing import AiConfig
        from coco_sql.llm.runtime import AiRuntime

        runtime = AiRuntime(AiConfig.from_environment())
        try:
            fitted = reference_rows(pack, runtime_embed(runtime, pack.dialect))
        finally:
            runtime.close()
        tables.update({name: rows for name, rows in fitted.items() if name in wanted})
    return {name: (rows, columns[name]) for name, rows in tables.items() if name in columns}
