"""Program languages behind one seam (`languages.base.Language`): SQL, Python, and agent specs (data agents).

LANGUAGES maps a task's `language` (task.toml) to the factory of its implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coco_sql.languages.base import Language, LanguageFactory, Program, Runner, RunResult, language_for
from coco_sql.languages.python import PythonLanguage
from coco_sql.languages.sql import SqlLanguage

if TYPE_CHECKING:
    from coco_sql.tasks import TaskPack


def _agent_spec(task: TaskPack) -> Language:
    """Data agents (`languages.agent_spec`), imported when a task asks for them."""
    from coco_sql.languages.agent_spec.language import AgentSpecLanguage

    return AgentSpecLanguage(task)


LANGUAGES: dict[str, LanguageFactory] = {
    "sql": SqlLanguage,
    "python": PythonLanguage,
    "agent_spec": _agent_spec,
}

__all__ = [
    "LANGUAGES",
    "Language",
    "LanguageFactory",
    "Program",
    "PythonLanguage",
    "RunResult",
    "Runner",
    "SqlLanguage",
    "language_for",
]
