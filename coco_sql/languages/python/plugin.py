"""The Python kind as a plug-in (`languages.base.KindPlugin`): what `coco_sql.plugins` resolves `python` to.

Its own task.toml keys are `[program] entry` (the function the harness calls) and `harness` (the module that
calls it on every instance); it has no export form but the program itself, and no reference tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coco_sql.languages.base import Language
from coco_sql.languages.kind import KindPlugin, OfflineSettings
from coco_sql.languages.python.highlight import PythonHighlighter
from coco_sql.languages.python.primitives import PythonPrimitives

if TYPE_CHECKING:
    from coco_sql.mutate.base import Mutator
    from coco_sql.store.base import CandidateEngine
    from coco_sql.tasks import TaskPack
    from coco_sql.tasks.pack_files import Reader


def _bind(task: TaskPack, engine: CandidateEngine | None = None) -> Language:
    from coco_sql.languages.python.language import PythonLanguage

    return PythonLanguage(task, engine=engine)


def _offline(settings: OfflineSettings | None = None) -> Mutator:
    """The Python operators (`languages.python.mutator`), with the settings every kind takes."""
    from coco_sql.languages.python.mutator import PythonOfflineMutator

    return PythonOfflineMutator(settings or OfflineSettings())


def _prompt(task: TaskPack) -> str:
    """What a program is, for the coding agent's system prompt."""
    return f"A program is a Python module; its contract: {task.contract.output} ({task.contract.type}).\n"


class PythonTaskKeys:
    """`[program] entry` and `harness`, both required (checked as code by `language.pack_spec`)."""

    program_keys = ("entry", "harness")

    def read(
        self, reader: Reader, root: Path, program: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[Path]]:
        from coco_sql.tasks.pack_files import display

        entry = reader.get(program, "program.entry", str)
        harness_path = reader.file_path(root, program, "program.harness")
        assert harness_path is not None
        try:
            harness = harness_path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise reader.error("program.harness", f"{display(harness_path)} is not UTF-8 text") from None
        return {"entry": entry, "harness": harness}, [harness_path]


PLUGIN = KindPlugin(
    name="python",
    bind=_bind,
    program_prompt=_prompt,
    offline_mutator=_offline,
    primitives=PythonPrimitives(),
    highlight=PythonHighlighter(),
    task_keys=PythonTaskKeys(),
)
