"""Program kinds behind one seam (`languages.base`): one package per kind (`sql/`, `python/`, ...), each a
`KindPlugin` (`languages.kind`) found by name through `coco_sql.plugins`. Importing this package loads no kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coco_sql.languages.base import Language, LanguageFactory, Program, Runner, RunResult

if TYPE_CHECKING:
    from coco_sql.store.base import CandidateEngine
    from coco_sql.tasks import TaskPack


def language_for(task: TaskPack, engine: CandidateEngine | None = None) -> Language:
    """The language a task's programs are written in (`language` in task.toml; default sql), bound to `engine`
    when the store runs candidates itself. The kind comes from `plugin_loader`, not `plugins`, whose `KindPlugin`
    type names the loop that imports this package (`plugin_loader`'s docstring)."""
    from coco_sql.plugin_loader import load_kind

    return load_kind(task.language, task=task.name).bind(task, engine)


__all__ = ["Language", "LanguageFactory", "Program", "RunResult", "Runner", "language_for"]
