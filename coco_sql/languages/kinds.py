"""The program kinds a task's `language` (task.toml) names: the factory of each implementation, and the parts
some kinds have of their own (a pack loader for their task.toml keys, export forms)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from coco_sql.languages.base import Language, LanguageFactory
from coco_sql.languages.python import PythonLanguage
from coco_sql.languages.sql import SqlLanguage

if TYPE_CHECKING:
    from coco_sql.tasks import TaskPack


def _dbt(task: TaskPack) -> Language:
    from coco_sql.languages.dbt.language import DbtLanguage  # dbt's modules load only for a dbt task

    return DbtLanguage(task)


def _agent_spec(task: TaskPack) -> Language:
    from coco_sql.languages.agent_spec.language import AgentSpecLanguage  # loads only for a data-agent task

    return AgentSpecLanguage(task)


LANGUAGES: dict[str, LanguageFactory] = {
    "sql": SqlLanguage,
    "python": PythonLanguage,
    "dbt": _dbt,
    "agent_spec": _agent_spec,
}
#: kinds whose task.toml has keys of its own: language -> "module:function(root, reader, doc, fingerprint)"
PACK_LOADERS: dict[str, str] = {"dbt": "coco_sql.languages.dbt.task:load_dbt_pack"}

#: kinds that export in forms of their own: language -> module with `export_text(code, form, task) -> str`
#: and `write_export(text, folder) -> list[str]` (a form that is a folder of files)
EXPORTERS: dict[str, str] = {
    "dbt": "coco_sql.languages.dbt.export",
    "agent_spec": "coco_sql.languages.agent_spec.export_form",
}


def exporter(language: str) -> Any:
    """The export module of a kind that has one (`EXPORTERS`), else None."""
    return importlib.import_module(EXPORTERS[language]) if language in EXPORTERS else None


def pack_loader(language: object) -> Callable[..., TaskPack] | None:
    """The pack loader of a kind that has one (`PACK_LOADERS`), else None (the loader reads the pack)."""
    if not isinstance(language, str) or language not in PACK_LOADERS:
        return None
    module, function = PACK_LOADERS[language].split(":")
    return getattr(importlib.import_module(module), function)
