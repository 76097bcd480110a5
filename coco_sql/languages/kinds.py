"""The program kinds a task's `language` (task.toml) names: the factory of each implementation, and the parts
some kinds have of their own (a pack loader for their task.toml keys, export forms)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from coco_sql.languages.base import Language, LanguageFactory, ProgramParts
from coco_sql.languages.python import PythonLanguage
from coco_sql.languages.sql import SqlLanguage

if TYPE_CHECKING:
    from coco_sql.tasks import TaskPack


def _dbt(task: TaskPack) -> Language:
    from coco_sql.languages.dbt.language import DbtLanguage  # dbt's modules load only for a dbt task

    return DbtLanguage(task)


LANGUAGES: dict[str, LanguageFactory] = {"sql": SqlLanguage, "python": PythonLanguage, "dbt": _dbt}
#: kinds whose task.toml has keys of its own: language -> "module:function(root, reader, doc, fingerprint)"
PACK_LOADERS: dict[str, str] = {"dbt": "coco_sql.languages.dbt.task:load_dbt_pack"}

#: kinds that export in forms of their own: language -> module with `export_text(code, form, task) -> str`
#: and `write_export(text, folder) -> list[str]` (a form that is a folder of files)
EXPORTERS: dict[str, str] = {"dbt": "coco_sql.languages.dbt.export"}


#: kinds whose programs the report shows as files and a graph: language -> module with
#: `program_parts(code) -> languages.base.ProgramParts | None`
REPORT_PARTS: dict[str, str] = {"dbt": "coco_sql.languages.dbt.report_parts"}


def program_parts(language: str, code: str) -> ProgramParts | None:
    """`code` as files and a graph for the report, for a kind that has a `REPORT_PARTS` hook; else None."""
    if language not in REPORT_PARTS:
        return None
    return importlib.import_module(REPORT_PARTS[language]).program_parts(code)


#: kinds that check-deploy checks in parts of their own: language -> module with
#: `deploy_findings(code, task, where, dialect) -> list[sql_deploy_check.Finding]`
DEPLOY_CHECKS: dict[str, str] = {"dbt": "coco_sql.languages.dbt.deploy_check"}


def deploy_check(language: str) -> Callable[..., list[Any]] | None:
    """The check-deploy function of a kind that has one (`DEPLOY_CHECKS`), else None."""
    if language not in DEPLOY_CHECKS:
        return None
    return importlib.import_module(DEPLOY_CHECKS[language]).deploy_findings


def exporter(language: str) -> Any:
    """The export module of a kind that has one (`EXPORTERS`), else None."""
    return importlib.import_module(EXPORTERS[language]) if language in EXPORTERS else None


def pack_loader(language: object) -> Callable[..., TaskPack] | None:
    """The pack loader of a kind that has one (`PACK_LOADERS`), else None (the loader reads the pack)."""
    if not isinstance(language, str) or language not in PACK_LOADERS:
        return None
    module, function = PACK_LOADERS[language].split(":")
    return getattr(importlib.import_module(module), function)
