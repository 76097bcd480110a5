"""A data-agent task's own settings: the ``[agent_spec]`` table of its task.toml, checked here (the loader keeps a
kind's table as written, `tasks.loader`), and the tables and documents it names, loaded once per pack.

    [agent_spec]
    model = "smollm2"          # the model that runs the spec (--completion-model overrides it for a run)
    max_drafts = 4             # drafts the offline mutator tests per iteration, at most (each runs every question)
    [agent_spec.limits]        # one question's run: RunLimits and ToolLimits (a spec's budget may only lower them)
    max_turns = 10
    max_tokens = 60000
    seconds = 180
    max_output_tokens = 1024
    query_seconds = 10
    max_rows = 50
    [agent_spec.tables]        # the agent's tables: name = CSV file of the pack
    fees = "data/fees.csv"
    [agent_spec.documents]     # Markdown documents: the table `documents`, one row per section
    manual = "docs/manual.md"

The task's rows are its questions: input columns ``question`` (and ``guidelines``, optional), expected column the
answer. Every problem is one line naming the key (TaskError), raised before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coco_sql.errors import TaskError
from coco_sql.languages.agent_spec.pack import TaskTables, load_tables
from coco_sql.languages.agent_spec.runtime import RunLimits
from coco_sql.languages.agent_spec.tools import ToolLimits

if TYPE_CHECKING:
    from coco_sql.tasks import TaskPack

KEYS = ("model", "max_drafts", "limits", "tables", "documents")
_LIMITS = {
    "max_turns": (RunLimits, 1, 100),
    "max_tokens": (RunLimits, 100, 10_000_000),
    "seconds": (RunLimits, 1, 3_600),
    "max_output_tokens": (RunLimits, 16, 100_000),
    "query_seconds": (ToolLimits, 1, 600),
    "max_rows": (ToolLimits, 1, 10_000),
}


@dataclass(frozen=True)
class AgentTask:
    """What the kind needs of a task besides its rows."""

    model: str
    max_drafts: int
    run_limits: RunLimits
    tool_limits: ToolLimits
    tables: TaskTables
    question_column: str = "question"
    guidelines_column: str | None = "guidelines"


def agent_task(task: TaskPack) -> AgentTask:
    """The task's checked settings and its loaded tables; TaskError (one line) for anything wrong."""
    where = f"task {task.name!r}: [agent_spec]"
    table = dict(task.settings)
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise TaskError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(KEYS)})")
    model = table.get("model", "smollm2")
    if not isinstance(model, str) or not model.strip():
        raise TaskError(f"{where}: model must be a model name such as 'smollm2' or 'openai/gpt-4o-mini'")
    max_drafts = _integer(table.get("max_drafts", 4), f"{where} max_drafts", 1, 1024)
    limits = _mapping(table.get("limits", {}), f"{where}.limits")
    bad = sorted(set(limits) - set(_LIMITS))
    if bad:
        raise TaskError(f"{where}.limits: unknown key {bad[0]!r} (keys: {', '.join(_LIMITS)})")
    values = {k: _integer(v, f"{where}.limits {k}", *_LIMITS[k][1:]) for k, v in limits.items()}
    run_limits = RunLimits(**{k: v for k, v in values.items() if _LIMITS[k][0] is RunLimits})
    tool_limits = ToolLimits(**{k: v for k, v in values.items() if _LIMITS[k][0] is ToolLimits})
    files = {
        kind: {name: _file(task, path, f"{where}.{kind}.{name}") for name, path in _mapping(table.get(kind, {}),
                                                                                         f"{where}.{kind}").items()}
        for kind in ("tables", "documents")
    }  # fmt: skip
    if not files["tables"]:
        raise TaskError(f"{where}.tables: the agent needs at least one table (name = CSV file of the pack)")
    columns = task.input_columns
    if "question" not in columns:
        raise TaskError(
            f"task {task.name!r}: [data.input_columns] needs a column 'question' (the question text)"
        )
    _answered(task)
    documents = {}
    for name, path in files["documents"].items():
        try:
            documents[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise TaskError(f"{where}.documents.{name}: {path.name} is not UTF-8 text") from None
    tables = load_tables(files["tables"], documents)
    guidelines = "guidelines" if "guidelines" in columns else None
    return AgentTask(model.strip(), max_drafts, run_limits, tool_limits, tables, "question", guidelines)


def _answered(task: TaskPack) -> None:
    """TaskError (one line, naming the row) for a question row without an expected answer: it could be neither
    scored nor held out. (Only emptiness is read here: the answers stay with the evaluator.)"""
    for split in ("train", "val", "test"):
        for question_id, answer in task.split(split).expected.items():
            if answer is None or not str(answer).strip():
                raise TaskError(
                    f"task {task.name!r}: question {question_id!r} has no expected answer (the answer column is "
                    "empty); every row needs one"
                )


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TaskError(f"{where}: expected a table, got {type(value).__name__}")
    return value


def _integer(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TaskError(f"{where}: must be an integer in [{low:,}, {high:,}] (got {value!r})")
    return value


def _file(task: TaskPack, value: Any, where: str) -> Path:
    """The pack file `value` names, as the loader checked it (inside the pack, no link)."""
    if not isinstance(value, str) or value not in task.settings_files:
        raise TaskError(
            f"{where}: {value!r} is not a file of the pack (a path relative to the pack directory)"
        )
    return task.settings_files[value]
