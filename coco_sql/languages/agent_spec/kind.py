"""The data-agent kind as a plug-in (`languages.base.KindPlugin`): what `coco_sql.plugins` resolves
`agent_spec` to.

A task's `[agent_spec]` table (model, limits, tables, documents: `settings`) configures the runs; one evaluation
runs the spec on every question row through the AI runtime and keeps each row's trace as its observation
(`language`); the offline operators spread what the history and the documents hold (`mutator`, `ops`); the
`cortex_agent` form is the `CREATE AGENT ... FROM SPECIFICATION` script (`export_form`). Everything loads when a
data-agent task is used, never when the registry is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from coco_sql.languages.base import Exported, ExportRequest, Language
from coco_sql.languages.kind import KindPlugin, OfflineSettings

if TYPE_CHECKING:
    from coco_sql.mutate.base import Mutator
    from coco_sql.store.base import CandidateEngine
    from coco_sql.tasks import TaskPack

FORMS = frozenset({"cortex_agent"})


def _bind(task: TaskPack, engine: CandidateEngine | None = None) -> Language:
    from coco_sql.languages.agent_spec.language import AgentSpecLanguage

    # without an engine the tools run in coco-sql's sandboxes; with one, as its queries (`warehouse`)
    return AgentSpecLanguage(task, engine)


def _offline(settings: OfflineSettings | None = None) -> Mutator:
    from coco_sql.languages.agent_spec.mutator import AgentSpecOfflineMutator

    return AgentSpecOfflineMutator(settings or OfflineSettings())


def _prompt(task: TaskPack) -> str:
    return (
        "A program is a data agent's specification (YAML): instructions, tools (named read-only SQL over the "
        "task's tables), a semantic model and documents; each question's answer is scored DABStep's way.\n"
    )


class AgentSpecExports:
    """The `cortex_agent` form; the script is checked against the documented fields when it is made."""

    forms = FORMS

    def export(self, request: ExportRequest) -> Exported:
        from coco_sql.languages.agent_spec.export_form import export_text

        return Exported(export_text(request.code, request.form, request.task()))

    def deploy_checked(self, form: str, dialect: str) -> bool:
        return False

    def check_deploy(self, code: str, dialect: str, task: TaskPack | None, where: str) -> list[Any]:
        return []


class AgentSpecFolder:
    """`coco-sql export --form cortex_agent --out DIR` writes the script as DIR/create_agent.sql."""

    forms = FORMS

    def write(self, text: str, folder: Path) -> list[str]:
        from coco_sql.languages.agent_spec.export_form import write_export

        return write_export(text, folder)


PLUGIN = KindPlugin(
    name="agent_spec",
    bind=_bind,
    program_prompt=_prompt,
    offline_mutator=_offline,
    uses_ai=lambda task: True,  # every run of a spec calls its model (`language.runner` needs the runtime)
    exports=AgentSpecExports(),
    folder_export=AgentSpecFolder(),
    row_traces=True,
)
