"""The program kinds a task's `language` (task.toml) names, each the factory of its implementation."""

from __future__ import annotations

from coco_sql.languages.base import LanguageFactory
from coco_sql.languages.python import PythonLanguage
from coco_sql.languages.sql import SqlLanguage

LANGUAGES: dict[str, LanguageFactory] = {"sql": SqlLanguage, "python": PythonLanguage}
