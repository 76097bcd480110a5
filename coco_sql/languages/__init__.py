"""Program languages behind one seam (`languages.base.Language`): SQL, and Python.

LANGUAGES maps a task's `language` (task.toml) to the factory of its implementation.
"""

from __future__ import annotations

from coco_sql.languages.base import Language, LanguageFactory, Program, Runner, RunResult, language_for
from coco_sql.languages.python import PythonLanguage
from coco_sql.languages.sql import SqlLanguage

LANGUAGES: dict[str, LanguageFactory] = {"sql": SqlLanguage, "python": PythonLanguage}

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
