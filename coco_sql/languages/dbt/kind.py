"""The dbt kind as a plug-in (`languages.base.KindPlugin`): what `coco_sql.plugins` resolves `dbt` to.

(`plugin.py` in this package is dbt-duckdb's plugin, which dbt itself imports inside the sandbox.) A dbt pack's
task.toml has tables of its own (sources, targets, expected rows: `pack.load_dbt_pack`), its offline operators
repair models from the mismatching training rows (`mutator`), and its export form `dbt_project` is a folder that
plain `dbt build` runs (`export`). The coding agent is told the project's layout, sources and targets
(`prompt`), may edit one file at a time (`file_marker`), and its draft tests show which target, key and column
mismatch (`draft_view`). Everything loads when a dbt task is used, never when the registry is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from coco_sql.languages.base import Exported, ExportRequest, Language, ProgramParts
from coco_sql.languages.dbt.options import TASK_OPTIONS
from coco_sql.languages.kind import KindPlugin, OfflineSettings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from coco_sql.mutate.base import Mutator
    from coco_sql.store.base import CandidateEngine, Warehouse
    from coco_sql.store.registered import RegisteredTask
    from coco_sql.tasks import TaskPack


def _bind(task: TaskPack, engine: CandidateEngine | None = None) -> Language:
    """The dbt sandbox locally; on a warehouse that runs candidates itself, each model compiled by our renderer
    and run as its query (`warehouse`: a stored procedure may not start dbt's process)."""
    if engine is not None:
        from coco_sql.languages.dbt.warehouse import DbtWarehouseLanguage

        return DbtWarehouseLanguage(task, engine)
    from coco_sql.languages.dbt.language import DbtLanguage

    return DbtLanguage(task)


def _offline(settings: OfflineSettings | None = None) -> Mutator:
    from coco_sql.languages.dbt.mutator import DbtOfflineMutator

    return DbtOfflineMutator(settings or OfflineSettings())


def _prompt(task: TaskPack) -> str:
    from coco_sql.languages.dbt.prompt import program_prompt

    return program_prompt(task)


def _draft_view(task: TaskPack, rows: Any, limit: int, chosen: Any) -> dict[str, Any]:
    from coco_sql.languages.dbt.draft_view import draft_view

    return draft_view(task, rows, limit, chosen)


def _uses_ai(task: TaskPack) -> bool:
    from coco_sql.languages.dbt.validate import enables_ai

    return enables_ai(task.allowed_functions)


def _load(root: Path, reader: Any, doc: Any, fingerprint: Any) -> TaskPack:
    from coco_sql.languages.dbt.pack import load_dbt_pack

    return load_dbt_pack(root, reader, doc, fingerprint)


class DbtRegistrar:
    """`CALL coco_task(name, NULL, {'kind': 'dbt', ...})`: a dbt task over the user's own tables (`registered`)."""

    def check(self, name: object, source: object, options: object) -> Mapping[str, Any]:
        from coco_sql.languages.dbt.registered import check

        return check(name, source, options)

    def queries(self, checked: Mapping[str, Any]) -> list[str]:
        from coco_sql.languages.dbt.registered import queries

        return queries(checked)

    def register(self, name: str, checked: Mapping[str, Any], store: Warehouse) -> dict[str, Any]:
        from coco_sql.languages.dbt.registered import register

        return register(name, checked, store)

    def load(self, name: str, registered: RegisteredTask) -> TaskPack:
        from coco_sql.languages.dbt.registered import load

        return load(name, registered.options, registered.rows)  # type: ignore[no-any-return]


class DbtExports:
    """The `dbt_project` form (the project's files, a profile and the sources as CSV), the `dbt_patch` form (a
    unified diff against the user's project folder: `patch`), and check-deploy per model (`deploy_check`): each
    model rendered and checked as a Snowflake SQL program."""

    forms = frozenset({"dbt_project", "dbt_patch"})

    def export(self, request: ExportRequest) -> Exported:
        from coco_sql.languages.dbt.export import export_text

        return Exported(export_text(request.code, request.form, request.task()))

    def deploy_checked(self, form: str, dialect: str) -> bool:
        from coco_sql.plugins import deploy_engine

        return (
            form == "sql" and dialect == deploy_engine().dialect
        )  # a project in the deploy engine's dialect

    def check_deploy(self, code: str, dialect: str, task: TaskPack | None, where: str) -> list[Any]:
        from coco_sql.languages.dbt.deploy_check import deploy_findings

        return deploy_findings(code, task, where, dialect)


class DbtFolder:
    """`coco-sql export --form dbt_project --out DIR` writes the project folder; `--form dbt_patch --out FILE`
    the patch."""

    forms = frozenset({"dbt_project", "dbt_patch"})

    def write(self, text: str, folder: Path) -> list[str]:
        from coco_sql.languages.dbt.export import write_export

        return write_export(text, folder)


def _parts(code: str) -> ProgramParts | None:
    from coco_sql.languages.dbt.report_parts import program_parts

    return program_parts(code)


PLUGIN = KindPlugin(
    name="dbt",
    bind=_bind,
    program_prompt=_prompt,
    offline_mutator=_offline,
    exports=DbtExports(),
    pack_loader=_load,
    uses_ai=_uses_ai,
    task_options=TASK_OPTIONS,
    registrar=DbtRegistrar(),
    folder_export=DbtFolder(),
    parts=_parts,
    file_marker="-- file: ",  # project.MARKER: edit_candidate may scope a search to one file
    draft_view=_draft_view,
)
