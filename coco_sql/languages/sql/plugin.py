"""The SQL kind as a plug-in (`languages.base.KindPlugin`): what `coco_sql.plugins` resolves `sql` to.

The heavy parts (the offline mutator, cross-fit) are imported when they are first used, so that binding a SQL
task does not load scipy's MILP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coco_sql.languages.base import Language
from coco_sql.languages.kind import KindPlugin, OfflineSettings
from coco_sql.languages.sql.exports import SqlExports
from coco_sql.languages.sql.highlight import SqlHighlighter
from coco_sql.languages.sql.primitives import SqlPrimitives
from coco_sql.options import Option, OptionTable, setting

if TYPE_CHECKING:
    from coco_sql.evaluate import Outcome
    from coco_sql.mutate.base import Mutator
    from coco_sql.reflect.environment import DraftEnvironment
    from coco_sql.store.base import CandidateEngine
    from coco_sql.tasks import TaskPack


def _bind(task: TaskPack, engine: CandidateEngine | None = None) -> Language:
    from coco_sql.languages.sql.language import SqlLanguage

    return SqlLanguage(task, engine)


@dataclass(frozen=True)
class SqlOfflineSettings(OfflineSettings):
    """The offline mutator's settings of a SQL task: those every kind takes, and the few-shot cap."""

    max_examples: int = setting(0, "few-shot examples per AI_CLASSIFY call (0: no cap)", low=0, high=10_000)


PROMPT_ONLY_SETTINGS = OptionTable(
    "mutator_settings of the prompt_only baseline (Snowflake's optimizer's search space: the AI call's prompt "
    "and model)",
    (
        Option("max_drafts", "integer", 32, "drafts tested on training rows per iteration", low=1, high=1024),
        Option("max_examples", "integer", 0, "few-shot examples per call (0: no cap)", low=0, high=10_000),
        Option("models", "strings", [], "candidate models of an AI_COMPLETE call, besides a spec's "
               "optimization.models", example="['claude-haiku-4-5', 'openai-gpt-5-nano']"),
    ),
)  # fmt: skip


def _offline(settings: SqlOfflineSettings | None = None) -> Mutator:
    from coco_sql.languages.sql.mutate.offline import OfflineMutator

    s = settings or SqlOfflineSettings()
    return OfflineMutator(max_drafts=s.max_drafts, probe=s.probe, max_examples=s.max_examples)


def _prompt_only(language: Language, settings: Mapping[str, Any]) -> Mutator:
    """The `prompt_only` baseline (`mutate.prompt_only`); it reads the models of the task's spec itself."""
    from coco_sql.languages.sql.mutate.prompt_only import PromptOnlyMutator

    return PromptOnlyMutator(int(settings["max_drafts"]), int(settings["max_examples"]), settings["models"])


def _cross_fit(env: DraftEnvironment, code: str, outcome: Outcome) -> Outcome:
    from coco_sql.languages.sql.cross_fit import cross_fitted_train

    return cross_fitted_train(env, code, outcome)


class _InEngineDrafts:
    """The SQL runner's wrapping of a program (rows of id VARCHAR and output), when programs run in the probe
    sandbox (not on a warehouse engine)."""

    def runs_here(self, language: Language) -> bool:
        from coco_sql.languages.sql.language import SqlLanguage

        return isinstance(language, SqlLanguage) and language.engine is None

    def query(self, runnable: str, output_column: str) -> str:
        output = output_column.replace('"', '""')
        return f'SELECT CAST(id AS VARCHAR) AS id, "{output}" AS output FROM ({runnable}) AS candidate'


class _SpecTasks:
    """`languages.sql.aifo.SpecTasks`, imported on first use."""

    def options(self, name: str, given: Mapping[str, Any]) -> dict[str, Any]:
        from coco_sql.languages.sql.aifo import SpecTasks

        return SpecTasks().options(name, given)

    def settings(self, options: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
        from coco_sql.languages.sql.aifo import SpecTasks

        return SpecTasks().settings(options, types)


def _prompt(task: TaskPack) -> str:
    """What a program is, for the coding agent's system prompt (`agent/templates/agent_system.j2`)."""
    columns = ", ".join(f"{name} {kind}" for name, kind in task.input_columns.items())
    functions = ", ".join(sorted(task.allowed_functions))
    text = (
        f"A program is one read-only {task.dialect} SQL query over the relation `input` with columns\n{columns}. "
        f"It must return one row per `id` with the column `{task.contract.output}` ({task.contract.type}).\n"
    )
    return text + (f"Functions enabled on top of plain SQL: {functions}." if functions else "")


def _uses_ai(task: TaskPack) -> bool:
    """A SQL task calls AI when it enables an AI function (or PROMPT)."""
    from coco_sql.sqlkit.ai_binding import UDFS

    return any(name in UDFS or name == "PROMPT" for name in task.allowed_functions)


def _references(task: TaskPack) -> bool:
    """SQL tasks that enable AI functions read the training rows as `examples` (`tasks.references`)."""
    return task.uses_ai


PLUGIN = KindPlugin(
    name="sql",
    bind=_bind,
    program_prompt=_prompt,
    offline_mutator=_offline,
    offline_settings=SqlOfflineSettings,
    primitives=SqlPrimitives(),
    cross_fit=_cross_fit,
    exports=SqlExports(),
    highlight=SqlHighlighter(),
    references=_references,
    uses_ai=_uses_ai,
    in_engine_drafts=_InEngineDrafts(),
    task_spec=_SpecTasks(),
    mutators={"prompt_only": _prompt_only},
    mutator_settings={"prompt_only": PROMPT_ONLY_SETTINGS},
    dialects=True,
    warn_bytes=8 * 1024,
)
