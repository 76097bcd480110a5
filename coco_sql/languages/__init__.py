"""Program kinds behind one seam (`languages.base`): one package per kind (`sql/`, `python/`), each a
`KindPlugin` found by name through `coco_sql.plugins`. Importing this package loads no kind."""

from __future__ import annotations

from coco_sql.languages.base import (
    KindPlugin,
    Language,
    LanguageFactory,
    Program,
    Runner,
    RunResult,
    language_for,
)

__all__ = ["KindPlugin", "Language", "LanguageFactory", "Program", "RunResult", "Runner", "language_for"]
